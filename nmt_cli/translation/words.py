"""From subword pieces back to words: which word each piece belongs to, and attention over words.

SentencePiece marks the first piece of every whitespace-separated word with '▁', so a word is a
piece starting with '▁' and the pieces after it up to the next one. Attention is merged the way
`alignment_pairs` merges it for hard alignments: a target word attends to a source word with the
sum of the weights from its pieces to that word's pieces, averaged over its own pieces, so each
row still sums to 1 and its argmax is the word `nmt translate --alignments` prints.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass

import torch

WORD_START = "\u2581"


def word_index(pieces: Sequence[str]) -> list[int]:
    """The word each piece belongs to, counting from 0 (the first piece always starts a word)."""
    idx, word = [], -1
    for k, piece in enumerate(pieces):
        if piece.startswith(WORD_START) or k == 0:
            word += 1
        idx.append(word)
    return idx


def words_of(pieces: Sequence[str], text: str) -> list[str]:
    """The words the pieces spell: ``text``'s whitespace-separated words when they are as many
    (they keep their case and characters the vocabulary lacks), else the pieces joined."""
    idx = word_index(pieces)
    merged = [""] * (idx[-1] + 1 if idx else 0)
    for w, piece in zip(idx, pieces):
        merged[w] += piece
    merged = [w.replace(WORD_START, "") for w in merged]
    split = text.split()
    return split if len(split) == len(merged) else merged


@dataclass
class WordAttention:
    """The attention of one translation, over pieces as the model saw them and over words."""

    source_pieces: list[str]
    target_pieces: list[str]
    piece_weights: list[list[float]]  # one row per target piece, one column per source piece
    source_words: list[str]
    target_words: list[str]
    weights: list[list[float]]  # one row per target word (summing to 1), one column per source word

    def as_dict(self) -> dict:
        return {
            "source_words": self.source_words,
            "target_words": self.target_words,
            "weights": self.weights,
            "source_pieces": self.source_pieces,
            "target_pieces": self.target_pieces,
            "piece_weights": self.piece_weights,
        }


def word_attention(
    weights: torch.Tensor,
    src_pieces: Sequence[str],
    tgt_pieces: Sequence[str],
    source_text: str,
    target_text: str,
) -> WordAttention:
    """Merge a (target pieces [+ EOS], source pieces) attention matrix into words; the EOS row,
    if present, is left out."""
    att = weights[: len(tgt_pieces), : len(src_pieces)].float()
    src_w, tgt_w = word_index(src_pieces), word_index(tgt_pieces)
    n_src = src_w[-1] + 1 if src_w else 0
    n_tgt = tgt_w[-1] + 1 if tgt_w else 0
    summed = _summed_by_word(weights, src_pieces, tgt_pieces)
    if summed is None:  # no words on a side
        summed = torch.zeros(n_tgt, n_src)
    pieces_per_word = torch.bincount(torch.tensor(tgt_w, dtype=torch.long), minlength=n_tgt).clamp(
        min=1
    )
    merged = summed / pieces_per_word.unsqueeze(1)
    return WordAttention(
        list(src_pieces),
        list(tgt_pieces),
        att.tolist(),
        words_of(src_pieces, source_text),
        words_of(tgt_pieces, target_text),
        merged.tolist(),
    )


def alignment_pairs(
    weights: torch.Tensor | None, src_pieces: Sequence[str], tgt_pieces: Sequence[str]
) -> list[tuple[int, int]]:
    """Hard word alignment i-j from a (target pieces [+ EOS], source pieces) attention matrix:
    weights summed per (source word, target word), each target word aligned to its argmax source
    word (ties: the first)."""
    return aligned_words(weights, src_pieces, tgt_pieces)[0]


def source_coverage(
    weights: torch.Tensor | None, src_pieces: Sequence[str], tgt_pieces: Sequence[str]
) -> list[tuple[int, int]]:
    """For each source word that no target word of :func:`alignment_pairs` chose, the target
    word attending to it most (its column's argmax, ties: the first), as (source word, target
    word) pairs: where the alignment leaves a source word out, the place in the translation its
    meaning most likely went (the document layer's tags over such words go there)."""
    return aligned_words(weights, src_pieces, tgt_pieces)[1]


def aligned_words(
    weights: torch.Tensor | None, src_pieces: Sequence[str], tgt_pieces: Sequence[str]
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """:func:`alignment_pairs` and :func:`source_coverage` from one summing of the weights."""
    words = _summed_by_word(weights, src_pieces, tgt_pieces)
    if words is None:
        return [], []
    best_source = words.argmax(dim=1).tolist()
    pairs = sorted({(best_source[j], j) for j in range(words.size(0))})
    chosen = set(best_source)
    best_target = words.argmax(dim=0).tolist()
    return pairs, [(i, best_target[i]) for i in range(words.size(1)) if i not in chosen]


def _summed_by_word(
    weights: torch.Tensor | None, src_pieces: Sequence[str], tgt_pieces: Sequence[str]
) -> torch.Tensor | None:
    """(target words, source words): the weights from a target word's pieces to a source word's
    pieces, summed; None without weights or words."""
    if weights is None:
        return None
    src_w, tgt_w = word_index(src_pieces), word_index(tgt_pieces)
    if not src_w or not tgt_w:
        return None
    att = weights[: len(tgt_pieces), : len(src_pieces)].float()
    n_src, n_tgt = src_w[-1] + 1, tgt_w[-1] + 1
    words = torch.zeros(n_tgt, n_src)
    return words.index_add_(
        0,
        torch.tensor(tgt_w),
        torch.zeros(len(tgt_w), n_src).index_add_(1, torch.tensor(src_w), att),
    )


def word_map(before: str, after: str) -> list[int]:
    """For each whitespace word of ``before``, the word of ``after`` holding its characters, the
    two texts' non-space characters matched in order (``after``: ``before`` with words put in,
    as a translation with its protected spans put back); a word none of whose characters
    survived goes with the word before it."""
    owner_before = [w for w, word in enumerate(before.split()) for _ in word]
    owner_after = [w for w, word in enumerate(after.split()) for _ in word]
    matcher = difflib.SequenceMatcher(
        None, "".join(before.split()), "".join(after.split()), autojunk=False
    )
    found: dict[int, int] = {}
    for a, b, size in matcher.get_matching_blocks():
        for k in range(size):
            found.setdefault(owner_before[a + k], owner_after[b + k])
    out, last = [], 0
    for w in range(len(before.split())):
        last = found.get(w, last)
        out.append(last)
    return out


def remapped(
    pairs: Sequence[tuple[int, int]] | None, source: Sequence[int], target: Sequence[int]
) -> list[tuple[int, int]] | None:
    """Alignment ``pairs`` over other words: source word i becomes ``source[i]``, target word j
    ``target[j]`` (:func:`word_map`'s lists)."""
    if pairs is None:
        return None
    return sorted({(source[i], target[j]) for i, j in pairs if i < len(source) and j < len(target)})
