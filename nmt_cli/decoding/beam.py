"""The one beam loop: batched over sentences, a (B, K) grid of hypotheses in tensors, with the
choice of each step's continuations left to a strategy.

Each step the loop computes the model's log-probabilities for every alive hypothesis, restricts
them (PAD, BOS, ``min_len``, the length cap: nmt_cli/decoding/steps.py) and applies the
repetition guard; then the strategy proposes candidates (parent, token, total log-probability),
says which of them end here and which K go on. Everything else is written here once, for every
strategy:

- the finished set: the candidates that end (EOS) are scored with the GNMT length penalty,
  norm(Y) = log p(Y | x) / lp(Y), lp(Y) = ((5 + |Y|) / 6)^alpha, and merged with the K best
  finished so far;
- the stopping rule: a sentence is done when nothing is alive, or when no alive hypothesis can
  still enter its n-best list: log-probabilities only fall as a hypothesis grows and lp only
  grows up to the length cap L, so no continuation of the best alive hypothesis can score above
  its log-probability divided by lp(L). Stopping on that bound never changes the result;
  stopping on lp at the current length (a common shortcut) can, when alpha > 0;
- emission: a done sentence's result is taken at once; it leaves the batch with others, once
  the done ones are ``leave_share`` of it (SearchSettings), and until then none of its
  hypotheses is alive;
- the shortlist's columns: the output layer runs over the union of the batch's candidate sets,
  narrowed as sentences leave, each sentence normalised over its own set
  (nmt_cli/model/output_layer.py); how the columns are laid out and whether the batch's shapes
  are rounded up is the model's ``DecodingSetup`` (nmt_cli/model/fast_decoding.py), read once per
  search; none of it changes a result.

The first step from BOS is the same for a sentence's K hypotheses: it runs once per sentence
and its output is copied to the K rows. The strategies (nmt_cli/decoding/search.py ``TopK``,
nmt_cli/decoding/constraints.py ``Constrained``, nmt_cli/decoding/sampling.py ``Sampled``)
follow the ``Strategy`` protocol.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

import torch

from nmt_cli.data.tokenizer import BOS, PAD
from nmt_cli.decoding.settings import SearchSettings
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
from nmt_cli.model.output_layer import Columns, columns_for, narrow, pad_union, remaining_columns

NEG_INF = float("-inf")


class Step(NamedTuple):
    """A strategy's choice at one step, over C candidates per sentence."""

    beam: torch.Tensor  # (N, C) each candidate's parent hypothesis
    token: torch.Tensor  # (N, C) its token id
    score: torch.Tensor  # (N, C) its total log-probability (-inf: no candidate)
    finishing: torch.Tensor  # (N, C) bool: it ends here (EOS) and joins the finished set
    chosen: torch.Tensor  # (N, K) the candidates that stay alive
    alive_score: torch.Tensor  # (N, K) their scores, -inf for an empty slot


class Strategy(Protocol):
    """How a beam picks its continuations; the loop does the rest (module doc). A step that
    subclasses it takes the defaults of ``vocabulary`` and ``lengths``."""

    # may done sentences leave the batch (False where a step's draws depend on the batch's rows)
    leaves: bool
    # decode over one fixed union of columns (no row groups, padding or narrowing), for a
    # strategy that looks tokens up as union columns
    fixed_union: bool

    def vocabulary(self, vocab):
        """The vocabulary to decode over, given the batch's shortlist (None: all); by default
        the shortlist itself."""
        return vocab

    def lengths(self, limit: torch.Tensor) -> torch.Tensor:
        """The length caps, given the configured ones; by default those."""
        return limit

    def forcing(self, t: int) -> torch.Tensor | None:
        """(N,) the sentences whose token at step ``t`` is forced (a prefix's): the repetition
        guard leaves their rows alone, since the user asked for those repeats; by default
        none (None)."""
        return None

    def step(self, t, logp, alive_logp, weights, columns, limit) -> Step:
        """The candidates at step ``t`` from ``logp`` (N, K, V) and ``alive_logp`` (N, K)."""

    def retire(self, done: torch.Tensor) -> None:
        """The sentences ``done`` (N,) have their result: none of theirs may go on."""

    def keep(self, live: torch.Tensor) -> None:
        """Only the sentences ``live`` stay in the batch."""


