"""Decoding token ids in batches: length-sorted, cut to the configured size or token budget,
decoded side by side on single-threaded workers, results back in input order."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING

import torch

from nmt_cli.config.sections import DecodeConfig
from nmt_cli.decoding.language_vocabulary import restricted
from nmt_cli.decoding.search import Hypothesis, search
from nmt_cli.decoding.settings import SearchSettings
from nmt_cli.decoding.shortlist import Candidates, Shortlist
from nmt_cli.model.fast_decoding import prepared_for_decoding, setup_of, unprepared

if TYPE_CHECKING:
    from nmt_cli.decoding.constraints import Forced
    from nmt_cli.decoding.sampling import Sampling

# Sentences per batch when decode.batch_size is 0 (auto_batch_size); docs/results.md measured them.
GREEDY_BATCH, GREEDY_BATCH_BF16, BEAM_BATCH = 128, 192, 64
TAIL_ROWS = 32  # the smallest batch, in rows a step (sentences x beam), that _batches tapers to


def auto_batch_size(config: DecodeConfig, bf16: bool = False, nbest: int = 1) -> int:
    """Sentences per batch when none is given: GREEDY_BATCH for greedy search (GREEDY_BATCH_BF16
    for a model decoding in bf16 on the CPU, whose products gain more from rows), BEAM_BATCH for
    beam search, which already has K rows per sentence."""
    if config.batch_size > 0:
        return config.batch_size
    if config.beam_size == 1 and nbest == 1:
        return GREEDY_BATCH_BF16 if bf16 else GREEDY_BATCH
    return BEAM_BATCH


def _batches(
    order: Sequence[int],
    lengths: Sequence[int],
    config: DecodeConfig,
    bf16: bool = False,
    workers: int = 1,
    nbest: int = 1,
) -> Iterator[list[int]]:
    """Length-sorted ``order`` in batches of the configured size (or token budget). With several
    workers the last batches taper: none takes more than its share, 1/workers, of the sentences
    still left, down to TAIL_ROWS rows a step. Workers take batches in turn as they come free,
    and the one that takes the last full batch would otherwise decode it while the others wait.
    The sizes depend on the count left alone, never on timing, so a given input is always cut
    the same way."""
    size = auto_batch_size(config, bf16, nbest)
    floor = -(-TAIL_ROWS // max(config.beam_size, 1))
    budget = config.batch_tokens
    left = len(order)

    def cap() -> int:  # the sentences the next batch may take
        most = size if budget <= 0 else left
        return most if workers <= 1 else min(most, max(floor, -(-left // workers)))

    batch: list[int] = []
    longest, limit = 0, cap()
    for i in order:
        longest_if = max(longest, lengths[i], 1)
        too_big = len(batch) >= limit or (budget > 0 and longest_if * (len(batch) + 1) > budget)
        if batch and too_big:
            yield batch
            left -= len(batch)
            batch, longest_if, limit = [], max(lengths[i], 1), cap()
        batch.append(i)
        longest = longest_if
    if batch:
        yield batch


@contextmanager
def _single_threaded_pool(workers: int):
    """A pool of ``workers`` threads, each running torch ops on one core, so that batches are
    decoded side by side rather than one at a time on all cores (docs/results.md compares the
    two). Grad mode is per thread: the search functions turn gradients off themselves."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    pool = ThreadPoolExecutor(workers, initializer=torch.set_num_threads, initargs=(1,))
    try:
        yield pool
    except BaseException:
        # Ctrl-C: the batches not yet started are dropped rather than decoded before exiting.
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    else:
        pool.shutdown(wait=True)
    finally:
        torch.set_num_threads(before)


def padded_sources(
    sources: Sequence[Sequence[int]], batch: Sequence[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """The sentences ``batch`` of ``sources`` as one zero-padded (sentences, longest) tensor, and
    their lengths (at least 1: an empty source still has a row to attend to)."""
    lengths = [max(len(sources[i]), 1) for i in batch]
    src = torch.zeros(len(batch), max(lengths), dtype=torch.long)
    for row, i in enumerate(batch):
        src[row, : len(sources[i])] = torch.as_tensor(sources[i], dtype=torch.long)
    return src, torch.tensor(lengths)


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
    sample
    instead of searching (nmt_cli/decoding/sampling.py); ``warn`` hears of forced terms that found
    no place; ``language``: the target language's pieces, the only ones written
    (nmt_cli/decoding/language_vocabulary.py). ``config.workers`` 0 means one worker per torch CPU
    thread."""
    if unprepared(model):  # prepared for this call only (validation: the weights move on)
        with prepared_for_decoding(model):
            return decode_ids(
                model,
                sources,
                config,
                device,
                shortlist=shortlist,
                nbest=nbest,
                attention=attention,
                forced=forced,
                sampling=sampling,
                warn=warn,
                language=language,
            )
    if sampling is not None:
        from nmt_cli.decoding.sampling import sample_ids

        return sample_ids(
            model, sources, config, device, sampling, shortlist=shortlist, language=language
        )
    if forced is not None and any(forced):
        from nmt_cli.decoding.forced import forced_decode_ids

        def plain(subset):
            return decode_ids(
                model,
                subset,
                config,
                device,
                shortlist=shortlist,
                nbest=nbest,
                attention=attention,
                language=language,
            )

        return forced_decode_ids(
            model,
            sources,
            forced,
            config,
            device,
            shortlist=shortlist,
            nbest=nbest,
            attention=attention,
            plain=plain,
            warn=warn,
            language=language,
        )
    shortlist = shortlist if config.shortlist else None
    settings = SearchSettings.of(config, nbest=nbest, attention=attention)
    lengths = [len(s) for s in sources]
    order = sorted(range(len(sources)), key=lambda i: -lengths[i])
    results: list[list[Hypothesis] | None] = [None] * len(sources)

    def run(batch: list[int]) -> tuple[list[int], list[list[Hypothesis]]]:
        src, src_lengths = padded_sources(sources, batch)
        return batch, search(
            model,
            src.to(device),
            src_lengths,
            settings,
            output_vocabulary(shortlist, language, src, src_lengths, config, device),
        )

    on_cpu = torch.device(device).type == "cpu"
    workers = config.workers or torch.get_num_threads()
    side_by_side = workers if on_cpu else 1
    bf16 = setup_of(model).bf16_on_cpu
    batches = list(_batches(order, lengths, config, bf16, side_by_side, nbest))
    if side_by_side > 1 and len(batches) > 1:
        with _single_threaded_pool(min(workers, len(batches))) as pool:
            decoded = list(pool.map(run, batches))
    else:
        decoded = map(run, batches)
    for batch, hyps in decoded:
        for i, h in zip(batch, hyps):
            results[i] = h
    return results  # type: ignore[return-value]


def output_vocabulary(
    shortlist: Shortlist | None,
    language: torch.Tensor | None,
    src: torch.Tensor,
    src_lengths: torch.Tensor,
    config: DecodeConfig,
    device,
) -> Candidates | None:
    """What each sentence of a batch may produce: its shortlist set (None: every piece), cut to
    the target language's pieces where ``language`` is given."""
    vocab = (
        None
        if shortlist is None
        else shortlist.candidates(
            src, src_lengths, config.shortlist_per_source, config.shortlist_frequent
        )
    )
    if language is not None:
        vocab = restricted(vocab, language, src.size(0))
    return None if vocab is None else vocab.to(device)
