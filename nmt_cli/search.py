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
is normalised over its own set, so the result for a sentence never depends on its batch-mates.
On the CPU in fp32 the columns every sentence allows (the specials and the frequent pieces) go
through the output layer in one product for all rows, and the others in small groups of whole
sentences, each over its own group's columns only (``_group_columns``): the output layer, the
log-softmax and the top-k then work on a few hundred columns a row instead of the batch's
thousands, most of them -inf.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from nmt_cli.model.seq2seq import COLUMN_MULTIPLE, RowGroups
from nmt_cli.shortlist import Candidates
from nmt_cli.tokenizer import BOS, EOS, PAD

# Beam search: done sentences leave the batch once they are at least this share of it. Each
# leaving rebuilds what is cut per batch (the output layer's plan, the memory's rows), which cost
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


def _restrict(logp: torch.Tensor, at_limit: torch.Tensor | None, too_short: bool) -> torch.Tensor:
    """Never emit PAD or BOS, nor EOS while too short; at the length cap only EOS may follow, with
    its real log-probability (the cap wins over ``min_len``). ``at_limit`` None: no row is at its
    cap yet (the search knows the earliest cap). Works in place."""
    eos = None if at_limit is None else logp[:, EOS].clone()
    logp[:, PAD] = float("-inf")
    logp[:, BOS] = float("-inf")
    if too_short:
        logp[:, EOS] = float("-inf")
    # Rows at their cap are rare: on the CPU the pass over the logits runs only when there is one
    # (elsewhere asking would cost a host synchronisation per step, more than the pass)
    if at_limit is not None and (logp.device.type != "cpu" or bool(at_limit.any())):
        logp.masked_fill_(at_limit.unsqueeze(1), float("-inf"))
        logp[:, EOS] = torch.where(at_limit, eos, logp[:, EOS])
    return logp