class Beams:
    """The alive and finished hypotheses of a batch."""

    def __init__(self, b: int, k: int, steps: int, s_len: int, attention: bool, device):
        self.k, self.steps, self.attention = k, steps, attention
        self.alive_seq = torch.full((b, k, 0), BOS, dtype=torch.long, device=device)
        self.alive_logp = torch.full((b, k), NEG_INF, device=device)
        self.alive_logp[:, 0] = 0.0
        self.alive_attn = torch.zeros(b, k, 0, s_len, device=device) if attention else None
        self.fin_seq = torch.full((b, k, steps), PAD, dtype=torch.long, device=device)
        self.fin_norm = torch.full((b, k), NEG_INF, device=device)
        self.fin_logp = torch.full((b, k), NEG_INF, device=device)
        self.fin_attn = torch.zeros(b, k, steps, s_len, device=device) if attention else None

    def advance(self, t: int, step: Step, weights, lp_now: torch.Tensor) -> torch.Tensor:
        """Take ``step``'s candidates: the finishing ones into the finished set (at most K ever
        finish at once, so merging and keeping the best K loses none), the chosen ones alive.
        Returns each alive hypothesis's parent (N, K)."""
        n, c = step.beam.shape
        k, steps = self.k, self.steps
        parents = self.alive_seq.gather(1, step.beam.unsqueeze(-1).expand(-1, -1, t))
        cand_seq = torch.cat([parents, step.token.unsqueeze(-1)], dim=-1)  # (N, C, t+1)
        if self.attention:
            s_len = self.alive_attn.size(-1)
            with_step = torch.cat([self.alive_attn, weights.view(n, k, 1, -1)], dim=2)
            cand_attn = with_step.gather(1, step.beam[..., None, None].expand(-1, -1, t + 1, s_len))
        new_norm = torch.where(step.finishing, step.score / lp_now, NEG_INF)
        self.fin_norm, pick = torch.cat([self.fin_norm, new_norm], dim=1).topk(k, dim=-1)
        padded = torch.cat([cand_seq, cand_seq.new_full((n, c, steps - t - 1), PAD)], dim=-1)
        self.fin_seq = torch.cat([self.fin_seq, padded], dim=1).gather(
            1, pick.unsqueeze(-1).expand(-1, -1, steps)
        )
        self.fin_logp = torch.cat([self.fin_logp, step.score], dim=1).gather(1, pick)
        if self.attention:
            padded_attn = torch.cat([cand_attn, cand_attn.new_zeros(n, c, steps - t - 1, s_len)], 2)
            self.fin_attn = torch.cat([self.fin_attn, padded_attn], dim=1).gather(
                1, pick[..., None, None].expand(-1, -1, steps, s_len)
            )
        self.alive_logp = step.alive_score
        self.alive_seq = cand_seq.gather(1, step.chosen.unsqueeze(-1).expand(-1, -1, t + 1))
        if self.attention:
            self.alive_attn = cand_attn.gather(
                1, step.chosen[..., None, None].expand(-1, -1, t + 1, s_len)
            )
        return step.beam.gather(1, step.chosen)

    def results(self, which: torch.Tensor, nbest: int, src_lengths: list[int]):
        """The ``nbest`` best finished hypotheses of the batch rows ``which``, best first."""
        seqs, norms = self.fin_seq[which].tolist(), self.fin_norm[which].tolist()
        logps = self.fin_logp[which].tolist()
        attn = self.fin_attn[which] if self.attention else None
        out = []
        for r, length in enumerate(src_lengths):
            hyps = []
            for j in range(self.k):
                if norms[r][j] == NEG_INF:
                    continue
                seq = trimmed(seqs[r][j])
                a = None if attn is None else attn[r, j, : len(seq) + 1, :length].float().cpu()
                hyps.append(Hypothesis(seq, logps[r][j], norms[r][j], a))
            out.append(hyps[:nbest])
        return out

    def keep(self, live: torch.Tensor) -> None:
        self.alive_seq, self.alive_logp = self.alive_seq[live], self.alive_logp[live]
        self.fin_seq, self.fin_norm = self.fin_seq[live], self.fin_norm[live]
        self.fin_logp = self.fin_logp[live]
        if self.attention:
            self.alive_attn, self.fin_attn = self.alive_attn[live], self.fin_attn[live]


