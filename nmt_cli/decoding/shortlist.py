"""Vocabulary shortlist: decode over the target pieces likely for a batch, not all of them.

Most of a CPU decoding step goes into the output layer and what follows it (log-softmax, top-k)
over the whole target vocabulary, although a sentence can only plausibly use a few hundred
pieces. Learned once from the training split: the ``frequent`` most common target pieces, and for
every source piece s the ``per_source`` target pieces t most associated with it by sentence
co-occurrence, ranked by cooc(s,t)^2 / (count(s) count(t)) (so the pieces that come with s, not
the ones that come with everything). A sentence may produce the frequent pieces and the
candidates of its own source pieces, and its log-probabilities are normalised over that set. A
batch computes the output layer over the union of its sentences' sets (or, on the CPU, over the
union of each group of a few sentences: ``output_layer.group_columns``) and masks, per sentence,
the pieces outside the sentence's own set (``Candidates``): a translation never depends on the
sentences it is batched with.

The frequent pieces are stored most common first, 2,000 of them, and a decoder takes the first
``frequent`` (``decode.shortlist_frequent``): fewer make decoding faster, more lose less of a
well-trained model's quality (docs/translate.md). Shortlists saved before the ranking existed hold
300 pieces sorted by id and are used whole.

Learning the table is numpy only (``count_shortlist``); torch is imported where a Shortlist is
used, so that preprocessing never pays torch's import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from nmt_cli.data.tokenizer import BOS, EOS, PAD, UNK

if TYPE_CHECKING:
    import torch

SPECIALS = (PAD, UNK, BOS, EOS)


@dataclass
class Candidates:
    """What a batch of sentences may produce: the union ``ids`` (U,) of their sets, sorted, and
    ``allowed`` (B, U), each sentence's own set as a row of that union."""

    ids: torch.Tensor
    allowed: torch.Tensor

    def to(self, device) -> Candidates:
        return Candidates(self.ids.to(device), self.allowed.to(device))


@dataclass
class Shortlist:
    frequent: torch.Tensor  # (F,) int64 target ids, specials included; most common first if ranked
    table: torch.Tensor  # (src_vocab, K * members) int64 target ids per source piece, best first
    members: int = 1  # an ensemble's merged shortlist interleaves its members' columns
    ranked: bool = True  # False: an older shortlist, frequent sorted by id, used whole

    def vocabulary(self, src: torch.Tensor, per_source: int = 0, frequent: int = 0) -> torch.Tensor:
        """Sorted target ids a batch of source ids (B, S) may produce: the specials, the
        ``frequent`` most common pieces and the ``per_source`` best candidates of each source piece
        (0 = all the shortlist holds). Sorting keeps the special ids 0..3 at positions 0..3, so
        search code can mask PAD/BOS/EOS by position."""
        import torch

        table = self.table[:, : per_source * self.members] if per_source > 0 else self.table
        common = self.frequent[:frequent] if frequent > 0 and self.ranked else self.frequent
        candidates = table[src.flatten().cpu()].flatten()
        return torch.unique(torch.cat([_special_ids(), common, candidates]))  # unique() sorts

    def candidates(
        self, src: torch.Tensor, src_lengths: torch.Tensor, per_source: int = 0, frequent: int = 0
    ) -> Candidates:
        """Each sentence's own set, as ``vocabulary`` gives for it alone (padding excluded), laid
        out over the union of the batch's sets."""
        import torch

        src = src.cpu()
        real = torch.arange(src.size(1))[None, :] < src_lengths.cpu()[:, None]
        ids = self.vocabulary(src[real][None], per_source, frequent)
        table = self.table[:, : per_source * self.members] if per_source > 0 else self.table
        common = self.frequent[:frequent] if frequent > 0 and self.ranked else self.frequent
        allowed = torch.zeros(src.size(0), ids.numel(), dtype=torch.bool)
        allowed[:, torch.searchsorted(ids, torch.cat([_special_ids(), common]))] = True
        per_word = torch.searchsorted(ids, table[src])  # (B, S, W) positions in ids
        rows = torch.arange(src.size(0))[:, None, None].expand_as(per_word)
        keep = real[:, :, None].expand_as(per_word)
        allowed[rows[keep], per_word[keep]] = True
        return Candidates(ids, allowed)

    def to_payload(self) -> dict:
        import torch

        return {
            "frequent": self.frequent.to(torch.int32),
            "table": self.table.to(torch.int32),
            "ranked": self.ranked,
        }

    @classmethod
    def from_payload(cls, payload: dict) -> Shortlist:
        return cls(
            payload["frequent"].long(),
            payload["table"].long(),
            ranked=bool(payload.get("ranked", False)),
        )


def _special_ids():
    import torch

    return torch.tensor(SPECIALS, dtype=torch.long)


def learn_shortlist(
    src_ids: np.ndarray,
    src_offsets: np.ndarray,
    tgt_ids: np.ndarray,
    tgt_offsets: np.ndarray,
    src_vocab: int,
    tgt_vocab: int,
    **options,
) -> Shortlist:
    """The Shortlist of ``count_shortlist`` (same arguments)."""
    import torch

    frequent, table = count_shortlist(
        src_ids, src_offsets, tgt_ids, tgt_offsets, src_vocab, tgt_vocab, **options
    )
    return Shortlist(torch.from_numpy(frequent), torch.from_numpy(table))


