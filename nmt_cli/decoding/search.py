"""Greedy and beam search, batched over sentences, over the model's search contract.

Beam search is the one beam loop (nmt_cli/decoding/beam.py) with the plain top-k step: the beam
holds K hypotheses, finished ones included; each step ranks the continuations of the alive ones
and keeps the best K - F, where F hypotheses have finished so far; those of them ending in EOS
finish (scored with the GNMT length penalty lp(Y) = ((5 + |Y|) / 6)^alpha), the others stay
alive. A beam of one is therefore greedy search, token for token and score for score.

Greedy search is its own lean loop over the same steps (nmt_cli/decoding/steps.py: the length
cap, ``min_len``, the repetition guard, the shortlist's columns): one row per sentence, no
finished set to merge, and ended sentences leave the batch every ``check_every`` steps. It gives
what a beam of one gives, faster (docs/translate.md#search).

Both take one ``SearchSettings`` (nmt_cli/decoding/settings.py); its fields may also be given one
by one as keywords (``beam_search(model, src, lengths, beam_size=4)``).
"""

from __future__ import annotations

import torch

from nmt_cli.data.tokenizer import BOS, EOS, PAD
from nmt_cli.decoding.beam import NEG_INF, Step, Strategy, beam_loop
from nmt_cli.decoding.selection import best_continuations, best_per_row
from nmt_cli.decoding.settings import SearchSettings, settings_with
from nmt_cli.decoding.shortlist import Candidates
from nmt_cli.decoding.steps import (
    Hypothesis,
    RepetitionGuard,
    length_penalty,
    max_lengths,
    restrict_steps,
    round_up,
    split_vocab,
    trimmed,
)
from nmt_cli.model.fast_decoding import setup_of
from nmt_cli.model.output_layer import columns_for, narrow, pad_union, remaining_columns

__all__ = [
    "Hypothesis",
    "SearchSettings",
    "TopK",
    "beam_search",
    "greedy",
    "length_penalty",
    "search",
]


class TopK(Strategy):
    """The plain beam step: the K best continuations over all alive hypotheses,
    score(y_1..t) = score(y_1..t-1) + log p(y_t | y_<t, x); of them the ones within the K - F
    slots the finished hypotheses leave finish on EOS or stay alive."""

    leaves = True
    fixed_union = False

    def __init__(self, b: int, k: int, device):
        self.k = k
        self.width = torch.full((b, 1), k, dtype=torch.long, device=device)  # K minus finished
        self.rank = torch.arange(k, device=device)

    def step(self, t, logp, alive_logp, weights, columns, limit) -> Step:
        n, k, v = logp.shape
        top_logp, top_idx = best_continuations(logp, alive_logp, k)  # (N, K), best first
        top_beam, top_tok = top_idx // v, top_idx % v
        if columns is not None:
            top_tok = columns.token_ids(top_tok, torch.arange(n, device=logp.device) * k)
        in_beam = self.rank < self.width  # the finished hypotheses hold the other slots
        is_eos = (top_tok == EOS) & in_beam
        alive_score, chosen = top_logp.masked_fill(is_eos | ~in_beam, NEG_INF).topk(k, dim=-1)
        self.width = self.width - is_eos.sum(dim=1, keepdim=True)
        return Step(top_beam, top_tok, top_logp, is_eos, chosen, alive_score)

    def retire(self, done: torch.Tensor) -> None:
        self.width = self.width.masked_fill(done.unsqueeze(1), 0)

    def keep(self, live: torch.Tensor) -> None:
        self.width = self.width[live]


