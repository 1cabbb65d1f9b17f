"""Counting a vocabulary shortlist from training pairs, numpy only (preprocessing never imports
torch): the ``frequent`` most common target pieces, and for every source piece s the
``per_source`` target pieces t most associated with it by sentence co-occurrence, ranked by
cooc(s,t)^2 / (count(s) count(t)). nmt_cli/decoding/shortlist.py decodes with them."""

from __future__ import annotations

import numpy as np

from nmt_cli.data.tokenizer import BOS, EOS, PAD, UNK

SPECIALS = (PAD, UNK, BOS, EOS)


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
