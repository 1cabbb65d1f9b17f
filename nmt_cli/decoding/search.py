"""Greedy and beam search, batched over sentences, over the model's search contract.

Both work on whole batches: beam search keeps a (B, K) grid of hypotheses in tensors and never
loops over hypotheses in Python. The beam holds K hypotheses, finished ones included: each step
ranks the continuations of the alive ones and keeps the best K - F, where F hypotheses have
finished so far; those of them ending in EOS finish (scored with the GNMT length penalty
lp(Y) = ((5 + |Y|) / 6)^alpha), the others stay alive. A beam of one is therefore greedy search,
token for token and score for score.

A sentence is done when all K have finished, or when no alive hypothesis can still enter its
n-best list: log-probabilities only fall as a hypothesis grows and lp only grows up to the length
cap L, so no continuation of the best alive hypothesis can score above its log-probability
divided by lp(L). Stopping on that bound never changes the result; stopping on lp at the current
length (a common shortcut) can, when alpha > 0. A done sentence's result is taken at once; the
sentence leaves the batch with others, once the done ones are ``LEAVE_SHARE`` of it, and until then
none of its hypotheses is alive.

The output length is capped at ``max_len_ratio * source length + max_len_const``; at the cap EOS
is forced. EOS is also barred before ``min_len`` tokens: a barely trained model gives EOS more
probability than any single word, and without the floor beam search would prefer the empty
translation for short sentences.

With a vocabulary shortlist (``Candidates``) the output layer runs over the union of the batch's
candidate sets (narrowed to the sets still in the batch as sentences leave it), and each sentence
is normalised over its own set, so the result for a sentence never depends on its batch-mates
(nmt_cli/model/output_layer.py). How the columns are laid out (the union, or row groups of whole
sentences) and whether the batch's shapes are rounded up is the model's ``DecodingSetup``
(nmt_cli/model/fast_decoding.py), read once per search; none of it changes a result.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from nmt_cli.data.tokenizer import BOS, EOS, PAD
from nmt_cli.decoding.shortlist import Candidates
from nmt_cli.model.fast_decoding import setup_of
from nmt_cli.model.output_layer import columns_for, narrow, pad_union, remaining_columns

# Beam search: done sentences leave the batch once they are at least this share of it. Each
# leaving rebuilds what is cut per batch (the output layer's plan, the memory's rows), which costs
# more than computing the few done sentences' rows a little longer.
LEAVE_SHARE = 0.125


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


REPEAT_NGRAM = 4  # the n of the repetition guard's n-grams (max_repeats)
# The guard watches the sentences of more source subwords than this: shorter ones do not loop,
# and its check at every step is not free (docs/translate.md#long-sentences).
REPEAT_GUARD_FROM = 20


def _guard(max_repeats: int, src_lengths: torch.Tensor) -> tuple[int, torch.Tensor | None]:
    """(max_repeats, which sentences it watches), or (0, None) where it watches none."""
    watched = src_lengths > REPEAT_GUARD_FROM
    if max_repeats <= 0 or not bool(watched.any()):
        return 0, None
    return max_repeats, watched.to(src_lengths.device)


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


def _split(
    vocab: Candidates | torch.Tensor | None,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(ids, allowed): the target ids decoded over (None = all) and each sentence's own set."""
    if isinstance(vocab, Candidates):
        return vocab.ids, vocab.allowed
    return vocab, None


def _round_up(live: torch.Tensor, finished: torch.Tensor, multiple: int) -> torch.Tensor:
    """The ``live`` rows and as many ``finished`` ones as make their count a multiple of
    ``multiple`` (where there are that many), in order. A finished row stays finished: it is
    computed and ignored, as between two checks."""
    extra = -live.numel() % multiple
    if not extra:
        return live
    return torch.cat([live, finished.nonzero().squeeze(1)[:extra]]).sort().values


def trimmed(row: list[int]) -> list[int]:
    out = []
    for t in row:
        if t in (EOS, PAD):
            break
        out.append(t)
    return out


