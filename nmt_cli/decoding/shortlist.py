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

Learning the table is numpy only (nmt_cli/data/shortlist_counts.py); torch is imported where a
Shortlist is used, so that preprocessing never pays torch's import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from nmt_cli.data.shortlist_counts import SPECIALS, count_shortlist
from nmt_cli.data.store import (
    count_split_shortlist,
    load_shortlist_arrays,
    save_shortlist_arrays,
)

if TYPE_CHECKING:
    import torch


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
    def from_arrays(cls, frequent: np.ndarray, table: np.ndarray, ranked: bool = True) -> Shortlist:
        """A Shortlist of the numpy arrays that counting gives or a run dir stores."""
        import torch  # here, not at the top: preprocessing never loads torch

        return cls(
            torch.from_numpy(frequent.astype(np.int64)),
            torch.from_numpy(table.astype(np.int64)),
            ranked=ranked,
        )

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


def learn_shortlist(*arrays: np.ndarray | int, **options) -> Shortlist:
    """The Shortlist of ``count_shortlist`` (the same arguments)."""
    return Shortlist.from_arrays(*count_shortlist(*arrays, **options))


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


def learn_split_shortlist(data_dir, tokenizer) -> Shortlist:
    """The vocabulary shortlist of the stored training split (``count_split_shortlist``)."""
    return Shortlist.from_arrays(*count_split_shortlist(data_dir, tokenizer))


def save_shortlist(data_dir, shortlist: Shortlist) -> None:
    save_shortlist_arrays(
        data_dir, shortlist.frequent.numpy(), shortlist.table.numpy(), shortlist.ranked
    )


def load_shortlist(run_dir) -> Shortlist | None:
    """The run's shortlist, or None for data preprocessed before shortlists existed."""
    arrays = load_shortlist_arrays(run_dir)
    return None if arrays is None else Shortlist.from_arrays(*arrays)
