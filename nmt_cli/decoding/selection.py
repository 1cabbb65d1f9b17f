"""The best continuations of a step, found exactly through the maxima of blocks of columns.

Greedy search takes each row's best token, y_t = argmax_y log p(y | y_<t, x); beam search the K
best continuations over a sentence's K hypotheses, score(y_1..t) = score(y_1..t-1) +
log p(y_t | y_<t, x). Both read every log-probability of the step once, and torch's CPU kernels
that return positions with values (``max`` over a dimension, ``topk``) walk a row an element at a
time, where ``amax`` is vectorised. So the rows are cut into blocks of ``c`` columns:

- the K best of a row lie in the K blocks of highest maximum. Proof: a block holding one of the K
  best, x, has a maximum m >= x; a block ranked above it has a larger maximum, an element larger
  than x; at most K - 1 elements are larger than x, so at most K - 1 blocks rank above it. Rounding
  keeps this: fl(a + s) is non-decreasing in a, so the maximum of a block plus a hypothesis's
  score is the maximum of the block's sums;
- so one vectorised pass takes the blocks' maxima, the K best blocks are chosen among those, and
  the K best are taken from their K * c values only.

Of equal values the lower position goes first, blocks included (a block above the one holding
the K-th best then has a larger element or an equal one at a lower position, so the argument
holds): a rule of the values' order alone, where ``topk``'s own order of equal values is left
unspecified and can change with the row's width, which a batch's shortlist union sets.

Greedy's best per row keeps ``max``'s rule exactly: the first position of the maximum (the first
block holding it, then the first position in that block).
"""

from __future__ import annotations

import torch

# block widths tried, widest first: a width must divide the row so blocks never straddle two
# hypotheses (a block's maximum then takes one hypothesis score)
BLOCK_WIDTHS = (64, 32, 16)


def block_width(columns: int, chosen: int) -> int | None:
    """The block width for rows of ``columns`` values when ``chosen`` blocks are kept, or None
    where blocks would save nothing (a short row, or no width dividing it)."""
    for width in BLOCK_WIDTHS:
        if columns % width == 0 and chosen * width * 4 <= columns:
            return width
    return None


def best_per_row(values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's maximum of ``values`` (B, V) and its first position, as ``values.max(-1)``."""
    b, v = values.shape
    width = block_width(v, 1)
    if width is None or not values.is_contiguous():
        return values.max(dim=-1)
    blocks = values.view(b, v // width, width)
    _, best_block = blocks.amax(dim=-1).max(dim=-1)
    within = blocks.gather(1, best_block.view(b, 1, 1).expand(b, 1, width)).view(b, width)
    best, position = within.max(dim=-1)
    return best, best_block * width + position


def best_continuations(
    logp: torch.Tensor, scores: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` best of scores[n, j] + logp[n, j, y] over each sentence's (j, y): their totals
    (N, k), best first, and their positions j * V + y (N, k); of equal totals the lower position
    first. ``logp`` (N, K, V), ``scores`` (N, K) with -inf for an empty slot."""
    n, beams, v = logp.shape
    width = block_width(v, k)
    if width is None or not logp.is_contiguous():
        totals = (scores.unsqueeze(-1) + logp).view(n, beams * v)
        return _in_order(totals, _best_k(totals, k))
    per_beam = v // width
    maxima = logp.view(n, beams, per_beam, width).amax(dim=-1) + scores.unsqueeze(-1)
    blocks = _best_k(maxima.view(n, beams * per_beam), k)  # (N, k), in increasing order
    offsets = torch.arange(width, device=logp.device)
    positions = (blocks.unsqueeze(-1) * width + offsets).view(n, k * width)
    block_scores = scores.gather(1, torch.div(blocks, per_beam, rounding_mode="floor"))
    totals = logp.view(n, beams * v).gather(1, positions) + block_scores.repeat_interleave(
        width, dim=1
    )
    best, chosen = _in_order(totals, _best_k(totals, k))
    return best, positions.gather(1, chosen)


def _best_k(values: torch.Tensor, k: int) -> torch.Tensor:
    """The positions (N, k) of each row's ``k`` largest values, of equal ones the lower
    positions, in increasing order: a rule of the values' order alone, so that a sentence's
    choice never depends on how wide its batch's rows are."""
    kth = values.topk(k, dim=-1).values[:, -1:]  # each row's k-th largest value
    above, level = values > kth, values == kth
    wanted = k - above.sum(dim=-1, keepdim=True)  # how many of the values level with it
    chosen = above | (level & (level.cumsum(dim=-1) <= wanted))
    # exactly k chosen per row, taken in increasing position by a key that falls along the row
    # (not ``nonzero``, whose output size the host must wait for on an accelerator)
    width = values.size(-1)
    key = torch.where(chosen, width - torch.arange(width, device=values.device), 0)
    return key.topk(k, dim=-1).indices


def _in_order(values: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``values`` at ``positions`` (in increasing order), best first, equal ones keeping their
    order; and those positions."""
    chosen = values.gather(1, positions)
    best, order = chosen.sort(dim=-1, descending=True, stable=True)
    return best, positions.gather(1, order)