class BatchColumns:
    """The shortlist's columns of a batch as its sentences leave (module doc)."""

    def __init__(self, vocab, allowed, multiple: int, group_rows: int, fixed: bool):
        self.vocab, self.allowed = vocab, allowed
        self.multiple, self.group_rows, self.fixed = multiple, group_rows, fixed
        self.columns: Columns | None = None

    def first_step(self) -> Columns | None:
        """The union over the batch's sentences, one row each."""
        return columns_for(self.vocab, self.allowed, 0)

    def for_beams(self, flat: torch.Tensor, first: Columns | None) -> Columns | None:
        """The columns of the K rows per sentence ``flat`` maps to its sentence."""
        if self.allowed is not None:
            self.allowed = self.allowed.index_select(0, flat)
        columns = columns_for(self.vocab, self.allowed, self.group_rows)
        if columns is not None and columns.group_rows is None:
            columns.cuts = first.cuts  # the same union: the rows of W_s cut for the first step
        self.columns = columns
        return columns

    def keep(self, rows: torch.Tensor) -> Columns | None:
        """The columns once only the hypothesis rows ``rows`` remain."""
        if self.allowed is None:
            return self.columns
        self.allowed = self.allowed.index_select(0, rows)
        if not self.fixed:
            self.vocab, self.allowed = narrow(self.vocab, self.allowed, self.multiple)
        self.columns = remaining_columns(
            self.columns, rows, self.vocab, self.allowed, self.group_rows
        )
        return self.columns


