"""What every search does at every step, written once: the hypotheses it returns, the GNMT length
penalty, the length cap and ``min_len``, the repetition guard, and the shortlist's vocabulary.

The output length is capped at ``max_len_ratio * source length + max_len_const``; at the cap EOS
is forced. EOS is also barred before ``min_len`` tokens: a barely trained model gives EOS more
probability than any single word, and without the floor beam search would prefer the empty
translation for short sentences.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from nmt_cli.data.tokenizer import BOS, EOS, PAD
from nmt_cli.decoding.shortlist import Candidates

REPEAT_NGRAM = 4  # the n of the repetition guard's n-grams (max_repeats)
# The guard watches the sentences of more source subwords than this: shorter ones do not loop,
# and its check at every step is not free (docs/translate.md#long-sentences).
REPEAT_GUARD_FROM = 20


@dataclass
class Hypothesis:
    tokens: list[int]  # without BOS and EOS
    score: float  # total log-probability (EOS included)
    norm_score: float  # the score search ranked by (length-penalised)
    attention: torch.Tensor | None = field(default=None, repr=False)  # (len(tokens)+1, S)


def length_penalty(length: torch.Tensor, alpha: float) -> torch.Tensor:
    """GNMT: lp(Y) = ((5 + |Y|) / 6) ** alpha; alpha 0 leaves scores as they are."""
    if alpha == 0:
        return torch.ones_like(length, dtype=torch.float)
    return ((5.0 + length.float()) / 6.0) ** alpha


def max_lengths(src_lengths: torch.Tensor, ratio: float, const: int) -> torch.Tensor:
    return (src_lengths.float() * ratio).long() + const + 1  # +1: room for EOS


def restrict_steps(
    logp: torch.Tensor, at_limit: torch.Tensor | None, too_short: bool
) -> torch.Tensor:
    """Never emit PAD or BOS, nor EOS while too short; at the length cap only EOS may follow, with
    its real log-probability (the cap wins over ``min_len``). ``at_limit`` None: no row is at its
    cap yet (the search knows the earliest cap). Works in place."""
    # Rows at their cap are rare: on the CPU the pass over the logits runs only when there is one
    # (elsewhere asking would cost a host synchronisation per step, more than the pass)
    eos = None if at_limit is None else logp[:, EOS].clone()
    logp[:, PAD] = float("-inf")
    logp[:, BOS] = float("-inf")
    if too_short:
        logp[:, EOS] = float("-inf")
    if at_limit is not None and (logp.device.type != "cpu" or bool(at_limit.any())):
        logp.masked_fill_(at_limit.unsqueeze(1), float("-inf"))
        logp[:, EOS] = torch.where(at_limit, eos, logp[:, EOS])
    return logp


def trimmed(row: list[int]) -> list[int]:
    out = []
    for t in row:
        if t in (EOS, PAD):
            break
        out.append(t)
    return out


class RepetitionGuard:
    """decode.max_repeats: no n-gram (n = REPEAT_NGRAM) occurs more than ``most`` times in the
    output of a sentence of over REPEAT_GUARD_FROM source subwords. Every search bans such
    continuations the same way, whatever chooses among the rest (top-k, constraints, sampling)."""

    def __init__(self, most: int, src_lengths: torch.Tensor):
        watched = src_lengths > REPEAT_GUARD_FROM
        self.on = most > 0 and bool(watched.any())
        self.most = most
        self.watched = watched.to(src_lengths.device) if self.on else None

    def ban(
        self,
        logp: torch.Tensor,
        history: torch.Tensor,
        columns,
        sentence_of_row: torch.Tensor,
        among: torch.Tensor | None = None,
    ) -> None:
        """-inf in ``logp`` (in place) where a row's ``history`` (rows x steps so far) would
        repeat an n-gram too often. ``sentence_of_row``: each row's sentence in the batch the
        guard was made for; ``among``: the rows to look at (None: all), e.g. the alive ones."""
        if not self.on:
            return
        watched = self.watched[sentence_of_row]
        if among is not None:
            watched = watched & among
        _ban_repeats(logp, history, columns, self.most, watched)


def _ban_repeats(
    logp: torch.Tensor, history: torch.Tensor, columns, most: int, watched: torch.Tensor
) -> None:
    """The repetition guard: in each ``watched`` row of ``logp`` (in place), -inf for every
    token that would make an n-gram (n = REPEAT_NGRAM) of the row's ``history`` (rows x steps
    so far) occur more than ``most`` times. Only the rows whose last n-1 tokens already began
    ``most`` n-grams are looked at in Python, so the guard costs one comparison of the history
    per step."""
    n = REPEAT_NGRAM
    steps = history.size(1)
    if steps < n - 1 + most:
        return
    windows = history.unfold(1, n, 1)  # (rows, steps - n + 1, n)
    hit = (windows[:, :, :-1] == history[:, steps - n + 1 :].unsqueeze(1)).all(-1)
    flagged = ((hit.sum(-1) >= most) & watched).nonzero().squeeze(1).tolist()
    for row in flagged:
        nexts = windows[row, hit[row], -1].tolist()
        banned = [tok for tok in set(nexts) if nexts.count(tok) >= most]
        if columns is None:
            logp[row, banned] = float("-inf")
            continue
        ids = columns.token_ids(
            torch.arange(logp.size(1), device=logp.device), torch.tensor([row], device=logp.device)
        ).view(-1)
        logp[row, torch.isin(ids, torch.tensor(banned, device=ids.device))] = float("-inf")


def split_vocab(
    vocab: Candidates | torch.Tensor | None,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(ids, allowed): the target ids decoded over (None = all) and each sentence's own set."""
    if isinstance(vocab, Candidates):
        return vocab.ids, vocab.allowed
    return vocab, None


def round_up(live: torch.Tensor, finished: torch.Tensor, multiple: int) -> torch.Tensor:
    """The ``live`` rows and as many ``finished`` ones as make their count a multiple of
    ``multiple`` (where there are that many), in order. A finished row stays finished: it is
    computed and ignored, as between two checks."""
    extra = -live.numel() % multiple
    if not extra:
        return live
    return torch.cat([live, finished.nonzero().squeeze(1)[:extra]]).sort().values
