"""Decoding token ids: the batched entry that every caller decodes through. Sources go in
length-sorted batches (nmt_cli/decoding/length_batches.py), decoded side by side on single-threaded
workers, each batch searched (nmt_cli/decoding/search.py), decoded under its forced terms and
prefixes (nmt_cli/decoding/forced.py) or sampled (nmt_cli/decoding/sampling.py); results come back
in input order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import torch

from nmt_cli.config.sections import DecodeConfig
from nmt_cli.decoding.constraints import Forced
from nmt_cli.decoding.forced import forced_decode_ids
from nmt_cli.decoding.length_batches import (
    auto_batch_size,
    length_batches,
    output_vocabulary,
    padded_sources,
    sampling_batches,
    sampling_vocabulary,
    single_threaded_pool,
)
from nmt_cli.decoding.sampling import Sampling, sample
from nmt_cli.decoding.search import search
from nmt_cli.decoding.settings import SearchSettings
from nmt_cli.decoding.shortlist import Shortlist
from nmt_cli.decoding.steps import Hypothesis
from nmt_cli.model.fast_decoding import prepared_for_decoding, setup_of, unprepared

__all__ = ["auto_batch_size", "decode_ids", "length_batches"]
_batches = length_batches  # the name the batching tests know


def decode_ids(
    model,
    sources: Sequence[Sequence[int]],
    config: DecodeConfig,
    device: torch.device | str = "cpu",
    *,
    shortlist: Shortlist | None = None,
    nbest: int = 1,
    attention: bool = False,
    forced: Sequence[Forced] | None = None,
    sampling: Sampling | None = None,
    warn: Callable[[str], None] | None = None,
    language: torch.Tensor | None = None,
) -> list[list[Hypothesis]]:
    """Decode token-id sources (non-empty) in length-sorted batches; results in input order.
    ``shortlist``: the model's vocabulary shortlist, used when ``config.shortlist`` is on;
    ``nbest``: hypotheses per sentence; ``attention``: keep each hypothesis's attention weights;
    ``forced``: each sentence's terms and prefix (nmt_cli/decoding/constraints.py); ``sampling``:
    sample instead of searching (nmt_cli/decoding/sampling.py); ``warn`` hears of forced terms
    that found no place; ``language``: the target language's pieces, the only ones written
    (nmt_cli/decoding/language_vocabulary.py). ``config.workers`` 0 means one worker per torch
    CPU thread."""
    again = partial(
        decode_ids,
        model,
        config=config,
        device=device,
        shortlist=shortlist,
        nbest=nbest,
        attention=attention,
        language=language,
    )
    if unprepared(model):  # prepared for this call only (validation: the weights move on)
        with prepared_for_decoding(model):
            return again(sources, forced=forced, sampling=sampling, warn=warn)
    settings = SearchSettings.of(config, nbest=nbest, attention=attention)
    use_shortlist = shortlist if config.shortlist else None
    if sampling is not None:
        return _sampled(model, sources, config, settings, device, sampling, use_shortlist, language)
    if forced is not None and any(forced):
        return forced_decode_ids(
            model,
            sources,
            forced,
            config,
            device,
            shortlist=shortlist,
            nbest=nbest,
            attention=attention,
            plain=again,
            warn=warn,
            language=language,
        )
    return _searched(model, sources, config, settings, device, use_shortlist, language)


def _searched(model, sources, config, settings, device, shortlist, language):
    """Search (greedy or beam) over length-sorted batches, side by side on CPU workers."""
    lengths = [len(s) for s in sources]
    order = sorted(range(len(sources)), key=lambda i: -lengths[i])
    results: list[list[Hypothesis] | None] = [None] * len(sources)

    def run(batch: list[int]) -> tuple[list[int], list[list[Hypothesis]]]:
        src, src_lengths = padded_sources(sources, batch)
        vocab = output_vocabulary(shortlist, language, src, src_lengths, config, device)
        return batch, search(model, src.to(device), src_lengths, settings, vocab)

    on_cpu = torch.device(device).type == "cpu"
    workers = config.workers or torch.get_num_threads()
    side_by_side = workers if on_cpu else 1
    bf16 = setup_of(model).bf16_on_cpu
    batches = list(length_batches(order, lengths, config, bf16, side_by_side, settings.nbest))
    if side_by_side > 1 and len(batches) > 1:
        with single_threaded_pool(min(workers, len(batches))) as pool:
            decoded = list(pool.map(run, batches))
    else:
        decoded = map(run, batches)
    for batch, hyps in decoded:
        for i, h in zip(batch, hyps):
            results[i] = h
    return results


def _sampled(model, sources, config, settings, device, how, shortlist, language):
    """Sampled translations in input order; each batch draws from its own generator
    (nmt_cli/decoding/sampling.py), so batches are decoded one after the other."""
    results: list[list[Hypothesis]] = [[] for _ in sources]
    for batch in sampling_batches([len(s) for s in sources], config):
        src, src_lengths = padded_sources(sources, batch)
        vocab = sampling_vocabulary(shortlist, language, src, config, device)
        generator = how.generator(batch[0])
        hyps = sample(model, src.to(device), src_lengths, how, generator, settings, vocab)
        for i, h in zip(batch, hyps):
            results[i] = h
    return results
