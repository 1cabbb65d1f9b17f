"""Batches of token-id sources: length-sorted, cut to the configured size or token budget, padded,
each with what its sentences may produce, and the pool of single-threaded workers that decodes
them side by side (nmt_cli/decoding/decode.py)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import torch

from nmt_cli.config.sections import DecodeConfig
from nmt_cli.decoding.language_vocabulary import restricted, restricted_ids
from nmt_cli.decoding.shortlist import Candidates, Shortlist

# Sentences per batch when decode.batch_size is 0 (auto_batch_size); docs/results.md measured them.
GREEDY_BATCH, GREEDY_BATCH_BF16, BEAM_BATCH = 128, 192, 64
SAMPLE_BATCH = 128  # sentences per sampled batch when decode.batch_size is 0
TAIL_ROWS = 32  # the smallest batch, in rows a step (sentences x beam), length_batches tapers to


def auto_batch_size(config: DecodeConfig, bf16: bool = False, nbest: int = 1) -> int:
    """Sentences per batch when none is given: GREEDY_BATCH for greedy search (GREEDY_BATCH_BF16
    for a model decoding in bf16 on the CPU, whose products gain more from rows), BEAM_BATCH for
    beam search, which already has K rows per sentence."""
    if config.batch_size > 0:
        return config.batch_size
    if config.beam_size == 1 and nbest == 1:
        return GREEDY_BATCH_BF16 if bf16 else GREEDY_BATCH
    return BEAM_BATCH


def length_batches(
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
def single_threaded_pool(workers: int):
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


def sampling_vocabulary(
    shortlist: Shortlist | None,
    language: torch.Tensor | None,
    src: torch.Tensor,
    config: DecodeConfig,
    device,
) -> torch.Tensor | None:
    """What a sampled batch may produce: one set for all its sentences (the shortlist's union
    for the batch, None: every piece), cut to the target language's pieces where given."""
    vocab = (
        None
        if shortlist is None
        else shortlist.vocabulary(src, config.shortlist_per_source, config.shortlist_frequent)
    )
    vocab = restricted_ids(vocab, language)
    return None if vocab is None else vocab.to(device)


def sampling_batches(lengths: Sequence[int], config: DecodeConfig) -> Iterator[list[int]]:
    """Length-sorted batches of ``config.batch_size`` sentences (SAMPLE_BATCH when 0), cut by
    count alone, as each batch's draws come from its own generator."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    size = config.batch_size if config.batch_size > 0 else SAMPLE_BATCH
    for start in range(0, len(order), size):
        yield order[start : start + size]
