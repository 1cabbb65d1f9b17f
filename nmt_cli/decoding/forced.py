"""Decoding lines with forced terms and prefixes, in two passes (nmt_cli/decoding/constraints.py
has the search itself; what each line must carry comes from nmt_cli/translation/forcing.py).

Sentences without a prefix are first decoded as they would be without anything forced, in the
same batches, so that a sentence with no term comes out byte-identical; a sentence whose
translation already carries its terms keeps it. The others (a prefix, or a term missing) go
through the constrained search, and a sentence whose terms found no place under its attention
rule tries once more without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from nmt_cli.decoding.constraints import Forced, constrained_beam_search
from nmt_cli.decoding.length_batches import output_vocabulary, padded_sources
from nmt_cli.decoding.settings import SearchSettings
from nmt_cli.decoding.steps import Hypothesis

# Sentences a constrained batch when decode.batch_size is 0: its candidates and term states grow
# with the batch, so it takes fewer than plain beam search's batches
FORCED_BATCH = 32


def forced_decode_ids(
    model,
    sources: Sequence[Sequence[int]],
    forced: Sequence[Forced],
    config,
    device,
    *,
    shortlist=None,
    nbest: int = 1,
    attention: bool = False,
    plain,
    warn=None,
    language=None,
) -> list[list[Hypothesis]]:
    """``plain`` decoding (translate.decode_ids) for every sentence without a prefix, in the
    batches it would have without ``forced``; then the constrained search for the sentences
    with a prefix and for those whose plain translation misses a term, length-sorted in batches
    of ``config.batch_size`` (or FORCED_BATCH). A sentence whose terms do not fit under
    its length cap keeps its plain translation, one with a prefix too (``warn`` says how many)."""
    free = [i for i, f in enumerate(forced) if not f.prefix]
    results: list[list[Hypothesis]] = [[] for _ in sources]
    if free:
        for i, hyps in zip(free, plain([sources[i] for i in free])):
            results[i] = hyps
    todo = [
        i
        for i, f in enumerate(forced)
        if f.prefix or (f.terms and not (results[i] and f.satisfied_by(results[i][0].tokens)))
    ]
    todo.sort(key=lambda i: -len(sources[i]))
    size = config.batch_size if config.batch_size > 0 else FORCED_BATCH
    use_shortlist = shortlist if config.shortlist else None
    beam = max(config.beam_size, 2)
    settings = replace(
        SearchSettings.of(config, nbest=min(nbest, beam), attention=attention), beam_size=beam
    )
    for placement in (True, False):
        for start in range(0, len(todo), size):
            batch = todo[start : start + size]
            src, src_lengths = padded_sources(sources, batch)
            vocab = output_vocabulary(use_shortlist, language, src, src_lengths, config, device)
            hyps = constrained_beam_search(
                model,
                src.to(device),
                src_lengths,
                [forced[i] for i in batch],
                settings,
                vocab=vocab,
                placement=placement,
            )
            for i, h in zip(batch, hyps):
                if h:
                    results[i] = h
        # a sentence whose terms found no place under the attention rule tries without it
        todo = [
            i for i in todo if not (results[i] and forced[i].satisfied_by(results[i][0].tokens))
        ]
        if not todo:
            break
    missing = [i for i in todo if not results[i]]  # a prefix's sentence has no plain one yet
    for i, hyps in zip(missing, plain([sources[i] for i in missing]) if missing else []):
        results[i] = hyps
    if todo and warn is not None:
        warn(
            f"warning: {len(todo)} sentence(s) could not fit their prefix or forced terms under "
            "the length cap and keep their unforced translation"
        )
    return results