@torch.no_grad()
def greedy(
    model,
    src: torch.Tensor,
    src_lengths: torch.Tensor,
    settings: SearchSettings | None = None,
    *,
    vocab: Candidates | torch.Tensor | None = None,
    **fields,
) -> list[list[Hypothesis]]:
    """Batched greedy decoding, y_t = argmax_y log p(y | y_<t, x); returns one 1-best hypothesis
    list per sentence. ``vocab``: sorted target ids to choose from, or per-sentence
    ``Candidates``; None = all; ``fields``: settings given one by one.

    Every ``check_every`` steps (one host synchronisation, not one per step) the sentences that
    have ended leave the batch: in a length-sorted batch a good share of the rows would otherwise
    go on computing after their EOS."""
    settings = settings_with(settings, fields)
    setup = setup_of(model)
    multiple, group_rows = setup.column_multiple, setup.group_rows
    vocab, allowed = pad_union(*split_vocab(vocab), multiple)
    b = src.size(0)
    device = src.device
    columns = columns_for(vocab, allowed, group_rows)
    state, memory = model.encode(src, src_lengths)
    guard = RepetitionGuard(settings.max_repeats, src_lengths)
    limit = max_lengths(src_lengths, settings.max_len_ratio, settings.max_len_const).to(device)
    steps, first_cap = int(limit.max()), int(limit.min()) - 1  # no row is at its cap before
    tokens = torch.full((b, steps), PAD, dtype=torch.long, device=device)
    scores = torch.zeros(b, device=device)
    attn = None
    rows = torch.arange(b, device=device)  # the sentence of each row still decoding
    done = torch.zeros(b, dtype=torch.bool, device=device)
    prev = torch.full((b,), BOS, dtype=torch.long, device=device)
    for t in range(steps):
        logp, state, weights = model.step(prev, state, memory, columns)
        logp = restrict_steps(
            logp, limit - 1 <= t if t >= first_cap else None, t < settings.min_len
        )
        if guard.on:
            guard.ban(logp, tokens[rows, :t], columns, rows)
        best, token = best_per_row(logp)
        if columns is not None:
            token = columns.token_ids(token)
        token = token.masked_fill(done, PAD)
        scores.index_add_(0, rows, best.masked_fill(done, 0.0).to(scores.dtype))
        tokens[rows, t] = token
        if settings.attention and weights is not None:
            if attn is None:
                attn = weights.new_zeros(b, steps, weights.size(-1))
            attn[rows, t] = weights
        done |= token == EOS
        prev = token.masked_fill(token == PAD, EOS)
        if (t + 1) % settings.check_every == 0 and bool(done.any()):
            live = (~done).nonzero().squeeze(1)
            if live.numel() == 0:
                break
            live = round_up(live, done, setup.row_multiple)
            if live.numel() == done.numel():
                continue
            rows, limit, prev, done = rows[live], limit[live], prev[live], done[live]
            state, memory = state.select(live), memory.select(live)
            if allowed is not None:
                vocab, allowed = narrow(vocab, allowed.index_select(0, live), multiple)
                columns = remaining_columns(columns, live, vocab, allowed, group_rows)
    token_rows = tokens.tolist()
    out = []
    for i in range(b):
        seq = trimmed(token_rows[i])
        a = None if attn is None else attn[i, : len(seq) + 1, : int(src_lengths[i])].float().cpu()
        s = float(scores[i])
        out.append([Hypothesis(seq, s, s, a)])
    return out


def beam_search(
    model,
    src: torch.Tensor,
    src_lengths: torch.Tensor,
    settings: SearchSettings | None = None,
    *,
    vocab: Candidates | torch.Tensor | None = None,
    **fields,
) -> list[list[Hypothesis]]:
    """Batched beam search, the one beam loop with the ``TopK`` step; returns the ``nbest`` best
    hypotheses per sentence, best first, ranked by log p(Y | x) / lp(Y) (GNMT). ``vocab``: sorted
    target ids to choose from, or per-sentence ``Candidates``; None = all; ``fields``: settings
    given one by one."""
    settings = settings_with(settings, fields)
    strategy = TopK(src.size(0), settings.beam_size, src.device)
    return beam_loop(model, src, src_lengths, settings, strategy, vocab)


def search(
    model,
    src: torch.Tensor,
    src_lengths: torch.Tensor,
    settings: SearchSettings,
    vocab: Candidates | torch.Tensor | None = None,
) -> list[list[Hypothesis]]:
    """Greedy search for a beam of one and one hypothesis, beam search otherwise."""
    if settings.greedy:
        return greedy(model, src, src_lengths, settings, vocab=vocab)
    return beam_search(model, src, src_lengths, settings, vocab=vocab)
