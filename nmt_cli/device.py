"""Where and in what precision the model runs: device choice, bf16 detection, autocast.

Shared by training, translation and the benchmarks, so that `nmt translate` never imports the
training loop.
"""

from __future__ import annotations

import resource
import sys
from contextlib import nullcontext

import torch

from nmt_cli.errors import UserError


def pick_device(name: str) -> torch.device:
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: no CUDA device is available")
    if name == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise UserError("--device mps: no MPS device is available")
    return torch.device(name)


def native_bf16(device: torch.device) -> bool:
    """Whether bf16 matrix products run in hardware here (AVX512-BF16/AMX CPUs, Ampere+ GPUs).
    Without it a CPU emulates bf16 about a hundred times slower than fp32."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        try:
            return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
        except (AttributeError, RuntimeError):  # older or newer torch without this probe
            return False
    return False


def resolve_precision(requested: str, device: torch.device) -> str:
    """``auto``: bf16 autocast on a CPU that has it in hardware, fp32 elsewhere. On a GPU these
    small RNN models gain nothing from bf16 matrix units and autocast's casts add kernels: on an
    H100 the en-fr recipe trained at 85k target tokens/s in bf16 and 102k in fp32
    (docs/benchmarks.md)."""
    if requested == "auto":
        return "bf16" if device.type == "cpu" and native_bf16(device) else "fp32"
    if requested == "fp16" and device.type != "cuda":
        raise UserError("train.precision: fp16 needs a CUDA device; use auto, bf16 or fp32")
    return requested


def autocast_context(device: torch.device, precision: str):
    """The forward pass's context for a resolved precision: fp32 runs as written."""
    if precision == "fp32":
        return nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device.type, dtype=dtype)


def peak_rss_mb() -> float:
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / 1024.0 if sys.platform != "darwin" else kb / (1024.0 * 1024.0)