def count_shortlist(
    src_ids: np.ndarray,
    src_offsets: np.ndarray,
    tgt_ids: np.ndarray,
    tgt_offsets: np.ndarray,
    src_vocab: int,
    tgt_vocab: int,
    *,
    frequent: int = 2000,
    per_source: int = 30,
    max_pairs: int = 300_000,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Count co-occurrences over (at most ``max_pairs`` sampled) training pairs; see module doc.
    Returns the frequent pieces (most common first) and the table, int64."""
    n = len(src_offsets) - 1
    pairs = np.arange(n)
    if n > max_pairs:
        pairs = np.sort(np.random.default_rng(seed).choice(n, max_pairs, replace=False))
    tgt_count = np.bincount(tgt_ids, minlength=tgt_vocab)
    tgt_count[list(SPECIALS)] = np.iinfo(np.int64).max  # specials always in
    top = np.argsort(-tgt_count, kind="stable")[: max(frequent, len(SPECIALS))]

    # Pairs a chunk at a time, each chunk in a few array operations rather than a loop over its
    # pairs
    s_docs = np.zeros(src_vocab, dtype=np.float64)  # sentence frequencies: once per sentence
    t_docs = np.zeros(tgt_vocab, dtype=np.float64)
    chunk_keys, chunk_counts = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for first in range(0, len(pairs), CHUNK_PAIRS):
        chunk = pairs[first : first + CHUNK_PAIRS]
        s_place, s = _distinct_per_pair(src_ids, src_offsets, chunk, src_vocab)
        t_place, t = _distinct_per_pair(tgt_ids, tgt_offsets, chunk, tgt_vocab)
        s_docs += np.bincount(s, minlength=src_vocab)
        t_docs += np.bincount(t, minlength=tgt_vocab)
        keys, counts = np.unique(
            _pair_keys(s_place, s, t_place, t, len(chunk), tgt_vocab), return_counts=True
        )
        chunk_keys.append(keys)
        chunk_counts.append(counts)
    pair_keys, where = np.unique(np.concatenate(chunk_keys), return_inverse=True)
    cooc = np.bincount(where, weights=np.concatenate(chunk_counts), minlength=len(pair_keys))
    s_of, t_of = pair_keys // tgt_vocab, pair_keys % tgt_vocab
    association = cooc.astype(np.float64) ** 2 / (s_docs[s_of] * t_docs[t_of])

    table = np.full((src_vocab, per_source), EOS, dtype=np.int64)  # EOS: a harmless filler
    order = np.lexsort((-association, s_of))  # by source piece, best association first
    s_sorted, t_sorted = s_of[order], t_of[order]
    rank = np.arange(len(s_sorted)) - np.searchsorted(s_sorted, s_sorted)  # place among its piece's
    best = rank < per_source
    table[s_sorted[best], rank[best]] = t_sorted[best]
    return top.astype(np.int64), table


CHUNK_PAIRS = 20_000


def _distinct_per_pair(ids: np.ndarray, offsets: np.ndarray, pairs: np.ndarray, vocab: int):
    """(place of the pair in ``pairs``, piece) for every distinct piece of every pair, ordered by
    place, then piece."""
    starts = offsets[pairs].astype(np.int64)
    lengths = offsets[pairs + 1].astype(np.int64) - starts
    before = np.cumsum(lengths) - lengths
    at = np.arange(int(lengths.sum())) + np.repeat(starts - before, lengths)
    keys = _distinct(
        np.repeat(np.arange(len(pairs), dtype=np.int64), lengths) * vocab + ids[at].astype(np.int64)
    )
    return keys // vocab, keys % vocab


def _distinct(keys: np.ndarray) -> np.ndarray:
    """np.unique by sorting, where numpy 2's hashing path is slow for these keys."""
    keys = np.sort(keys)
    return keys[np.concatenate([[True], keys[1:] != keys[:-1]])] if len(keys) else keys


def _pair_keys(s_place, s, t_place, t, pairs: int, tgt_vocab: int) -> np.ndarray:
    """s * tgt_vocab + t for every (source piece, target piece) of every pair: each source entry
    repeated once per target piece of its pair, against those target pieces in turn."""
    t_count = np.bincount(t_place, minlength=pairs)
    t_start = np.cumsum(t_count) - t_count
    repeats = t_count[s_place]
    within = np.arange(int(repeats.sum())) - np.repeat(np.cumsum(repeats) - repeats, repeats)
    return np.repeat(s, repeats) * tgt_vocab + t[np.repeat(t_start[s_place], repeats) + within]


def merge_shortlists(shortlists: list[Shortlist | None]) -> Shortlist | None:
    """An ensemble's shortlist: the union of its members' (None if any member has none). Columns
    and frequent pieces are interleaved rank by rank, so the first k·M columns hold every member's
    k best and the first f frequent pieces hold at least each member's f/M commonest."""
    if not shortlists or any(s is None for s in shortlists):
        return None
    import torch

    width = min(s.table.size(1) // s.members for s in shortlists)
    tables = [
        s.table[:, : width * s.members].reshape(s.table.size(0), width, s.members)
        for s in shortlists
    ]
    ranked = all(s.ranked for s in shortlists)
    frequent = (
        _interleave_unique([s.frequent for s in shortlists])
        if ranked
        else torch.unique(torch.cat([s.frequent for s in shortlists]))
    )
    return Shortlist(
        frequent,
        torch.cat(tables, dim=2).reshape(tables[0].size(0), -1),
        sum(s.members for s in shortlists),
        ranked,
    )


def _interleave_unique(lists: list[torch.Tensor]) -> torch.Tensor:
    """a1 b1 a2 b2 ... with repeats dropped, first occurrence kept."""
    import torch

    seen: set[int] = set()
    out: list[int] = []
    for rank in range(max(len(x) for x in lists)):
        for x in lists:
            if rank < len(x) and (v := int(x[rank])) not in seen:
                seen.add(v)
                out.append(v)
    return torch.tensor(out, dtype=torch.long)
