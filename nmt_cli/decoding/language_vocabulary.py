"""Each target language's pieces, so that a multilingual model writes the language it is asked for.

A multilingual model shares one SentencePiece vocabulary between its languages, and the
target-language token on the source is all that tells the decoder which language to write. In a
direction it was not trained on (zero-shot), such a model often answers in the wrong language,
most often the one it saw paired with that source in training: the off-target translations of
Johnson et al. (2017) and Zhang et al. (2020). The pieces a language's training targets use are
counted once from the stored training split; decoding into that language then chooses each
token from those pieces (and the specials) only, so p(y_i | y_<i, x) is renormalised over the
language's own vocabulary, V_fr for French (docs/recipes.md#the-requested-language measures
how much of the joint vocabulary each language keeps).

``decode.language_vocabulary`` switches it off; a one-pair model has no such vocabularies. The
restriction combines with the shortlist (their intersection per sentence) and with forced terms
(a term's tokens are always allowed).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from nmt_cli.decoding.shortlist import SPECIALS, Candidates

if TYPE_CHECKING:
    import torch

# torch is imported where a tensor is made, not here: counting the vocabularies runs in
# preprocessing, which never pays torch's import (as in nmt_cli/decoding/shortlist.py)
CHUNK = 16_000_000  # stored ids counted at a time, so a large split is never read whole


@dataclass
class LanguageVocabularies:
    """Target language -> the sorted target ids its training targets use, specials included."""

    pieces: dict[str, torch.Tensor]

    def of(self, language: str | None) -> torch.Tensor | None:
        return None if language is None else self.pieces.get(language)

    def to_payload(self) -> dict:
        import torch

        return {lang: ids.to(torch.int32) for lang, ids in self.pieces.items()}

    @classmethod
    def from_payload(cls, payload: dict) -> LanguageVocabularies:
        return cls({str(lang): ids.long() for lang, ids in payload.items()})

    @classmethod
    def union(cls, members: Iterable[LanguageVocabularies | None]) -> LanguageVocabularies | None:
        """An ensemble's: each language's pieces of any member (None if a member has none)."""
        import torch

        members = list(members)
        if not members or any(m is None for m in members):
            return None
        languages = {lang for m in members for lang in m.pieces}
        return cls(
            {
                lang: torch.unique(torch.cat([m.pieces[lang] for m in members if lang in m.pieces]))
                for lang in languages
            }
        )


def piece_counts(data_dir: Path, meta: dict) -> dict[str, np.ndarray]:
    """How often each target piece occurs in each target language's training targets, from a
    stored training split whose groups (data/meta.json) name each run of rows' direction; empty
    for the data of one pair."""
    groups = (meta.get("groups") or {}).get("train") or []
    if not groups:
        return {}
    ids = np.load(data_dir / "train.tgt.ids.npy", mmap_mode="r")
    offsets = np.load(data_dir / "train.tgt.offsets.npy", mmap_mode="r")
    vocab = int(meta["tgt_vocab"])
    counts: dict[str, np.ndarray] = {}
    for group in groups:
        language = group["direction"].split("-")[1]
        total = counts.setdefault(language, np.zeros(vocab, dtype=np.int64))
        start, end = int(offsets[group["start"]]), int(offsets[group["end"]])
        for first in range(start, end, CHUNK):
            block = np.asarray(ids[first : min(first + CHUNK, end)], dtype=np.int64)
            total += np.bincount(block, minlength=vocab)[:vocab]
    return counts


def count_languages(data_dir: Path, meta: dict) -> LanguageVocabularies | None:
    """The vocabularies of a stored multilingual training split: every target piece of a group
    belongs to the group's target language (with the specials). None for the data of one pair."""
    import torch

    counts = piece_counts(data_dir, meta)
    if not counts:
        return None
    for total in counts.values():
        total[list(SPECIALS)] = 1
    return LanguageVocabularies(
        {lang: torch.from_numpy(np.flatnonzero(total)) for lang, total in counts.items()}
    )


def restricted(vocab: Candidates | None, language: torch.Tensor, rows: int) -> Candidates:
    """What ``rows`` sentences may produce in a language: its pieces ``language`` (sorted), laid
    over each sentence's shortlist set where there is one (``vocab``), else all of them. The
    specials stay at positions 0..3, as search expects."""
    import torch

    language = language.to(vocab.ids.device if vocab is not None else language.device)
    if vocab is None:
        return Candidates(language, torch.ones(rows, language.numel(), dtype=torch.bool))
    keep = torch.isin(vocab.ids, language)
    return Candidates(vocab.ids[keep], vocab.allowed[:, keep])


def restricted_ids(vocab: torch.Tensor | None, language: torch.Tensor | None):
    """A sorted id set (sampling's ``vocab``) cut to a language's pieces; None: no restriction."""
    import torch

    if language is None:
        return vocab
    if vocab is None:
        return language
    return vocab[torch.isin(vocab, language.to(vocab.device))]
