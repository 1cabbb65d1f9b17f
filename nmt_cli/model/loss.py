"""The output layer and its cross-entropy in one autograd function, for CPU training.

    p = softmax(W_s h~ + b)
    loss = Σ_i (1 - ε) · (-log p_i[y_i]) + ε · mean_v(-log p_i[v])    (ε: label smoothing)
    ∂loss/∂logits_i = p_i - (1 - ε) · onehot(y_i) - ε / V

The plain route (``F.linear`` then ``F.cross_entropy``) keeps four or five (tokens × V) tensors
per batch alive at once — logits, log-probabilities, a zero-filled gradient for the gathered
target and the log-softmax gradient — and runs the output layer over padding positions too. At
the recipes' batch sizes each of those tensors is over glibc's mmap threshold, so it comes from a
fresh mapping that is page-faulted in again on every batch. Here padding rows are dropped first,
rows go through in chunks small enough for the allocator to reuse their memory, and the
log-probabilities kept for backward become the gradient in place.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from nmt_cli.data.tokenizer import PAD

CHUNK_BYTES = 16 << 20  # one chunk's (rows × V) float32 block: under glibc's 32 MiB mmap cap


class _OutputCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, weight, bias, target, smoothing: float):
        rows = max(1, CHUNK_BYTES // (4 * weight.size(0)))
        total = h.new_zeros(())
        kept = []
        for start in range(0, h.size(0), rows):
            log_probs = torch.log_softmax(
                torch.addmm(bias, h[start : start + rows], weight.t()), dim=1
            )
            nll = -log_probs.gather(1, target[start : start + rows, None]).sum()
            if smoothing:
                total += (1.0 - smoothing) * nll - smoothing * log_probs.mean(dim=1).sum()
            else:
                total += nll
            kept.append(log_probs)
        ctx.kept, ctx.rows, ctx.smoothing = kept, rows, smoothing
        ctx.save_for_backward(h, weight, target)
        return total

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_total):
        if ctx.kept is None:
            raise RuntimeError(
                "output_loss: its backward turns the kept log-probabilities into the "
                "gradient in place, so it runs once per forward; recompute the loss"
            )
        h, weight, target = ctx.saved_tensors
        grad_h = torch.empty_like(h)
        grad_weight = torch.zeros_like(weight)
        grad_bias = torch.zeros(weight.size(0), dtype=weight.dtype, device=weight.device)
        eps, rows = ctx.smoothing, ctx.rows
        for i, log_probs in enumerate(ctx.kept):
            start = i * rows
            grad = log_probs.exp_()  # p, in the log-probabilities' memory
            if eps:
                grad.sub_(eps / grad.size(1))
            index = target[start : start + rows, None]
            grad.scatter_add_(
                1, index, torch.full(index.shape, eps - 1.0, dtype=grad.dtype, device=grad.device)
            )
            torch.mm(grad, weight, out=grad_h[start : start + grad.size(0)])
            grad_weight.addmm_(grad.t(), h[start : start + grad.size(0)])
            grad_bias += grad.sum(dim=0)
        ctx.kept = None
        return grad_h * grad_total, grad_weight * grad_total, grad_bias * grad_total, None, None


def output_loss(
    h: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    target: torch.Tensor,
    smoothing: float = 0.0,
) -> torch.Tensor:
    """Summed (label-smoothed) cross-entropy of softmax(W_s h + b) against ``target``, PAD ignored.

    h (..., D), target (...) -> a scalar, equal to ``F.cross_entropy(F.linear(h, W_s, b), target,
    ignore_index=PAD, label_smoothing=smoothing, reduction="sum")``. Under autocast or off the CPU
    it is computed that way; the fused function is for fp32/fp64 on the CPU.
    """
    h = h.reshape(-1, h.size(-1))
    target = target.reshape(-1)
    fused = (
        h.device.type == "cpu"
        and bias is not None
        and h.dtype == weight.dtype
        and h.dtype in (torch.float32, torch.float64)
        and not _cpu_autocast()
    )
    if not fused:
        return F.cross_entropy(
            F.linear(h, weight, bias).float(),
            target,
            ignore_index=PAD,
            label_smoothing=smoothing,
            reduction="sum",
        )
    real = (target != PAD).nonzero().squeeze(1)
    return _OutputCrossEntropy.apply(
        h.index_select(0, real), weight, bias, target.index_select(0, real), float(smoothing)
    )


def _cpu_autocast() -> bool:
    try:
        return torch.is_autocast_enabled("cpu")
    except TypeError:  # torch < 2.4 has no device argument
        return torch.is_autocast_cpu_enabled()
