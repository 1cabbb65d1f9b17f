"""Beam search with hard lexical constraints and forced target prefixes, batched.

A sentence may come with ``terms`` (target token sequences that must each appear somewhere in its
translation) and a ``prefix`` (target tokens its translation must begin with). The search is
dynamic beam allocation (Post & Vilar 2018) in the vectorized form of Hu et al. (2019): each
hypothesis carries which terms it has met and how far it is into the one it is placing; each step
a sentence's candidates are

- the K best continuations of all its hypotheses (as in plain beam search),
- the best continuation of each hypothesis, and
- for each hypothesis and each term it may take next, that term's next token,

and a candidate's bank is the number of term tokens it has produced (met terms whole, plus the
one in progress). The K beam slots go round-robin over the banks, the highest first: the best of
each bank, then the second best of each bank, ... (Hu et al.'s allocation with unused slots passed
on), so that hypotheses which placed more of the terms survive next to the better-scoring ones
that placed fewer. A token that breaks off a term in progress loses that term's tokens (the
hypothesis may start it again later). EOS is allowed only once every term is met, so every
finished hypothesis carries every term; finished ones are ranked by the GNMT length-penalised
score, and a sentence is done when its n-th best finished one beats what any alive hypothesis can
still reach (as in nmt_cli/decoding/search.py).

Where a term starts: a hypothesis may start a term (by proposal, or by choosing its first token
itself) only where its attention points at the term's source words (at least ``ATTENDED`` of its
weight on them, or its largest weight on one of them), so that the term goes where the model
translates its source, or anywhere once the room left under the length cap is little more than
the term tokens still to place. A term ends its word: right after it, no piece that continues a
word may follow (``Forced.continuations``). A hypothesis whose most probable next token is EOS
while a term is missing stops there (``DEAD_ENDS``): what it could still add would be an
appendix after a finished sentence; hypotheses that placed the term within the sentence go on.
docs/translate.md measures these choices.

A prefix is forced token by token: while a sentence is within its prefix, its only allowed token
is the prefix's next one; then the beam continues. Prefix tokens count towards the terms too.

With a shortlist, the terms' and the prefix's tokens join the sentence's own candidate set
(``with_forced_tokens``), so the shortlist never bars a forced token. Ensembles work unchanged:
the search only uses the search contract (encode, step, select).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from nmt_cli.data.tokenizer import EOS, PAD
from nmt_cli.decoding.beam import NEG_INF, Step, Strategy, beam_loop
from nmt_cli.decoding.selection import best_continuations, best_per_row
from nmt_cli.decoding.settings import SearchSettings, settings_with
from nmt_cli.decoding.shortlist import Candidates
from nmt_cli.decoding.steps import Hypothesis

# A term may start where the attention puts at least this much weight on its source words (or its
# largest weight on one of them), or anywhere once little more room is left than it needs
ATTENDED = 0.1
ROOM = 2
DEAD_ENDS = True


@dataclass
class Forced:
    """What one sentence's translation must hold: each of ``terms`` somewhere (token
    sequences), and ``prefix`` at its start."""

    terms: list[list[int]] = field(default_factory=list)
    prefix: list[int] = field(default_factory=list)
    # (V,) the target pieces that go on with the word before them (no leading "▁", a letter or
    # digit first), barred right after a term, so that a term stays a whole word; None: none
    continuations: torch.Tensor | None = field(default=None, repr=False, compare=False)
    # per term, the source positions it translates (empty: anywhere); a term starts where the
    # attention points at them (module doc)
    sources: list[list[int]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.terms or self.prefix)

    def satisfied_by(self, tokens: Sequence[int]) -> bool:
        """Does ``tokens`` begin with the prefix and contain every term?"""
        tokens = list(tokens)
        if tokens[: len(self.prefix)] != self.prefix:
            return False
        ends = None if self.continuations is None else self.continuations.tolist()
        return all(contains(tokens, term, ends) for term in self.terms)


def contains(
    tokens: Sequence[int], term: Sequence[int], continuations: Sequence[bool] | None = None
) -> bool:
    """Is ``term`` a contiguous run of ``tokens`` (not followed by a piece that
    ``continuations`` marks, where given)?"""
    n, term = len(term), list(term)
    for i in range(len(tokens) - n + 1):
        if list(tokens[i : i + n]) != term:
            continue
        after = tokens[i + n] if i + n < len(tokens) else None
        if continuations is None or after is None or not continuations[after]:
            return True
    return False


def continuation_pieces(tokenizer) -> torch.Tensor:
    """(V,) which target pieces go on with the word before them (Forced.continuations)."""
    pieces = tokenizer.tgt_pieces(list(range(tokenizer.tgt_vocab_size)))
    return torch.tensor([bool(p) and p[0] != "\u2581" and p[0].isalnum() for p in pieces])


def with_forced_tokens(candidates: Candidates, forced: Sequence[Forced]) -> Candidates:
    """``candidates`` with each sentence's term and prefix tokens added to its own set (and to the
    union, which stays sorted, so the specials keep positions 0..3)."""
    extra = [sorted({t for term in f.terms for t in term} | set(f.prefix)) for f in forced]
    everything = [t for tokens in extra for t in tokens]
    if not everything:
        return candidates
    ids = torch.unique(torch.cat([candidates.ids.cpu(), torch.tensor(everything)]))
    where = torch.searchsorted(ids, candidates.ids.cpu())
    allowed = torch.zeros(len(forced), ids.numel(), dtype=torch.bool)
    allowed[:, where] = candidates.allowed.cpu()
    for row, tokens in enumerate(extra):
        if tokens:
            allowed[row, torch.searchsorted(ids, torch.tensor(tokens))] = True
    device = candidates.ids.device
    return Candidates(ids.to(device), allowed.to(device))


def _hand_over(cons, cons_len, p_met, p_term, p_done, goes_on, token):
    """Terms that begin alike: where ``token`` breaks off the term in progress, another unmet
    term with the same first tokens takes them over, met if they are all of it, going on if
    ``token`` is its next one ((B, C) candidates; returns their met terms, term in progress and
    whether it goes on)."""
    b, m, width = cons.shape
    c = p_term.size(1)
    current = cons.gather(1, p_term.clamp(min=0).unsqueeze(-1).expand(b, c, width))  # (B, C, W)
    within = torch.arange(width, device=cons.device) < p_done.unsqueeze(-1)
    agree = ((cons.unsqueeze(1) == current.unsqueeze(2)) | ~within.unsqueeze(2)).all(-1)
    broke = (p_term >= 0) & ~goes_on
    open_ = broke.unsqueeze(-1) & agree & ~p_met & (cons_len > 0).unsqueeze(1)  # (B, C, M)
    whole = open_ & (cons_len.unsqueeze(1) == p_done.unsqueeze(-1))
    at = p_done.clamp(max=width - 1)[..., None, None].expand(b, c, m, 1)
    following = cons.unsqueeze(1).expand(b, c, m, width).gather(3, at).squeeze(-1)
    takes = open_ & (cons_len.unsqueeze(1) > p_done.unsqueeze(-1))
    takes &= following == token.unsqueeze(-1)
    switched = takes.any(-1)
    p_term = torch.where(switched, takes.to(torch.int8).argmax(-1), p_term)
    return p_met | whole, p_term, goes_on | switched


def _attending(weights: torch.Tensor, attends: torch.Tensor, anywhere: torch.Tensor):
    """(B, K, M): does each hypothesis's attention (B, K, S) point at each term's source words
    (at least ATTENDED of its weight on them, or its largest weight on one of them)?"""
    mass = torch.einsum("bks,bms->bkm", weights, attends.to(weights.dtype))
    peak = weights.argmax(-1)  # (B, K)
    on_peak = attends.gather(2, peak.unsqueeze(1).expand(-1, attends.size(1), -1))  # (B, M, K)
    return (mass >= ATTENDED) | on_peak.transpose(1, 2) | anywhere.unsqueeze(1)


def _pad(rows: list[list[int]], width: int) -> torch.Tensor:
    out = torch.full((len(rows), max(width, 1)), PAD, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    return out


class Constrained(Strategy):
    """The beam step of dynamic beam allocation (Post & Vilar 2018, vectorized as Hu et al. 2019;
    module doc) for a batch of sentences with their ``forced`` terms and prefixes: candidates
    from the top K, each hypothesis's best and each term's next token, K slots round-robin over
    the banks (term tokens placed). ``placement`` False: no attention gate and no dead ends."""

    leaves = True
    # term and prefix tokens are looked up as columns of the one union
    fixed_union = True

    def __init__(self, forced: Sequence[Forced], k: int, src: torch.Tensor, placement: bool):
        device, b, s_len = src.device, src.size(0), src.size(1)
        self.forced, self.placement, self.device = forced, placement, device
        terms = [f.terms for f in forced]
        m = max(1, max(len(t) for t in terms))
        width = max([1] + [len(term) for t in terms for term in t])
        cons = torch.full((b, m, width), PAD, dtype=torch.long)
        cons_len = torch.zeros(b, m, dtype=torch.long)
        attends = torch.zeros(b, m, s_len, dtype=torch.bool)  # (B, M, S) each term's source words
        for i, f in enumerate(forced):
            for j, term in enumerate(f.terms):
                cons[i, j, : len(term)] = torch.tensor(term, dtype=torch.long)
                cons_len[i, j] = len(term)
            for j, positions in enumerate(f.sources[: len(f.terms)]):
                attends[i, j, [p for p in positions if p < s_len]] = True
        self.cons, self.cons_len = cons.to(device), cons_len.to(device)
        self.attends, self.anywhere = attends.to(device), (~attends.any(-1)).to(device)
        self.total = self.cons_len.sum(dim=1)  # (B,) term tokens to place
        self.prefix = _pad([f.prefix for f in forced], max(len(f.prefix) for f in forced))
        self.prefix = self.prefix.to(device)
        self.prefix_len = torch.tensor([len(f.prefix) for f in forced], device=device)
        self.met = (self.cons_len == 0).unsqueeze(1).expand(b, k, m).clone()  # (B, K, M)
        self.progress_term = torch.full((b, k), -1, dtype=torch.long, device=device)  # -1: none
        self.progress_done = torch.zeros(b, k, dtype=torch.long, device=device)  # its tokens
        self.just_met = torch.zeros(b, k, dtype=torch.bool, device=device)  # a term just ended
        self.ids = self.position = None
        self.continuations = next(
            (f.continuations for f in forced if f.continuations is not None), None
        )

    def vocabulary(self, vocab: Candidates | None) -> Candidates | None:
        """The shortlist with the forced tokens in each sentence's set."""
        if vocab is not None:
            vocab = with_forced_tokens(vocab, self.forced)
            self.ids = vocab.ids
            self.position = torch.zeros(
                int(self.ids.max()) + 1, dtype=torch.long, device=self.device
            )
            self.position[self.ids] = torch.arange(self.ids.numel(), device=self.device)
        if self.continuations is not None:
            ends = self.continuations.to(self.device)
            self.continuations = ends if self.ids is None else ends[self.ids]
        return vocab

    def lengths(self, limit: torch.Tensor) -> torch.Tensor:
        """The cap, raised where the prefix and the terms need more room."""
        return torch.maximum(limit, self.prefix_len + self.total + 1)

    def forcing(self, t: int) -> torch.Tensor:
        """The sentences still within their prefix at step ``t``."""
        return t < self.prefix_len

    def column_of(self, tokens: torch.Tensor) -> torch.Tensor:
        return tokens if self.position is None else self.position[tokens]

    def token_of(self, cols: torch.Tensor) -> torch.Tensor:
        return cols if self.ids is None else self.ids[cols]

    def step(self, t, logp, alive_logp, weights, columns, limit) -> Step:
        b, k, v = logp.shape
        m, width = self.cons.size(1), self.cons.size(2)
        bank = (self.met * self.cons_len.unsqueeze(1)).sum(-1) + self.progress_done  # (B, K)
        growing = self._restrict(t, logp, alive_logp, bank)
        scores = growing.unsqueeze(-1) + logp  # (B, K, V)
        # the candidates: the K best overall, each hypothesis's best, each term's next token
        rank = torch.arange(k, device=logp.device)
        top_score, top_idx = best_continuations(logp, growing, k)
        own_score, own_col = (x.view(b, k) for x in best_per_row(scores.view(b * k, v)))
        terms = torch.arange(m, device=logp.device)
        taking = torch.where(self.progress_term.unsqueeze(-1) == terms, 1, 0)
        next_at = (self.progress_done.unsqueeze(-1) * taking).clamp(max=width - 1)  # (B, K, M)
        next_tok = self.cons.unsqueeze(1).expand(b, k, m, width).gather(3, next_at.unsqueeze(-1))
        gate = torch.ones(b, k, m, dtype=torch.bool, device=logp.device)  # (B, K, M) may start
        if weights is not None and self.placement:
            room = (limit - 1 - t).unsqueeze(1) <= (self.total.unsqueeze(1) - bank) + ROOM
            gate = _attending(weights.view(b, k, -1).float(), self.attends, self.anywhere)
            gate |= room.unsqueeze(-1) | (t < self.prefix_len).view(b, 1, 1)  # a prefix's terms
        may_start = (self.progress_term.unsqueeze(-1) < 0) & ~self.met & gate
        term_col = self.column_of(next_tok.squeeze(-1))
        term_score = scores.gather(2, term_col).masked_fill(~((taking == 1) | may_start), NEG_INF)
        cand_beam = torch.cat(
            [top_idx // v, rank.expand(b, k), rank.view(1, k, 1).expand(b, k, m).reshape(b, -1)],
            dim=1,
        )
        cand_col = torch.cat([top_idx % v, own_col, term_col.view(b, -1)], dim=1)
        cand_score = _once(
            cand_beam * v + cand_col,
            torch.cat([top_score, own_score, term_score.view(b, -1)], dim=1),
        )
        cand_tok = self.token_of(cand_col)
        new_met, new_term, new_done, ended = self._advance_terms(cand_beam, cand_tok, gate)
        new_bank = (new_met * self.cons_len.unsqueeze(1)).sum(-1) + new_done  # (B, C)
        is_eos = (cand_tok == EOS) & (cand_score > NEG_INF)
        open_ = (cand_score > NEG_INF) & ~is_eos
        chosen = _round_robin(cand_score, open_, new_bank, int(self.total.max()) + 2, k)
        alive_score = cand_score.masked_fill(~open_, NEG_INF).gather(1, chosen)
        self.met = new_met.gather(1, chosen.unsqueeze(-1).expand(b, k, m))
        self.progress_term, self.progress_done = (
            new_term.gather(1, chosen),
            new_done.gather(1, chosen),
        )
        self.just_met = ended.gather(1, chosen)
        return Step(cand_beam, cand_tok, cand_score, is_eos, chosen, alive_score)

    def _restrict(self, t, logp, alive_logp, bank):
        """In place on ``logp`` (B, K, V): EOS barred while a term is missing, continuations
        barred right after a term, only the prefix's token within the prefix. Returns the alive
        scores, -inf for the dead ends (module doc)."""
        b, k, v = logp.shape
        short = bank < self.total.unsqueeze(1)
        growing = alive_logp
        if DEAD_ENDS and self.placement:
            # the model would end here with a term still missing: what followed would be an
            # appendix, so the hypothesis stops (others placed the term within the sentence)
            ends = logp.argmax(-1) == EOS
            growing = alive_logp.masked_fill(
                ends & short & (t >= self.prefix_len).unsqueeze(1), NEG_INF
            )
        logp[..., EOS] = logp[..., EOS].masked_fill(short, NEG_INF)
        if self.continuations is not None and bool(self.just_met.any()):
            rows_met = self.just_met.view(-1).nonzero().squeeze(1)
            flat_logp = logp.view(b * k, v)
            flat_logp[rows_met] = flat_logp[rows_met].masked_fill(self.continuations, NEG_INF)
        in_prefix = t < self.prefix_len  # (B,)
        if bool(in_prefix.any()):
            col = self.column_of(self.prefix[:, min(t, self.prefix.size(1) - 1)])
            kept = logp.gather(2, col.view(b, 1, 1).expand(b, k, 1))
            logp.masked_fill_(in_prefix.view(b, 1, 1), NEG_INF)
            logp.scatter_(2, col.view(b, 1, 1).expand(b, k, 1), kept)
        return growing

    def _advance_terms(self, cand_beam, cand_tok, gate):
        """Each candidate's term state: its met terms (B, C, M), the term in progress and its
        tokens so far (B, C), and whether a term ended at its token (B, C)."""
        cons, cons_len = self.cons, self.cons_len
        b, m, width = cons.shape
        c = cand_beam.size(1)
        terms = torch.arange(m, device=cons.device)
        p_met = self.met.gather(1, cand_beam.unsqueeze(-1).expand(b, c, m))
        p_term = self.progress_term.gather(1, cand_beam)
        p_done = self.progress_done.gather(1, cand_beam)
        expected = cons.view(b, m * width).gather(
            1, (p_term.clamp(min=0) * width + p_done.clamp(max=width - 1))
        )
        goes_on = (p_term >= 0) & (cand_tok == expected)
        if m > 1:
            p_met, p_term, goes_on = _hand_over(
                cons, cons_len, p_met, p_term, p_done, goes_on, cand_tok
            )
        p_len = cons_len.gather(1, p_term.clamp(min=0))
        completes = goes_on & (p_done + 1 == p_len)
        starts = (cons[:, :, 0].unsqueeze(1) == cand_tok.unsqueeze(-1)) & ~p_met
        starts &= (cons_len > 0).unsqueeze(1) & ~goes_on.unsqueeze(-1)
        starts &= gate.gather(1, cand_beam.unsqueeze(-1).expand(b, c, m))
        starting = starts.any(-1)
        # of several terms that start here, the longest: a shorter one it breaks off into is
        # handed the tokens (_hand_over)
        first = torch.where(starts, cons_len.unsqueeze(1), -1).argmax(-1)
        first_len = cons_len.gather(1, first)
        new_met = p_met.clone()
        new_met |= completes.unsqueeze(-1) & (terms == p_term.unsqueeze(-1))
        single = starting & (first_len == 1)
        new_met |= single.unsqueeze(-1) & (terms == first.unsqueeze(-1))
        new_term = torch.where(goes_on & ~completes, p_term, -1)
        new_term = torch.where(starting & ~single, first, new_term)
        new_done = torch.where(goes_on & ~completes, p_done + 1, 0)
        new_done = torch.where(starting & ~single, 1, new_done)
        return new_met, new_term, new_done, completes | single

    def retire(self, done: torch.Tensor) -> None:
        """Nothing to do: the loop's alive scores of ``done`` are -inf, so are their
        candidates'."""

    def keep(self, live: torch.Tensor) -> None:
        for name in (
            "cons",
            "cons_len",
            "total",
            "prefix",
            "prefix_len",
            "attends",
            "anywhere",
            "met",
            "progress_term",
            "progress_done",
            "just_met",
        ):
            setattr(self, name, getattr(self, name)[live])


def _once(key: torch.Tensor, score: torch.Tensor) -> torch.Tensor:
    """``score`` (B, C) with -inf for every repeat of a ``key`` (parent and column): the same
    continuation proposed twice counts once (the copy kept is a valid one)."""
    by_score = score.argsort(dim=1, descending=True, stable=True)
    order = by_score.gather(1, key.gather(1, by_score).argsort(dim=1, stable=True))
    sorted_key = key.gather(1, order)
    repeat = torch.zeros_like(sorted_key, dtype=torch.bool)
    repeat[:, 1:] = sorted_key[:, 1:] == sorted_key[:, :-1]
    return score.masked_fill(repeat.scatter(1, order, repeat), NEG_INF)


def _round_robin(score, open_, bank, lowest: int, k: int) -> torch.Tensor:
    """(B, K) the candidates that stay alive: K slots round-robin over the banks (B, C), the
    highest bank first at each round, the best first within a bank (Hu et al. 2019's allocation
    with unused slots passed on). ``lowest``: a bank above every real one, for the closed."""
    b, c = score.shape
    by_score = score.masked_fill(~open_, NEG_INF).argsort(dim=1, descending=True)
    banked = torch.where(open_, bank, lowest).gather(1, by_score)
    by_bank = banked.argsort(dim=1, stable=True)
    order = by_score.gather(1, by_bank)  # by bank, best first within a bank
    sorted_bank = banked.gather(1, by_bank)
    position = torch.arange(c, device=score.device).expand(b, c)
    opens = torch.ones_like(sorted_bank, dtype=torch.bool)
    opens[:, 1:] = sorted_bank[:, 1:] != sorted_bank[:, :-1]
    start = torch.where(opens, position, 0).cummax(dim=1).values
    slot_key = (position - start) * lowest + (lowest - 1 - sorted_bank)
    slot_key = slot_key.masked_fill(sorted_bank == lowest, c * lowest * 2)
    return order.gather(1, slot_key.topk(k, dim=1, largest=False).indices)


def constrained_beam_search(
    model,
    src: torch.Tensor,
    src_lengths: torch.Tensor,
    forced: Sequence[Forced],
    settings: SearchSettings | None = None,
    *,
    vocab: Candidates | None = None,
    placement: bool = True,
    **fields,
) -> list[list[Hypothesis]]:
    """The ``nbest`` best hypotheses per sentence that satisfy its ``forced`` (module doc), best
    first: the one beam loop with the ``Constrained`` step; an empty list for a sentence whose
    terms did not fit within its length cap. ``placement`` False: no attention gate and no dead
    ends (a second try for a sentence whose terms found no place); ``fields``: settings given one
    by one."""
    settings = settings_with(settings, fields)
    strategy = Constrained(forced, settings.beam_size, src, placement)
    return beam_loop(model, src, src_lengths, settings, strategy, vocab)