@torch.no_grad()
def beam_loop(
    model,
    src: torch.Tensor,
    src_lengths: torch.Tensor,
    settings: SearchSettings,
    strategy: Strategy,
    vocab=None,
) -> list[list[Hypothesis]]:
    """The ``settings.nbest`` best hypotheses per sentence under ``strategy`` (module doc), best
    first. ``vocab``: sorted target ids to choose from, or per-sentence ``Candidates``; None =
    all."""
    setup = setup_of(model)
    k, b, device = settings.beam_size, src.size(0), src.device
    fixed = strategy.fixed_union
    vocab, allowed = split_vocab(strategy.vocabulary(vocab))
    multiple = 1 if fixed else setup.column_multiple
    vocab, allowed = pad_union(vocab, allowed, multiple)
    # groups of whole sentences' hypotheses, so that a sentence's K rows share their columns
    layout = BatchColumns(vocab, allowed, multiple, 0 if fixed else setup.beam_groups(k), fixed)
    state, memory = model.encode(src, src_lengths)
    guard = RepetitionGuard(settings.max_repeats, src_lengths)
    first = layout.first_step()
    logp, state, weights = model.step(
        torch.full((b,), BOS, dtype=torch.long, device=device), state, memory, first
    )
    flat = torch.arange(b, device=device).repeat_interleave(k)
    if k > 1:
        state, memory, logp = state.select(flat), memory.shared_by(k), logp.index_select(0, flat)
        if weights is not None:
            weights = weights.index_select(0, flat)
    columns = layout.for_beams(flat, first)
    if columns is not None and columns.group_rows is not None:
        # the first step's log-probabilities, over the union, laid out as the groups' columns
        logp = logp.gather(1, columns.union_positions())
    limit = strategy.lengths(
        max_lengths(src_lengths, settings.max_len_ratio, settings.max_len_const).to(device)
    )
    steps, first_cap = int(limit.max()), int(limit.min()) - 1  # no row is at its cap before
    beams = Beams(b, k, steps, src.size(1), settings.attention, device)
    rows = torch.arange(b, device=device)  # original sentence of each active row
    lengths = src_lengths.tolist()
    best_possible_lp = length_penalty(limit, settings.alpha)  # lp at the cap: the largest
    lp_of_length = length_penalty(torch.arange(steps + 1, device=device), settings.alpha)
    results: list[list[Hypothesis]] = [[] for _ in range(b)]
    emitted = torch.zeros(b, dtype=torch.bool, device=device)  # done, still in the batch
    kept = 0  # of those, the ones that stayed at the last leaving to keep the count a multiple

    def emit(which: torch.Tensor) -> None:
        sentences = rows[which].tolist()
        for i, hyps in zip(
            sentences, beams.results(which, settings.nbest, [lengths[i] for i in sentences])
        ):
            results[i] = hyps

    for t in range(steps):
        n, v = rows.size(0), logp.size(-1)
        at_limit = (limit - 1 <= t).repeat_interleave(k) if t >= first_cap else None
        logp = restrict_steps(logp, at_limit, t < settings.min_len)
        if guard.on:  # the rows of done sentences are not alive: nothing of theirs is kept
            alive = beams.alive_logp.view(-1) > NEG_INF
            forced_now = strategy.forcing(t)
            if forced_now is not None:
                alive = alive & ~forced_now.repeat_interleave(k)
            history = beams.alive_seq.reshape(n * k, t)
            guard.ban(logp, history, columns, rows.repeat_interleave(k), alive)
        step = strategy.step(t, logp.view(n, k, v), beams.alive_logp, weights, columns, limit)
        source_beam = beams.advance(t, step, weights, lp_of_length[t + 1])
        best_alive = beams.alive_logp.max(dim=1).values
        done = best_alive == NEG_INF
        done |= beams.fin_norm[:, settings.nbest - 1] > best_alive / best_possible_lp
        done |= limit - 1 <= t
        newly = done & ~emitted  # the emitted stay done: nothing of theirs is alive
        new_count, done_count = torch.stack([newly.sum(), done.sum()]).tolist()  # one sync
        if t + 1 == steps or done_count == n:
            emit((~emitted).nonzero().squeeze(1))
            break
        beam_rows = (torch.arange(n, device=device) * k).unsqueeze(1) + source_beam  # (N, K)
        if new_count:
            emit(newly.nonzero().squeeze(1))
            emitted |= newly
            strategy.retire(newly)
            beams.alive_logp = beams.alive_logp.masked_fill(newly.unsqueeze(1), NEG_INF)
        live = None
        if strategy.leaves and done_count > kept and done_count - kept >= settings.leave_share * n:
            live = round_up((~emitted).nonzero().squeeze(1), emitted, setup.sentence_multiple)
        if live is not None and live.numel() == n:
            live = None
        if live is not None:
            kept = live.numel() - (n - done_count)  # done sentences kept to round the count up
            emitted, rows, limit = emitted[live], rows[live], limit[live]
            best_possible_lp, beam_rows = best_possible_lp[live], beam_rows[live]
            beams.keep(live)
            strategy.keep(live)
            memory = memory.select(live)
            rank = torch.arange(k, device=device)
            columns = layout.keep((live * k).repeat_interleave(k) + rank.repeat(live.numel()))
        if k > 1 or live is not None:
            state = state.select(beam_rows.view(-1))
        logp, state, weights = model.step(
            beams.alive_seq[:, :, -1].reshape(-1), state, memory, columns
        )
    return results
