"""The output layer over the columns a batch decodes: logits = W_s h~ + b.

Without a shortlist the columns are the whole target vocabulary. With one
(nmt_cli/decoding/shortlist.py)
they are the union of the batch's candidate sets, and every row keeps its own set: its other
columns get the logit -inf, so that the log-softmax normalises each row over its own set and a
sentence's result never depends on its batch-mates. ``Columns`` says which columns a step computes:

- the union ``ids`` (U,) for every row, with ``allowed`` (rows, U) each row's own set; or
- row groups: consecutive rows in groups, each group over the columns its rows allow (``ids``
  (G, W)), first the ``shared`` columns every row allows (the specials and the frequent pieces,
  computed in one product for all rows), then the group's others, then PAD up to the widest
  group. The output layer, the log-softmax and the top-k then work on a few hundred columns a
  row instead of the union's thousands, most of them -inf.

Either way the ids run in id order (grouped: the shared ones, then the others) with the specials
at positions 0..3, so search masks PAD/BOS/EOS by position; the padding, PAD, is allowed to no
row and scores -inf everywhere. Which layout a search uses is the decoding setup's choice
(nmt_cli/model/fast_decoding.py); the values do not depend on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from nmt_cli.data.tokenizer import PAD

# Row groups are formed when they do at most GROUPED_SHARE of the arithmetic of one product over
# the union. As sentences leave, the groups keep their columns (their cut rows of W_s stay valid)
# until they do REGROUP_SLACK times the arithmetic of groups formed afresh.
GROUPED_SHARE = 0.7
REGROUP_SLACK = 1.3


@dataclass
class Columns:
    """The columns the output layer computes for a batch's rows (module doc)."""

    ids: torch.Tensor  # (U,) the union, or (G, W) per group
    allowed: torch.Tensor | None  # (rows, U or W): each row's own set over its columns
    group_rows: tuple[int, ...] | None = None  # grouped: each group's row count
    group_of_row: torch.Tensor | None = None  # (rows,) grouped: each row's group
    widths: tuple[int, ...] | None = None  # grouped: each group's own columns, shared ones included
    positions: torch.Tensor | None = None  # (G, W) grouped: where each column sits in the union
    shared: int = 0  # grouped: the leading columns every row allows
    # What the output layer cut for these columns, per layer: W_s's rows (kept while the ids are,
    # so shared with ``keep``'s columns) and the offsets and logits of these very rows
    cuts: dict = field(default_factory=dict, repr=False)
    plans: dict = field(default_factory=dict, repr=False)

    def token_ids(self, columns: torch.Tensor, row_of: torch.Tensor | None = None) -> torch.Tensor:
        """Target ids of ``columns`` chosen by the rows ``row_of`` (default: row i for
        element i)."""
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
            self.cuts,
        )

    def arithmetic(self) -> int:
        """Columns computed over all rows: the output layer's work, in rows x columns."""
        if self.group_rows is None:
            return self.allowed.numel()
        return sum(r * w for r, w in zip(self.group_rows, self.widths))

    def union_positions(self) -> torch.Tensor:
        """(rows, W) grouped: where each row's columns sit in the union, to lay out values over
        the union as the groups' columns."""
        return self.positions.index_select(0, self.group_of_row)


# ---------------------------------------------------------------------- the logits


def logits(output: nn.Module, h_tilde: torch.Tensor, columns: Columns | None) -> torch.Tensor:
    """W_s h~ + b (B, V); over ``columns``: (B, U or W), -inf outside each row's own set."""
    if columns is None:
        return output(h_tilde)
    if columns.allowed is None:  # the same ids for every row, no sets of their own
        weight, bias = _cut(output, columns)
        return F.linear(h_tilde, weight, bias)
    if columns.group_rows is None:
        weight, offsets = _plan(output, columns, lambda: _union_offsets(output, columns))
        return torch.addmm(offsets, h_tilde, weight.t())
    return _grouped_logits(output, h_tilde, columns)


