"""Training batches: sentence indices grouped by length into token budgets, an epoch at a time,
and the padded tensors a batch of a stored split becomes."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from nmt_cli.data.store import EncodedSplit, Side
from nmt_cli.data.tokenizer import BOS, EOS, PAD

if TYPE_CHECKING:
    import torch


@dataclass
class Batch:
    src: torch.Tensor  # (B, S) source ids, padded with PAD
    src_lengths: torch.Tensor  # (B,) int64, on CPU (pack_padded_sequence wants them there)
    tgt_in: torch.Tensor  # (B, T) BOS y_1 .. y_{T-1}
    tgt_out: torch.Tensor  # (B, T) y_1 .. y_{T-1} EOS
    tgt_tokens: int  # real target tokens, EOS included, padding not

    def to(self, device: torch.device) -> Batch:
        return Batch(
            self.src.to(device, non_blocking=True),
            self.src_lengths,
            self.tgt_in.to(device, non_blocking=True),
            self.tgt_out.to(device, non_blocking=True),
            self.tgt_tokens,
        )


def make_batch(split: EncodedSplit, indices: Sequence[int], max_src: int | None = None) -> Batch:
    srcs = split.src.take(indices)
    if max_src:
        srcs = [s[:max_src] for s in srcs]
    tgts = split.tgt.take(indices)
    return collate(srcs, tgts)


def collate(srcs: Sequence[np.ndarray], tgts: Sequence[np.ndarray]) -> Batch:
    n = len(srcs)
    src_len = np.array([len(s) for s in srcs], dtype=np.int64)
    tgt_len = np.array([len(t) + 1 for t in tgts], dtype=np.int64)
    src = np.full((n, max(1, int(src_len.max()))), PAD, dtype=np.int64)
    tgt_in = np.full((n, int(tgt_len.max())), PAD, dtype=np.int64)
    tgt_out = np.full_like(tgt_in, PAD)
    for i, (s, t) in enumerate(zip(srcs, tgts)):
        src[i, : len(s)] = s
        tgt_in[i, 0] = BOS
        tgt_in[i, 1 : len(t) + 1] = t
        tgt_out[i, : len(t)] = t
        tgt_out[i, len(t)] = EOS
    # An empty source still gets one (padding) position so attention has something to read.
    # here, not at the top: preprocessing never loads torch (nmt_cli/decoding/shortlist.py)
    import torch

    return Batch(
        torch.from_numpy(src),
        torch.from_numpy(np.maximum(src_len, 1)),
        torch.from_numpy(tgt_in),
        torch.from_numpy(tgt_out),
        int(tgt_len.sum()),
    )


class Batches(Sequence):
    """One epoch's batches without a Python object per batch: the sentence indices in length
    order (int32 while they fit), where each batch's run of them ends, and the order the batches
    are taken in. Item ``i`` is the i-th batch taken, an array of sentence indices."""

    def __init__(self, order: np.ndarray, bounds: np.ndarray, taken: np.ndarray):
        self.order, self.bounds, self.taken = order, bounds, taken

    def __len__(self) -> int:
        return len(self.taken)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        b = self.taken[i]
        return self.order[self.bounds[b] : self.bounds[b + 1]]


EPOCH_SHARD = 1 << 18  # pairs: a larger split's epoch is built and taken one shard at a time
SHARD_BLOCK = (
    1 << 12
)  # pairs: a shard is made of runs of this many neighbouring pairs, drawn at random


def token_batches(
    src_lengths: np.ndarray,
    tgt_lengths: np.ndarray,
    batch_tokens: int,
    seed: int,
    epoch: int,
    shuffle: bool = True,
    shard: int | None = None,
) -> Batches:
    """Group sentence indices into batches of about ``batch_tokens`` real target tokens.

    Sentences are sorted by (target, source) length with a random tie-break, so a batch holds
    sentences of nearly equal length and padding stays small; batch order is shuffled per epoch
    from ``seed`` and ``epoch`` (and ``shard``, for one shard of a large split's epoch), which
    makes the sequence reproducible for exact resume. A batch takes sentences in that order
    while their tokens fit (the first always).
    """
    rng = np.random.default_rng([seed, epoch] if shard is None else [seed, epoch, shard])
    n = len(src_lengths)
    longest = max(int(src_lengths.max(initial=0)), int(tgt_lengths.max(initial=0)))
    if shard is not None and shuffle and n < 2**21 and longest < 2**21:
        # One sort of one distinct 63-bit key (target length, source length, a random rank):
        # the same kind of order as the lexsort below, in one argsort instead of three sorts.
        key = (
            (tgt_lengths.astype(np.int64) << 42)
            | (src_lengths.astype(np.int64) << 21)
            | rng.permutation(n)
        )
        order = np.argsort(key)
        del key
    else:
        tie = rng.random(n) if shuffle else np.arange(n)
        order = np.lexsort((tie, src_lengths, tgt_lengths))
        del tie
    if n < 2**31:
        order = order.astype(np.int32)
    bounds = _batch_bounds(tgt_lengths, order, batch_tokens)
    taken = rng.permutation(len(bounds) - 1) if shuffle else np.arange(len(bounds) - 1)
    return Batches(order, bounds, taken)


def epoch_shards(
    split: EncodedSplit,
    batch_tokens: int,
    seed: int,
    epoch: int,
    rows: np.ndarray | None = None,
) -> Iterator[Batches]:
    """One epoch's batches (of sentence indices into ``split``), a shard at a time.

    A split of up to EPOCH_SHARD pairs is one shard: :func:`token_batches` over all of it. A
    larger one is cut, afresh each epoch, into shards of about EPOCH_SHARD pairs: its pairs
    are taken in runs of SHARD_BLOCK neighbours, the runs shuffled and dealt out to the shards in
    turn, and each shard batched and shuffled on its own. Every pair is seen once an epoch and a
    shard draws from the whole corpus (a list of corpora read one after another is mixed), while
    the memory this takes is a shard's, not the corpus's: a whole-corpus order would hold 4 bytes
    a pair for the whole epoch, and twice that while it is built. Reading runs of neighbours
    keeps the lengths' reads sequential.
    """
    if rows is not None:  # the epoch's draw of the pairs (directions.EpochMix), as one shard
        lengths = [side_lengths(side)[rows] for side in (split.src, split.tgt)]
        batches = token_batches(*lengths, batch_tokens, seed, epoch)
        yield Batches(rows[batches.order], batches.bounds, batches.taken)
        return
    n = len(split)
    if n <= EPOCH_SHARD:
        yield token_batches(
            side_lengths(split.src), side_lengths(split.tgt), batch_tokens, seed, epoch
        )
        return
    blocks = np.random.default_rng([seed, epoch]).permutation(-(-n // SHARD_BLOCK))
    for shard, members in enumerate(np.array_split(blocks, -(-n // EPOCH_SHARD))):
        starts = members.astype(np.int64) * SHARD_BLOCK
        rows = np.concatenate([np.arange(a, min(a + SHARD_BLOCK, n)) for a in starts.tolist()])
        lengths = [
            np.concatenate(
                [np.diff(side.offsets[a : min(a + SHARD_BLOCK, n) + 1]) for a in starts.tolist()]
            ).astype(np.int32)
            for side in (split.src, split.tgt)
        ]
        split.release_pages()
        batches = token_batches(*lengths, batch_tokens, seed, epoch, shard=shard)
        yield Batches(
            rows[batches.order].astype(np.int32 if n < 2**31 else np.int64),
            batches.bounds,
            batches.taken,
        )


def _batch_bounds(tgt_lengths: np.ndarray, order: np.ndarray, batch_tokens: int) -> np.ndarray:
    """Where each batch ends in ``order`` (a batch takes sentences while their tokens, target
    length + 1 each, fit in ``batch_tokens``; the first always). The order is sorted by target
    length, so it is a few runs of equal cost: the token count before any position is arithmetic
    on the runs, and the work in Python is per batch, not per sentence."""
    n = len(order)
    run_starts, run_costs = _equal_length_runs(tgt_lengths, order)
    run_tokens = np.zeros(len(run_starts), dtype=np.int64)  # tokens before each run
    np.cumsum((np.diff(np.append(run_starts, n)) * run_costs)[:-1], out=run_tokens[1:])
    bounds = [0]
    while bounds[-1] < n:
        start = bounds[-1]
        r = int(np.searchsorted(run_starts, start, side="right")) - 1
        limit = int(run_tokens[r] + (start - run_starts[r]) * run_costs[r]) + batch_tokens
        r = int(np.searchsorted(run_tokens, limit, side="right")) - 1
        run_end = int(run_starts[r + 1]) if r + 1 < len(run_starts) else n
        end = min(run_end, int(run_starts[r]) + (limit - int(run_tokens[r])) // int(run_costs[r]))
        bounds.append(max(end, start + 1))
    return np.asarray(bounds, dtype=np.int64)


def _equal_length_runs(
    tgt_lengths: np.ndarray, order: np.ndarray, chunk: int = 1 << 20
) -> tuple[np.ndarray, np.ndarray]:
    """Where each run of equal target length starts in ``order``, and its cost (length + 1)."""
    starts, costs, last = [], [], None
    for a in range(0, len(order), chunk):
        t = np.asarray(tgt_lengths[order[a : a + chunk]], dtype=np.int64)
        if last is None or t[0] != last:
            starts.append(np.array([a]))
            costs.append(t[:1])
        change = np.flatnonzero(np.diff(t)) + 1
        starts.append(change + a)
        costs.append(t[change])
        last = t[-1]
    if not starts:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(starts).astype(np.int64), np.concatenate(costs) + 1


def side_lengths(side: Side, chunk: int = 1 << 20) -> np.ndarray:
    """Each sentence's length as int16 (int32 if one is longer), computed a chunk at a time: a
    large split's int64 lengths and their difference temporaries would cost 8 bytes a pair each.
    The offsets' pages are unmapped as it goes (they would count in resident memory)."""
    for dtype in (np.int16, np.int32):
        out = np.empty(len(side), dtype=dtype)
        for i in range(0, len(out), chunk):
            part = np.diff(side.offsets[i : i + chunk + 1])
            if (i // chunk) % 8 == 7:
                side.release_pages()
            if len(part) and part.max() > np.iinfo(dtype).max:
                break
            out[i : i + chunk] = part
        else:
            side.release_pages()
            return out
    raise AssertionError("unreachable: int32 holds any sentence length")


def padding_fraction(split: EncodedSplit, batches: Sequence[np.ndarray]) -> float:
    """Share of padded positions over all source and target positions of the batches."""
    src_len, tgt_len = split.src.lengths, split.tgt.lengths + 1
    real = padded = 0
    for b in batches:
        real += int(src_len[b].sum() + tgt_len[b].sum())
        padded += len(b) * int(src_len[b].max() + tgt_len[b].max())
    return 1.0 - real / max(padded, 1)


def iterate_epoch(
    split: EncodedSplit,
    batch_tokens: int,
    seed: int,
    epoch: int,
    start: int = 0,
    rank: int = 0,
    world: int = 1,
    rows: np.ndarray | None = None,
) -> Iterator[tuple[int, Batch]]:
    """Yield (position, batch) for one epoch from ``start``; rank r of w takes every w-th batch
    (of each shard's batches, a multiple of w are used). Resuming builds the shards before
    ``start`` again to count their batches (a fraction of a second each)."""
    first = 0  # position of the shard's first batch
    for batches in epoch_shards(split, batch_tokens, seed, epoch, rows):
        usable = len(batches) - len(batches) % world
        for pos in range(max(start, first), first + usable, world):
            yield pos, make_batch(split, batches[pos - first + rank])
        first += usable