@torch.no_grad()
def greedy(
    model,
    src: torch.Tensor,
    src_lengths: torch.Tensor,
    *,
    max_len_ratio: float = 1.5,
    max_len_const: int = 10,
    min_len: int = 1,
    attention: bool = False,
    vocab: Candidates | torch.Tensor | None = None,
    check_every: int = 4,
    max_repeats: int = 0,
) -> list[list[Hypothesis]]:
    """Batched greedy decoding; returns one 1-best hypothesis list per sentence.
    ``vocab``: sorted target ids to choose from, or per-sentence ``Candidates``; None = all.

    Every ``check_every`` steps (one host synchronisation, not one per step) the sentences that
    have ended leave the batch: in a length-sorted batch a good share of the rows would otherwise
    go on computing after their EOS. ``max_repeats`` > 0: no 4-gram occurs more often than that
    in the output of a sentence of over REPEAT_GUARD_FROM subwords (the repetition guard,
    :func:`_ban_repeats`)."""
    setup = setup_of(model)
    multiple, group_rows = setup.column_multiple, setup.group_rows
    vocab, allowed = pad_union(*_split(vocab), multiple)
    b = src.size(0)
    device = src.device
    columns = columns_for(vocab, allowed, group_rows)
    state, memory = model.encode(src, src_lengths)
    max_repeats, watched = _guard(max_repeats, src_lengths)
    limit = max_lengths(src_lengths, max_len_ratio, max_len_const).to(device)
    steps, first_cap = (
        int(limit.max()),
        int(limit.min()) - 1,
    )  # no row is at its cap before first_cap
    tokens = torch.full((b, steps), PAD, dtype=torch.long, device=device)
    scores = torch.zeros(b, device=device)
    attn = None
    rows = torch.arange(b, device=device)  # the sentence of each row still decoding
    done = torch.zeros(b, dtype=torch.bool, device=device)
    prev = torch.full((b,), BOS, dtype=torch.long, device=device)
    for t in range(steps):
        logp, state, weights = model.step(prev, state, memory, columns)
        logp = restrict_steps(logp, limit - 1 <= t if t >= first_cap else None, t < min_len)
        if max_repeats:
            _ban_repeats(logp, tokens[rows, :t], columns, max_repeats, watched[rows])
        best, token = logp.max(dim=-1)
        if columns is not None:
            token = columns.token_ids(token)
        token = token.masked_fill(done, PAD)
        scores.index_add_(0, rows, best.masked_fill(done, 0.0).to(scores.dtype))
        tokens[rows, t] = token
        if attention and weights is not None:
            if attn is None:
                attn = weights.new_zeros(b, steps, weights.size(-1))
            attn[rows, t] = weights
        done |= token == EOS
        prev = token.masked_fill(token == PAD, EOS)
        if (t + 1) % check_every == 0 and bool(done.any()):
            live = (~done).nonzero().squeeze(1)
            if live.numel() == 0:
                break
            live = _round_up(live, done, setup.row_multiple)
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


