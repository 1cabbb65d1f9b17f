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

from nmt_cli.data.tokenizer import BOS, EOS, PAD
from nmt_cli.decoding.search import Hypothesis, length_penalty, max_lengths, restrict_steps, trimmed
from nmt_cli.decoding.shortlist import Candidates
from nmt_cli.model.output_layer import Columns

# Done sentences leave the batch once they are at least this share of it
LEAVE_SHARE = 0.25
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


@torch.no_grad()
def constrained_beam_search(
    model,
    src: torch.Tensor,
    src_lengths: torch.Tensor,
    forced: Sequence[Forced],
    *,
    beam_size: int = 5,
    alpha: float = 0.6,
    max_len_ratio: float = 1.5,
    max_len_const: int = 10,
    min_len: int = 1,
    nbest: int = 1,
    attention: bool = False,
    vocab: Candidates | None = None,
    placement: bool = True,
) -> list[list[Hypothesis]]:
    """The ``nbest`` best hypotheses per sentence that satisfy its ``forced`` (module doc), best
    first; an empty list for a sentence whose terms did not fit within its length cap. The cap is
    raised where the prefix and terms need more room. ``placement`` False: no attention gate and
    no dead ends (a second try for a sentence whose terms found no place)."""
    device = src.device
    b, k = src.size(0), beam_size
    neg_inf = float("-inf")
    terms = [f.terms for f in forced]
    m = max(1, max(len(t) for t in terms))
    width = max([1] + [len(term) for t in terms for term in t])
    cons = torch.full((b, m, width), PAD, dtype=torch.long)
    cons_len = torch.zeros(b, m, dtype=torch.long)
    for i, sentence_terms in enumerate(terms):
        for j, term in enumerate(sentence_terms):
            cons[i, j, : len(term)] = torch.tensor(term, dtype=torch.long)
            cons_len[i, j] = len(term)
    cons, cons_len = cons.to(device), cons_len.to(device)
    s_len = src.size(1)
    attends = torch.zeros(b, m, s_len, dtype=torch.bool)  # (B, M, S) each term's source words
    for i, f in enumerate(forced):
        for j, positions in enumerate(f.sources[: len(f.terms)]):
            attends[i, j, [p for p in positions if p < s_len]] = True
    anywhere = ~attends.any(-1)  # (B, M) terms without source words
    attends, anywhere = attends.to(device), anywhere.to(device)
    total = cons_len.sum(dim=1)  # (B,) term tokens to place
    prefix = _pad([f.prefix for f in forced], max(len(f.prefix) for f in forced)).to(device)
    prefix_len = torch.tensor([len(f.prefix) for f in forced], device=device)
    limit = max_lengths(src_lengths, max_len_ratio, max_len_const).to(device)
    limit = torch.maximum(limit, prefix_len + total + 1)
    steps = int(limit.max())

    if vocab is not None:
        vocab = with_forced_tokens(vocab, forced)
        ids = vocab.ids
        position = torch.full((int(ids.max()) + 1,), 0, dtype=torch.long, device=device)
        position[ids] = torch.arange(ids.numel(), device=device)
        flat = torch.arange(b, device=device).repeat_interleave(k)
        sentence_allowed = vocab.allowed
        columns = Columns(ids, sentence_allowed.index_select(0, flat))
    else:
        ids, position, columns = None, None, None

    continuations = next((f.continuations for f in forced if f.continuations is not None), None)
    if continuations is not None:
        continuations = continuations.to(device)
        continuations = continuations if ids is None else continuations[ids]

    def column_of(tokens: torch.Tensor) -> torch.Tensor:
        return tokens if position is None else position[tokens]

    def token_of(cols: torch.Tensor) -> torch.Tensor:
        return cols if ids is None else ids[cols]

    state, memory = model.encode(src, src_lengths)
    state = state.select(torch.arange(b, device=device).repeat_interleave(k))
    memory = memory.shared_by(k)
    rank = torch.arange(k, device=device)
    sentence = torch.arange(b, device=device)
    best_possible_lp = length_penalty(limit, alpha)
    lp_of_length = length_penalty(torch.arange(steps + 1, device=device), alpha)

    alive_seq = torch.zeros(b, k, 0, dtype=torch.long, device=device)
    alive_logp = torch.full((b, k), neg_inf, device=device)
    alive_logp[:, 0] = 0.0
    alive_attn = torch.zeros(b, k, 0, s_len, device=device) if attention else None
    met = (cons_len == 0).unsqueeze(1).expand(b, k, m).clone()  # (B, K, M)
    progress_term = torch.full((b, k), -1, dtype=torch.long, device=device)  # -1: none
    progress_done = torch.zeros(b, k, dtype=torch.long, device=device)  # its tokens so far
    just_met = torch.zeros(b, k, dtype=torch.bool, device=device)  # a term ended at the last token
    fin_seq = torch.full((b, k, steps), PAD, dtype=torch.long, device=device)
    fin_norm = torch.full((b, k), neg_inf, device=device)
    fin_logp = torch.full((b, k), neg_inf, device=device)
    fin_attn = torch.zeros(b, k, steps, s_len, device=device) if attention else None
    done = torch.zeros(b, dtype=torch.bool, device=device)
    rows = torch.arange(b, device=device)  # the original sentence of each batch row
    src_lengths = src_lengths.tolist()
    results: list[list[Hypothesis]] = [[] for _ in range(b)]

    def emit(which: list[int]) -> None:
        seqs, norms, logps = fin_seq[which].tolist(), fin_norm[which].tolist(), fin_logp[which]
        logps = logps.tolist()
        for r, row in enumerate(which):
            i = int(rows[row])
            hyps = []
            for j in range(k):
                if norms[r][j] == neg_inf:
                    continue
                seq = trimmed(seqs[r][j])
                a = None
                if attention:
                    a = fin_attn[row, j, : len(seq) + 1, : src_lengths[i]].float().cpu()
                hyps.append(Hypothesis(seq, logps[r][j], norms[r][j], a))
            results[i] = hyps[:nbest]

    prev = torch.full((b * k,), BOS, dtype=torch.long, device=device)

    for t in range(steps):
        logp, state, weights = model.step(prev, state, memory, columns)
        at_limit = (limit - 1 <= t).repeat_interleave(k)
        logp = restrict_steps(logp, at_limit, t < min_len)
        v = logp.size(-1)
        logp = logp.view(b, k, v)
        bank = (met * cons_len.unsqueeze(1)).sum(-1) + progress_done  # (B, K)
        short = bank < total.unsqueeze(1)
        growing = alive_logp
        if DEAD_ENDS and placement:
            # the model would end here with a term still missing: what followed would be an
            # appendix, so the hypothesis stops (others placed the term within the sentence)
            ends = logp.argmax(-1) == EOS
            growing = alive_logp.masked_fill(ends & short & (t >= prefix_len).unsqueeze(1), neg_inf)
        logp[..., EOS] = logp[..., EOS].masked_fill(short, neg_inf)
        if continuations is not None and bool(just_met.any()):
            rows_met = just_met.view(-1).nonzero().squeeze(1)
            flat_logp = logp.view(b * k, v)
            flat_logp[rows_met] = flat_logp[rows_met].masked_fill(continuations, neg_inf)
        in_prefix = t < prefix_len  # (B,)
        if bool(in_prefix.any()):
            col = column_of(prefix[:, min(t, prefix.size(1) - 1)])
            kept = logp.gather(2, col.view(b, 1, 1).expand(b, k, 1))
            logp.masked_fill_(in_prefix.view(b, 1, 1), neg_inf)
            logp.scatter_(2, col.view(b, 1, 1).expand(b, k, 1), kept)
        scores = growing.unsqueeze(-1) + logp  # (B, K, V)

        # the candidates: the K best overall, each hypothesis's best, each term's next token
        top_score, top_idx = scores.view(b, k * v).topk(k, dim=-1)
        own_score, own_col = scores.max(dim=-1)
        taking = torch.where(progress_term.unsqueeze(-1) == torch.arange(m, device=device), 1, 0)
        next_at = (progress_done.unsqueeze(-1) * taking).clamp(max=width - 1)  # (B, K, M)
        next_tok = cons.unsqueeze(1).expand(b, k, m, width).gather(3, next_at.unsqueeze(-1))
        next_tok = next_tok.squeeze(-1)
        gate = torch.ones(b, k, m, dtype=torch.bool, device=device)  # (B, K, M) may start
        if weights is not None and placement:
            room = (limit - 1 - t).unsqueeze(1) <= (total.unsqueeze(1) - bank) + ROOM
            gate = _attending(weights.view(b, k, -1).float(), attends, anywhere)
            gate |= room.unsqueeze(-1) | (t < prefix_len).view(b, 1, 1)  # a prefix's own terms
        may_start = (progress_term.unsqueeze(-1) < 0) & ~met & gate
        may_take = (taking == 1) | may_start
        term_col = column_of(next_tok)
        term_score = scores.gather(2, term_col).masked_fill(~may_take, neg_inf)
        cand_beam = torch.cat(
            [top_idx // v, rank.expand(b, k), rank.view(1, k, 1).expand(b, k, m).reshape(b, -1)],
            dim=1,
        )
        cand_col = torch.cat([top_idx % v, own_col, term_col.view(b, -1)], dim=1)
        cand_score = torch.cat([top_score, own_score, term_score.view(b, -1)], dim=1)
        # the same continuation proposed twice counts once (the copy kept is a valid one)
        key = cand_beam * v + cand_col
        by_score = cand_score.argsort(dim=1, descending=True, stable=True)
        order = by_score.gather(1, key.gather(1, by_score).argsort(dim=1, stable=True))
        sorted_key = key.gather(1, order)
        repeat = torch.zeros_like(sorted_key, dtype=torch.bool)
        repeat[:, 1:] = sorted_key[:, 1:] == sorted_key[:, :-1]
        cand_score = cand_score.masked_fill(repeat.scatter(1, order, repeat), neg_inf)
        cand_tok = token_of(cand_col)

        # each candidate's term state
        c = cand_beam.size(1)
        p_met = met.gather(1, cand_beam.unsqueeze(-1).expand(b, c, m))
        p_term = progress_term.gather(1, cand_beam)
        p_done = progress_done.gather(1, cand_beam)
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
        new_met |= completes.unsqueeze(-1) & (
            torch.arange(m, device=device) == p_term.unsqueeze(-1)
        )
        single = starting & (first_len == 1)
        new_met |= single.unsqueeze(-1) & (torch.arange(m, device=device) == first.unsqueeze(-1))
        new_term = torch.where(goes_on & ~completes, p_term, -1)
        new_term = torch.where(starting & ~single, first, new_term)
        new_done = torch.where(goes_on & ~completes, p_done + 1, 0)
        new_done = torch.where(starting & ~single, 1, new_done)
        new_bank = (new_met * cons_len.unsqueeze(1)).sum(-1) + new_done  # (B, C)
        ended = completes | single

        valid = cand_score > neg_inf
        is_eos = (cand_tok == EOS) & valid
        parent_seq = alive_seq.gather(1, cand_beam.unsqueeze(-1).expand(b, c, t))
        cand_seq = torch.cat([parent_seq, cand_tok.unsqueeze(-1)], dim=-1)  # (B, C, t+1)
        if attention:
            step_attn = torch.cat([alive_attn, weights.view(b, k, 1, -1)], dim=2)
            cand_attn = step_attn.gather(1, cand_beam[..., None, None].expand(b, c, t + 1, s_len))

        # finished: EOS candidates (every term met), merged with the ones before
        new_norm = torch.where(is_eos, cand_score / lp_of_length[t + 1], neg_inf)
        new_norm = new_norm.masked_fill(done.unsqueeze(1), neg_inf)
        fin_norm, pick = torch.cat([fin_norm, new_norm], dim=1).topk(k, dim=-1)
        padded = torch.cat([cand_seq, cand_seq.new_full((b, c, steps - t - 1), PAD)], dim=-1)
        fin_seq = torch.cat([fin_seq, padded], dim=1).gather(
            1, pick.unsqueeze(-1).expand(b, k, steps)
        )
        fin_logp = torch.cat([fin_logp, cand_score], dim=1).gather(1, pick)
        if attention:
            padded_attn = torch.cat([cand_attn, cand_attn.new_zeros(b, c, steps - t - 1, s_len)], 2)
            fin_attn = torch.cat([fin_attn, padded_attn], dim=1).gather(
                1, pick[..., None, None].expand(b, k, steps, s_len)
            )

        # alive: K slots round-robin over the banks, the highest bank first at each round
        open_ = valid & ~is_eos
        by_score = cand_score.masked_fill(~open_, neg_inf).argsort(dim=1, descending=True)
        lowest = int(total.max()) + 2
        banked = torch.where(open_, new_bank, lowest).gather(1, by_score)
        by_bank = banked.argsort(dim=1, stable=True)
        order = by_score.gather(1, by_bank)  # by bank, best first within a bank
        sorted_bank = banked.gather(1, by_bank)
        position_ = torch.arange(c, device=device).expand(b, c)
        opens = torch.ones_like(sorted_bank, dtype=torch.bool)
        opens[:, 1:] = sorted_bank[:, 1:] != sorted_bank[:, :-1]
        start = torch.where(opens, position_, 0).cummax(dim=1).values
        round_ = position_ - start
        slot_key = round_ * lowest + (lowest - 1 - sorted_bank)
        slot_key = slot_key.masked_fill(sorted_bank == lowest, c * lowest * 2)
        chosen = order.gather(1, slot_key.topk(k, dim=1, largest=False).indices)  # (B, K)
        alive_logp = cand_score.masked_fill(~open_, neg_inf).gather(1, chosen)
        alive_logp = alive_logp.masked_fill(done.unsqueeze(1), neg_inf)
        alive_seq = cand_seq.gather(1, chosen.unsqueeze(-1).expand(b, k, t + 1))
        if attention:
            alive_attn = cand_attn.gather(1, chosen[..., None, None].expand(b, k, t + 1, s_len))
        met = new_met.gather(1, chosen.unsqueeze(-1).expand(b, k, m))
        progress_term, progress_done = new_term.gather(1, chosen), new_done.gather(1, chosen)
        just_met = ended.gather(1, chosen)
        source_beam = cand_beam.gather(1, chosen)

        best_alive = alive_logp.max(dim=1).values
        done |= fin_norm[:, nbest - 1] > best_alive / best_possible_lp
        done |= best_alive == neg_inf
        done |= limit - 1 <= t
        ended_now = done.nonzero().squeeze(1).tolist()
        if t + 1 == steps or len(ended_now) == b:
            break
        alive_logp = alive_logp.masked_fill(done.unsqueeze(1), neg_inf)
        beam_rows = sentence.unsqueeze(1) * k + source_beam  # (B, K) the parents' rows
        if len(ended_now) >= LEAVE_SHARE * b:
            # the done sentences leave the batch: their results now, their rows no more
            emit(ended_now)
            live = (~done).nonzero().squeeze(1)
            b = live.numel()
            (cons, cons_len, total, prefix, prefix_len, limit, best_possible_lp, rows) = (
                x[live]
                for x in (cons, cons_len, total, prefix, prefix_len, limit, best_possible_lp, rows)
            )
            attends, anywhere = attends[live], anywhere[live]
            alive_seq, alive_logp, met = alive_seq[live], alive_logp[live], met[live]
            progress_term, progress_done = progress_term[live], progress_done[live]
            just_met, beam_rows, done = just_met[live], beam_rows[live], done[live]
            fin_seq, fin_norm, fin_logp = fin_seq[live], fin_norm[live], fin_logp[live]
            if attention:
                alive_attn, fin_attn = alive_attn[live], fin_attn[live]
            memory = memory.select(live)
            sentence = torch.arange(b, device=device)
            if columns is not None:
                sentence_allowed = sentence_allowed[live]
                columns = Columns(ids, sentence_allowed.repeat_interleave(k, dim=0))
        state = state.select(beam_rows.view(-1))
        prev = alive_seq[:, :, -1].reshape(-1)
    emit(list(range(b)))
    return results