def _split(
    vocab: Candidates | torch.Tensor | None,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(ids, allowed): the target ids decoded over (None = all) and each sentence's own set."""
    if isinstance(vocab, Candidates):
        return vocab.ids, vocab.allowed
    return vocab, None


# bf16 on the CPU (seq2seq.COLUMN_MULTIPLE: oneDNN plans each new matrix shape): as sentences
# finish, the rows a step computes are kept at a multiple of ROW_MULTIPLE (greedy search) or of
# SENTENCE_MULTIPLE sentences (beam search), finished ones filling up the count
ROW_MULTIPLE, SENTENCE_MULTIPLE = 16, 4


def bf16_on_cpu(model) -> bool:
    """Does ``model`` decode in bf16 on the CPU (weights converted at load)?"""
    parameters = getattr(model, "parameters", None)  # the search contract is encode and step only
    first = next(parameters(), None) if parameters is not None else None
    return first is not None and first.dtype == torch.bfloat16 and first.device.type == "cpu"


def _round_up(live: torch.Tensor, finished: torch.Tensor, multiple: int) -> torch.Tensor:
    """The ``live`` rows and as many ``finished`` ones as make their count a multiple of
    ``multiple`` (where there are that many), in order. A finished row stays finished: it is
    computed and ignored, as between two checks."""
    extra = -live.numel() % multiple
    if not extra:
        return live
    return torch.cat([live, finished.nonzero().squeeze(1)[:extra]]).sort().values


def _pad_union(vocab: torch.Tensor | None, allowed: torch.Tensor | None, multiple: int):
    """The union rounded up to a multiple of ``multiple`` columns with PAD columns that no row
    allows: they score -inf everywhere, so no search ever picks one."""
    extra = 0 if vocab is None or allowed is None else -vocab.numel() % multiple
    if not extra:
        return vocab, allowed
    return (
        torch.cat([vocab, vocab.new_full((extra,), PAD)]),
        torch.cat([allowed, allowed.new_zeros(allowed.size(0), extra)], dim=1),
    )


def _narrow(vocab: torch.Tensor | None, allowed: torch.Tensor | None, multiple: int = 1):
    """The union of the candidate sets still in the batch, once sentences have left it: the output
    layer runs over fewer columns (a batch of 64 starts with about 2,000 on test_2016). Cut only
    when a tenth or more would go, as each cut copies the rows of W_s. Every remaining sentence
    keeps all of its own set, and the specials (allowed everywhere) stay at positions 0..3."""
    if vocab is None or allowed is None:
        return vocab, allowed
    used = allowed.any(dim=0)
    kept = int(used.sum())
    if kept > 0.9 * used.numel():
        return vocab, allowed
    return _pad_union(vocab[used], allowed[:, used], multiple)


# The output layer over a shortlist on the CPU in fp32: the columns all rows allow in one product,
# the others in groups of GROUP_ROWS rows (greedy search) or about BEAM_GROUP_ROWS (beam search:
# whole sentences, four at beam 5), when that does at most GROUPED_SHARE of the arithmetic of one
# product over the union. As sentences leave, the groups keep their columns (their cut rows of
# W_s stay valid) until they do REGROUP_SLACK times the arithmetic of groups formed afresh. Sizes
# measured on test_2016 (docs/lab/beam-step.md): greedy 8 and 16 rows alike, 4 and 40 slower; beam
# 5 10 to 40 rows alike, 5 slower.
GROUP_ROWS = 8
BEAM_GROUP_ROWS = 20
GROUPED_SHARE = 0.7
REGROUP_SLACK = 1.3


@dataclass
class Columns:
    """The columns the output layer computes: ``ids`` (U,) for every row alike (the union), or
    (G, W) per group of consecutive rows, ``group_rows`` of them in each: first the ``shared``
    columns, the same in every group and allowed to every row, then the group's others, then PAD
    up to the widest group's width; and ``allowed`` (rows, U or W), each row's own candidate set
    over its columns. Either way ids run in id order (grouped: the shared ones, then the others)
    with the specials at positions 0..3, so search masks PAD/BOS/EOS by position (the padding,
    PAD, is allowed to no row)."""

    ids: torch.Tensor
    allowed: torch.Tensor | None
    group_rows: tuple[int, ...] | None = None
    group_of_row: torch.Tensor | None = None  # (rows,) grouped: each row's group
    widths: tuple[int, ...] | None = None  # grouped: each group's own columns, shared ones included
    positions: torch.Tensor | None = None  # (G, W) grouped: where each column sits in the union
    shared: int = 0  # grouped: the leading columns every row allows

    def token_ids(self, columns: torch.Tensor, row_of: torch.Tensor | None = None) -> torch.Tensor:
        """Target ids of ``columns`` chosen by the rows ``row_of`` (default: row i for element i)."""
        if self.group_rows is None:
            return self.ids[columns]
        group = self.group_of_row if row_of is None else self.group_of_row[row_of]
        start = group * self.ids.size(1)
        return self.ids.view(-1)[start.view(-1, *[1] * (columns.dim() - 1)) + columns]

    def keep(self, rows: torch.Tensor) -> Columns:
        """Only ``rows`` (sorted), in the same groups over the same columns."""
        group_of_row = self.group_of_row[rows]
        counts = torch.bincount(group_of_row, minlength=self.ids.size(0)).tolist()
        return Columns(
            self.ids,
            self.allowed.index_select(0, rows),
            tuple(counts),
            group_of_row,
            self.widths,
            self.positions,
            self.shared,
        )

    def arithmetic(self) -> int:
        """Columns computed over all rows: the output layer's work, in rows x columns."""
        if self.group_rows is None:
            return self.allowed.numel()
        return sum(r * w for r, w in zip(self.group_rows, self.widths))


def _group_widths(allowed: torch.Tensor, group_rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Which union columns each run of ``group_rows`` rows uses (G, U), and how many (G,)."""
    rows, union = allowed.shape
    groups = -(-rows // group_rows)
    pad = groups * group_rows - rows
    padded = allowed if not pad else torch.cat([allowed, allowed.new_zeros(pad, union)])
    # amax over bytes: torch's any(dim=1) over bools took 16x as long
    used = padded.view(torch.uint8).view(groups, group_rows, union).amax(dim=1)
    return used, used.sum(dim=1)


def _group_columns(vocab: torch.Tensor, allowed: torch.Tensor, group_rows: int) -> Columns:
    """Rows in groups of ``group_rows``, each group over the columns its rows allow: first those
    every row of the batch allows (the specials, so at 0..3, and the frequent pieces), which the
    output layer computes for all rows in one product, then the group's others, each part in
    union order, padded with PAD columns that no row allows to the widest group; or the union for
    all rows when that saves too little arithmetic (or the batch is one group). The values do not
    change: a row's -inf columns are left out, not others."""
    rows, union = allowed.shape
    if rows <= group_rows:
        return Columns(vocab, allowed)
    everywhere = allowed.all(dim=0)
    shared = int(everywhere.sum())
    used, others = _group_widths(allowed & ~everywhere, group_rows)
    widths = others + shared
    if int(widths.sum()) * group_rows > GROUPED_SHARE * rows * union:
        return Columns(vocab, allowed)
    groups, width = used.size(0), int(widths.max())
    # a stable sort puts the shared columns first, then the group's others, each in union order,
    # then the unused ones
    order = 2 - used.to(torch.int8) - 2 * everywhere.to(torch.int8)[None, :]
    positions = torch.argsort(order, dim=1, stable=True)[:, :width]  # (G, W)
    own = torch.arange(width)[None, :] < widths[:, None]
    ids = vocab[positions].masked_fill_(~own, PAD)
    group_of_row = torch.arange(rows, device=allowed.device) // group_rows
    # a group's padding sits on columns none of its rows uses: allowed to no row already
    grouped = allowed.gather(1, positions.index_select(0, group_of_row))
    counts = [group_rows] * (groups - 1) + [rows - (groups - 1) * group_rows]
    return Columns(
        ids, grouped, tuple(counts), group_of_row, tuple(widths.tolist()), positions, shared
    )


def _union_positions(columns: Columns) -> torch.Tensor:
    """(rows, W): where each row's columns sit in the union, to lay out values over the union
    as the groups' columns."""
    return columns.positions.index_select(0, columns.group_of_row)


def _columns(
    vocab: torch.Tensor | None, allowed: torch.Tensor | None, group_rows: int
) -> Columns | None:
    """The output layer's columns for these rows: grouped when ``group_rows`` (CPU, fp32)."""
    if vocab is None:
        return None
    if allowed is None or not group_rows:
        return Columns(vocab, allowed)
    return _group_columns(vocab, allowed, group_rows)


def _remaining_columns(
    columns: Columns | None,
    rows: torch.Tensor,
    vocab: torch.Tensor | None,
    allowed: torch.Tensor | None,
    group_rows: int,
) -> Columns | None:
    """The columns once only ``rows`` remain, ``vocab`` and ``allowed`` being their (narrowed)
    union: the same groups, unless groups formed afresh would do less than 1 / REGROUP_SLACK of
    their arithmetic (each fresh group cuts its rows of W_s again)."""
    if columns is None or columns.group_rows is None or allowed is None:
        return _columns(vocab, allowed, group_rows)
    kept = columns.keep(rows)
    fresh = allowed.numel()
    if allowed.size(0) > group_rows:
        fresh = min(fresh, int(_group_widths(allowed, group_rows)[1].sum()) * group_rows)
    return (
        kept if kept.arithmetic() <= REGROUP_SLACK * fresh else _columns(vocab, allowed, group_rows)
    )


def _step(model, prev, state, memory, columns: Columns | None):
    if columns is None:
        return model.step(prev, state, memory)
    if columns.group_rows is not None:
        return model.step(
            prev,
            state,
            memory,
            columns.ids,
            columns.allowed,
            RowGroups(columns.group_rows, columns.widths, columns.shared),
        )
    return model.step(prev, state, memory, columns.ids, columns.allowed)


def _trim(row: list[int]) -> list[int]:
    out = []
    for t in row:
        if t == EOS or t == PAD:
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
) -> list[list[Hypothesis]]:
    """Batched greedy decoding; returns one 1-best hypothesis list per sentence.
    ``vocab``: sorted target ids to choose from, or per-sentence ``Candidates``; None = all.

    Every ``check_every`` steps (one host synchronisation, not one per step) the sentences that
    have ended leave the batch: in a length-sorted batch of 64 a good share of the rows would
    otherwise go on computing after their EOS (41% of all rows on test_2016)."""
    bf16 = bf16_on_cpu(model)
    multiple, row_multiple = (COLUMN_MULTIPLE, ROW_MULTIPLE) if bf16 else (1, 1)
    vocab, allowed = _pad_union(*_split(vocab), multiple)
    b = src.size(0)
    device = src.device
    group_rows = GROUP_ROWS if device.type == "cpu" and not bf16 else 0
    columns = _columns(vocab, allowed, group_rows)
    state, memory = model.encode(src, src_lengths)
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
        logp, state, weights = _step(model, prev, state, memory, columns)
        logp = _restrict(logp, limit - 1 <= t if t >= first_cap else None, t < min_len)
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
            live = _round_up(live, done, row_multiple)
            if live.numel() == done.numel():
                continue
            rows, limit, prev, done = rows[live], limit[live], prev[live], done[live]
            state, memory = state.select(live), memory.select(live)
            if allowed is not None:
                vocab, allowed = _narrow(vocab, allowed.index_select(0, live), multiple)
                columns = _remaining_columns(columns, live, vocab, allowed, group_rows)
    token_rows = tokens.tolist()
    out = []
    for i in range(b):
        seq = _trim(token_rows[i])
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
) -> list[list[Hypothesis]]:
    """Batched beam search; returns the ``nbest`` best hypotheses per sentence, best first.
    ``vocab``: sorted target ids to choose from, or per-sentence ``Candidates``; None = all.

    The beam holds K hypotheses, finished ones included; a sentence is done once all K have
    finished or its n-th best finished one beats what any alive one can still reach (module
    doc). Done sentences leave the batch, so the tensors shrink as the batch finishes."""
    bf16 = bf16_on_cpu(model)
    multiple, sentence_multiple = (COLUMN_MULTIPLE, SENTENCE_MULTIPLE) if bf16 else (1, 1)
    vocab, allowed = _pad_union(*_split(vocab), multiple)
    k = beam_size
    b = src.size(0)
    device = src.device
    # groups of whole sentences' hypotheses, so that a sentence's K rows share their columns
    group_rows = k * max(1, BEAM_GROUP_ROWS // k) if device.type == "cpu" and not bf16 else 0
    state, memory = model.encode(src, src_lengths)
    flat = torch.arange(b, device=device).repeat_interleave(k)
    # The first step from BOS is the same for a sentence's K hypotheses: it runs once per
    # sentence (over the union), and its output is copied to the K rows (4% of the rows beam 5
    # computed on test_2016). Each later step runs at the end of the iteration before it.
    logp, state, weights = _step(
        model,
        torch.full((b,), BOS, dtype=torch.long, device=device),
        state,
        memory,
        _columns(vocab, allowed, 0),
    )
    state, memory, logp = state.select(flat), memory.shared_by(k), logp.index_select(0, flat)
    if weights is not None:
        weights = weights.index_select(0, flat)
    if allowed is not None:
        allowed = allowed.index_select(0, flat)
    columns = _columns(vocab, allowed, group_rows)
    if columns is not None and columns.group_rows is not None:
        # the first step's log-probabilities, over the union, laid out as the groups' columns
        logp = logp.gather(1, _union_positions(columns))
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
                seq = _trim(seqs[r][j])
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
        logp = _restrict(logp, at_limit, t < min_len).view(n, k, v)
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
            live = _round_up((~emitted).nonzero().squeeze(1), emitted, sentence_multiple)
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
                vocab, allowed = _narrow(vocab, allowed.index_select(0, live_rows), multiple)
                columns = _remaining_columns(columns, live_rows, vocab, allowed, group_rows)
        state = state.select(beam_rows.view(-1))
        logp, state, weights = _step(model, alive_seq[:, :, -1].reshape(-1), state, memory, columns)
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
    )