@torch.no_grad()
def beam_search(
    model,
    src: torch.Tensor,
    src_lengths: torch.Tensor,
    *,
    beam_size: int = 5,
    alpha: float = 0.6,
    max_len_ratio: float = 1.5,
    max_len_const: int = 10,
    min_len: int = 1,
    nbest: int = 1,
    attention: bool = False,
    vocab: Candidates | torch.Tensor | None = None,
    leave_share: float = LEAVE_SHARE,
    max_repeats: int = 0,
) -> list[list[Hypothesis]]:
    """Batched beam search; returns the ``nbest`` best hypotheses per sentence, best first.
    ``vocab``: sorted target ids to choose from, or per-sentence ``Candidates``; None = all.

    The beam holds K hypotheses, finished ones included; a sentence is done once all K have
    finished or its n-th best finished one beats what any alive one can still reach (module
    doc). Done sentences leave the batch, so the tensors shrink as the batch finishes.
    ``max_repeats`` > 0: the repetition guard, as greedy's."""
    setup = setup_of(model)
    multiple = setup.column_multiple
    vocab, allowed = pad_union(*_split(vocab), multiple)
    k = beam_size
    b = src.size(0)
    device = src.device
    # groups of whole sentences' hypotheses, so that a sentence's K rows share their columns
    group_rows = setup.beam_groups(k)
    state, memory = model.encode(src, src_lengths)
    max_repeats, watched = _guard(max_repeats, src_lengths)
    flat = torch.arange(b, device=device).repeat_interleave(k)
    # The first step from BOS is the same for a sentence's K hypotheses: it runs once per
    # sentence (over the union), and its output is copied to the K rows. Each later step runs at
    # the end of the iteration before it.
    first = columns_for(vocab, allowed, 0)
    logp, state, weights = model.step(
        torch.full((b,), BOS, dtype=torch.long, device=device), state, memory, first
    )
    state, memory, logp = state.select(flat), memory.shared_by(k), logp.index_select(0, flat)
    if weights is not None:
        weights = weights.index_select(0, flat)
    if allowed is not None:
        allowed = allowed.index_select(0, flat)
    columns = columns_for(vocab, allowed, group_rows)
    if columns is not None and columns.group_rows is None:
        columns.cuts = first.cuts  # the same union: the rows of W_s cut for the first step
    if columns is not None and columns.group_rows is not None:
        # the first step's log-probabilities, over the union, laid out as the groups' columns
        logp = logp.gather(1, columns.union_positions())
    limit = max_lengths(src_lengths, max_len_ratio, max_len_const).to(device)
    steps, first_cap = (
        int(limit.max()),
        int(limit.min()) - 1,
    )  # no row is at its cap before first_cap
    s_len = src.size(1)
    neg_inf = float("-inf")

    rows = torch.arange(b, device=device)  # original sentence of each active row
    width = torch.full((b, 1), k, dtype=torch.long, device=device)  # K minus the finished
    rank = torch.arange(k, device=device)
    best_possible_lp = length_penalty(limit, alpha)  # lp at the cap: the largest any can get
    lp_of_length = length_penalty(torch.arange(steps + 1, device=device), alpha)
    alive_seq = torch.full((b, k, 0), BOS, dtype=torch.long, device=device)
    alive_logp = torch.full((b, k), neg_inf, device=device)
    alive_logp[:, 0] = 0.0
    alive_attn = torch.zeros(b, k, 0, s_len, device=device) if attention else None
    fin_seq = torch.full((b, k, steps), PAD, dtype=torch.long, device=device)
    fin_norm = torch.full((b, k), neg_inf, device=device)
    fin_logp = torch.full((b, k), neg_inf, device=device)
    fin_attn = torch.zeros(b, k, steps, s_len, device=device) if attention else None
    results: list[list[Hypothesis]] = [[] for _ in range(b)]
    emitted = torch.zeros(b, dtype=torch.bool, device=device)  # done, still in the batch
    kept = 0  # of those, the ones that stayed at the last leaving to keep the count a multiple

    def emit(which: torch.Tensor) -> None:
        seqs, norms, logps = (
            fin_seq[which].tolist(),
            fin_norm[which].tolist(),
            fin_logp[which].tolist(),
        )
        attn = fin_attn[which] if attention else None
        for r, i in enumerate(rows[which].tolist()):
            hyps = []
            for j in range(k):
                if norms[r][j] == neg_inf:
                    continue
                seq = trimmed(seqs[r][j])
                a = (
                    None
                    if attn is None
                    else attn[r, j, : len(seq) + 1, : int(src_lengths[i])].float().cpu()
                )
                hyps.append(Hypothesis(seq, logps[r][j], norms[r][j], a))
            results[i] = hyps[:nbest]

    for t in range(steps):
        n = rows.size(0)
        v = logp.size(-1)
        at_limit = (limit - 1 <= t).repeat_interleave(k) if t >= first_cap else None
        logp = restrict_steps(logp, at_limit, t < min_len)
        if max_repeats:
            rows_watched = watched[rows].repeat_interleave(k)
            _ban_repeats(logp, alive_seq.reshape(n * k, t), columns, max_repeats, rows_watched)
        logp = logp.view(n, k, v)
        cand = (alive_logp.unsqueeze(-1) + logp).view(n, k * v)
        top_logp, top_idx = cand.topk(k, dim=-1)  # (N, K), best first
        top_beam, top_tok = top_idx // v, top_idx % v
        if columns is not None:
            top_tok = columns.token_ids(top_tok, torch.arange(n, device=device) * k)
        in_beam = rank < width  # the finished hypotheses hold the other slots
        gathered_seq = alive_seq.gather(1, top_beam.unsqueeze(-1).expand(-1, -1, t))
        top_seq = torch.cat([gathered_seq, top_tok.unsqueeze(-1)], dim=-1)  # (N, K, t+1)
        if attention:
            w = weights.view(n, k, 1, -1)
            step_attn = torch.cat([alive_attn, w], dim=2)  # (N, K, t+1, S)
            top_attn = step_attn.gather(1, top_beam[..., None, None].expand(-1, -1, t + 1, s_len))
        is_eos = (top_tok == EOS) & in_beam

        # Finished: EOS candidates within the beam, ranked by the length-penalised score. At most
        # K ever finish, so merging and keeping the best K loses none.
        new_norm = torch.where(is_eos, top_logp / lp_of_length[t + 1], neg_inf)
        merged_norm = torch.cat([fin_norm, new_norm], dim=1)  # (N, 2K)
        fin_norm, pick = merged_norm.topk(k, dim=-1)
        padded_new = torch.cat([top_seq, top_seq.new_full((n, k, steps - t - 1), PAD)], dim=-1)
        fin_seq = torch.cat([fin_seq, padded_new], dim=1).gather(
            1, pick.unsqueeze(-1).expand(-1, -1, steps)
        )
        fin_logp = torch.cat([fin_logp, top_logp], dim=1).gather(1, pick)
        if attention:
            padded_attn = torch.cat(
                [top_attn, top_attn.new_zeros(n, k, steps - t - 1, s_len)], dim=2
            )
            fin_attn = torch.cat([fin_attn, padded_attn], dim=1).gather(
                1, pick[..., None, None].expand(-1, -1, steps, s_len)
            )

        # Alive: the candidates within the beam that did not end.
        alive_cand = top_logp.masked_fill(is_eos | ~in_beam, neg_inf)
        alive_logp, keep = alive_cand.topk(k, dim=-1)
        alive_seq = top_seq.gather(1, keep.unsqueeze(-1).expand(-1, -1, t + 1))
        if attention:
            alive_attn = top_attn.gather(1, keep[..., None, None].expand(-1, -1, t + 1, s_len))
        source_beam = top_beam.gather(1, keep)
        width = width - is_eos.sum(dim=1, keepdim=True)

        done = width.squeeze(1) == 0
        done |= fin_norm[:, nbest - 1] > alive_logp[:, 0] / best_possible_lp
        done |= limit - 1 <= t
        newly = done & ~emitted  # the emitted stay done: their width is 0
        new_count, done_count = torch.stack([newly.sum(), done.sum()]).tolist()  # one sync
        if t + 1 == steps or done_count == n:
            emit((~emitted).nonzero().squeeze(1))
            break
        beam_rows = (torch.arange(n, device=device) * k).unsqueeze(1) + source_beam  # (N, K)
        if new_count:
            # Emitted now; until they leave, no hypothesis of theirs is alive or in the beam
            emit(newly.nonzero().squeeze(1))
            emitted |= newly
            width = width.masked_fill(newly.unsqueeze(1), 0)
            alive_logp = alive_logp.masked_fill(newly.unsqueeze(1), neg_inf)
        live = None
        if done_count > kept and done_count - kept >= leave_share * n:
            live = _round_up((~emitted).nonzero().squeeze(1), emitted, setup.sentence_multiple)
        if live is not None and live.numel() < n:
            kept = live.numel() - (n - done_count)  # done sentences kept to round the count up
            emitted = emitted[live]
            rows, limit, width, best_possible_lp = (
                rows[live],
                limit[live],
                width[live],
                best_possible_lp[live],
            )
            alive_seq, alive_logp = alive_seq[live], alive_logp[live]
            fin_seq, fin_norm, fin_logp = fin_seq[live], fin_norm[live], fin_logp[live]
            if attention:
                alive_attn, fin_attn = alive_attn[live], fin_attn[live]
            beam_rows = beam_rows[live]
            memory = memory.select(live)
            if allowed is not None:
                live_rows = (live * k).repeat_interleave(k) + rank.repeat(live.numel())
                vocab, allowed = narrow(vocab, allowed.index_select(0, live_rows), multiple)
                columns = remaining_columns(columns, live_rows, vocab, allowed, group_rows)
        state = state.select(beam_rows.view(-1))
        logp, state, weights = model.step(alive_seq[:, :, -1].reshape(-1), state, memory, columns)
    return results


def search(
    model,
    src,
    src_lengths,
    *,
    beam_size: int,
    alpha: float,
    max_len_ratio: float,
    max_len_const: int,
    min_len: int = 1,
    nbest: int = 1,
    attention: bool = False,
    vocab: Candidates | torch.Tensor | None = None,
    max_repeats: int = 0,
) -> list[list[Hypothesis]]:
    if beam_size == 1 and nbest == 1:
        return greedy(
            model,
            src,
            src_lengths,
            max_len_ratio=max_len_ratio,
            max_len_const=max_len_const,
            min_len=min_len,
            attention=attention,
            vocab=vocab,
            max_repeats=max_repeats,
        )
    return beam_search(
        model,
        src,
        src_lengths,
        beam_size=beam_size,
        alpha=alpha,
        max_len_ratio=max_len_ratio,
        max_len_const=max_len_const,
        min_len=min_len,
        nbest=nbest,
        attention=attention,
        vocab=vocab,
        max_repeats=max_repeats,
    )