def output_weights(output: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """W_s and b as tensors."""
    weight, bias = output.weight, output.bias
    if callable(weight):  # an int8 dynamic-quantised layer keeps them behind methods
        weight, bias = weight().dequantize(), bias()
    return weight, bias


def _cut(output: nn.Module, columns: Columns):
    """W_s's and b's rows for the union ``columns.ids``, cut once per union, not once per step."""
    hit = columns.cuts.get(id(output))
    if hit is None:
        weight, bias = output_weights(output)
        hit = columns.cuts[id(output)] = (
            output,
            (weight.index_select(0, columns.ids), bias.index_select(0, columns.ids)),
        )
    return hit[1]


def _plan(output: nn.Module, columns: Columns, build):
    """``build()``, once per layer for these rows."""
    hit = columns.plans.get(id(output))
    if hit is None:
        hit = columns.plans[id(output)] = (output, build())
    return hit[1]


def _union_offsets(output: nn.Module, columns: Columns):
    """The rows of W_s for the union (U, D) and each row's offsets (B, U): b on the row's own
    set, -inf elsewhere, so they ride in the product."""
    weight, bias = _cut(output, columns)
    return weight, torch.where(columns.allowed, bias, bias.new_full((), float("-inf")))


def _grouped_logits(output: nn.Module, h_tilde: torch.Tensor, columns: Columns) -> torch.Tensor:
    """W_s h~ + b on each row's own set, -inf elsewhere, (B, W) over each group's own ids: the
    ``shared`` leading columns in one product for all rows, then one product per group over its
    other columns, each straight into its place in the logits. The rows of W_s are cut once per
    group layout (sentences leaving keep their groups); the offsets and the logits tensor, whose
    columns past each group's own width stay -inf, once per ``columns``. The logits tensor is
    overwritten at each step: log_softmax's output is a new one."""
    shared, allowed, vocab = columns.shared, columns.allowed, columns.ids
    hit = columns.cuts.get(id(output))
    if hit is None:
        hit = columns.cuts[id(output)] = (output, _group_rows_of_w(output, columns))
    common, cut = hit[1]

    def plan():
        out = h_tilde.new_full((allowed.size(0), vocab.size(1)), float("-inf"))
        parts, start = [], 0
        neg_inf = out.new_full((), float("-inf"))
        for rows, (weight, bias) in zip(columns.group_rows, cut):
            if rows and bias.numel():
                end = shared + bias.size(0)
                offsets = torch.where(allowed[start : start + rows, shared:end], bias, neg_inf)
                parts.append((start, start + rows, weight, offsets))
            start += rows
        return out, parts

    out, parts = _plan(output, columns, plan)
    if shared:  # every row allows these: the bias is their offset
        torch.addmm(common[1], h_tilde, common[0].t(), out=out[:, :shared])
    for start, stop, weight, offsets in parts:
        torch.addmm(
            offsets,
            h_tilde[start:stop],
            weight.t(),
            out=out[start:stop, shared : shared + offsets.size(1)],
        )
    return out


def _group_rows_of_w(output: nn.Module, columns: Columns):
    """The rows of W_s and b for the ``shared`` leading ids, and per group for its own others
    (one copy for all, then views)."""
    weight, bias = output_weights(output)
    vocab, widths, shared = columns.ids, columns.widths, columns.shared
    flat = torch.cat([vocab[0, :shared], *[ids[shared:w] for ids, w in zip(vocab, widths)]])
    cut_weight, cut_bias = weight.index_select(0, flat), bias.index_select(0, flat)
    bounds = [shared, *(shared + torch.tensor(widths).sub(shared).cumsum(0)).tolist()]
    return (
        (cut_weight[:shared], cut_bias[:shared]),
        [(cut_weight[a:b], cut_bias[a:b]) for a, b in zip(bounds, bounds[1:])],
    )


# ---------------------------------------------------------------------- forming the columns


def pad_union(vocab: torch.Tensor | None, allowed: torch.Tensor | None, multiple: int):
    """The union rounded up to a multiple of ``multiple`` columns with PAD columns that no row
    allows: they score -inf everywhere, so no search ever picks one."""
    extra = 0 if vocab is None or allowed is None else -vocab.numel() % multiple
    if not extra:
        return vocab, allowed
    return (
        torch.cat([vocab, vocab.new_full((extra,), PAD)]),
        torch.cat([allowed, allowed.new_zeros(allowed.size(0), extra)], dim=1),
    )


def narrow(vocab: torch.Tensor | None, allowed: torch.Tensor | None, multiple: int = 1):
    """The union of the candidate sets still in the batch, once sentences have left it, so that
    the output layer runs over fewer columns. Cut only when a tenth or more would go, as each cut
    copies the rows of W_s. Every remaining sentence keeps all of its own set, and the specials
    (allowed everywhere) stay at positions 0..3."""
    if vocab is None or allowed is None:
        return vocab, allowed
    used = allowed.any(dim=0)
    kept = int(used.sum())
    if kept > 0.9 * used.numel():
        return vocab, allowed
    return pad_union(vocab[used], allowed[:, used], multiple)


def _group_widths(allowed: torch.Tensor, group_rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Which union columns each run of ``group_rows`` rows uses (G, U), and how many (G,)."""
    rows, union = allowed.shape
    groups = -(-rows // group_rows)
    pad = groups * group_rows - rows
    padded = allowed if not pad else torch.cat([allowed, allowed.new_zeros(pad, union)])
    # the maximum over bytes: torch's any(dim=1) over bools is many times slower
    used = padded.view(torch.uint8).view(groups, group_rows, union).amax(dim=1)
    return used, used.sum(dim=1)


def group_columns(vocab: torch.Tensor, allowed: torch.Tensor, group_rows: int) -> Columns:
    """Rows in groups of ``group_rows``, each group over the columns its rows allow (module doc),
    or the union for all rows when that saves too little arithmetic (or the batch is one group).
    The values do not change: a row's -inf columns are left out, not others."""
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


def columns_for(
    vocab: torch.Tensor | None, allowed: torch.Tensor | None, group_rows: int
) -> Columns | None:
    """The output layer's columns for these rows: in groups of ``group_rows`` rows where that is
    not 0 (and saves arithmetic), else the union."""
    if vocab is None:
        return None
    if allowed is None or not group_rows:
        return Columns(vocab, allowed)
    return group_columns(vocab, allowed, group_rows)


def remaining_columns(
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
        fresh = columns_for(vocab, allowed, group_rows)
        same_union = fresh is not None and columns is not None and fresh.ids is columns.ids
        if same_union and fresh.group_rows is None and columns.group_rows is None:
            fresh.cuts = columns.cuts  # its rows of W_s stay valid
        return fresh
    kept = columns.keep(rows)
    fresh = allowed.numel()
    if allowed.size(0) > group_rows:
        fresh = min(fresh, int(_group_widths(allowed, group_rows)[1].sum()) * group_rows)
    if kept.arithmetic() <= REGROUP_SLACK * fresh:
        return kept
    return columns_for(vocab, allowed, group_rows)
