"""Where and in what precision the model runs: device choice, bf16 detection, autocast.

Shared by training, translation and the benchmarks, so that `nmt translate` never imports the
training loop.
"""

from __future__ import annotations

import os
import re
import resource
import sys
from contextlib import nullcontext

import torch

from nmt_cli.runtime.cores import busy_cores, usable_cores
from nmt_cli.runtime.errors import UserError

# What --device accepts; cuda:N names the N-th GPU
DEVICE_CHOICES = ("auto", "cpu", "cuda", "cuda:N", "mps")


def _mps_available() -> bool:
    return bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())


def available_devices() -> list[str]:
    """This machine's devices as --device names them: cpu, then cuda and each cuda:N, then mps."""
    names = ["cpu"]
    if torch.cuda.is_available():
        names += ["cuda"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if _mps_available():
        names.append("mps")
    return names


def check_device(name: str) -> None:
    """Refuse in one UserError line a device that is not one of DEVICE_CHOICES, or that this
    machine lacks; the line names the choices and the devices this machine has."""
    if name == "auto":
        return
    has = available_devices()
    if name in has:
        return
    known = name in ("cpu", "cuda", "mps") or re.fullmatch(r"cuda:[0-9]+", name) is not None
    problem = "is not on this machine" if known else "is not a device"
    raise UserError(
        f"--device: '{name}' {problem}; choose from {', '.join(DEVICE_CHOICES)} "
        f"(this machine has {', '.join(has)})"
    )


def pick_device(name: str) -> torch.device:
    """The torch device of a --device choice (checked by :func:`check_device`); auto is the
    first GPU there is (CUDA, then MPS), else the CPU."""
    check_device(name)
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    return torch.device(name)


# The x86 instruction sets that multiply bf16 in hardware, as /proc/cpuinfo's flags name them
BF16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


def cpu_multiplies_bf16(cpuinfo: str | None = None) -> bool:
    """Whether every processor listed in ``cpuinfo`` (the text of /proc/cpuinfo; None: this
    machine's) has one of BF16_CPU_FLAGS. False where there is no /proc/cpuinfo (not Linux) or
    it lists no flags (not x86)."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
                cpuinfo = fh.read()
        except OSError:
            return False
    flags = [
        set(line.partition(":")[2].split())
        for line in cpuinfo.splitlines()
        if line.split(":")[0].strip() == "flags"
    ]
    return bool(flags) and all(BF16_CPU_FLAGS & processor for processor in flags)


def native_bf16(device: torch.device) -> bool:
    """Whether bf16 matrix products run in hardware here: a CPU with AVX512-BF16 or AMX-BF16 and a
    torch built with oneDNN, or a GPU that supports bf16 (Ampere or newer). Without such
    hardware a CPU emulates bf16, many times slower than fp32."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        return torch.backends.mkldnn.is_available() and cpu_multiplies_bf16()
    return False


def resolve_precision(requested: str, device: torch.device) -> str:
    """``auto``: bf16 autocast on a CPU that has it in hardware, fp32 elsewhere. On a GPU these
    small RNN models gain nothing from bf16 matrix units and autocast's casts add kernels, so
    training is faster in fp32 there (docs/benchmarks.md)."""
    if requested == "auto":
        return "bf16" if device.type == "cpu" and native_bf16(device) else "fp32"
    if requested == "fp16" and device.type != "cuda":
        raise UserError("train.precision: fp16 needs a CUDA device; use auto, bf16 or fp32")
    return requested


def resolve_decode_precision(requested: str, device: torch.device, quantize: str = "none") -> str:
    """The precision the decoder runs in: ``int8`` where ``requested`` or ``quantize`` asks for
    int8 (dynamic int8 layers, from the fp32 model; the CPU only); ``auto``: bf16 on a CPU that
    multiplies bf16 in hardware, where the decoder's matrix products run faster than in fp32
    (docs/results.md#bf16-decoding), fp32 elsewhere (GPUs too, as in training)."""
    if requested not in ("auto", "fp32", "bf16", "int8"):
        raise UserError(f"--precision: '{requested}' is not one of auto, fp32, bf16, int8")
    if quantize != "none" or requested == "int8":
        if requested == "bf16":
            raise UserError("--precision bf16 and --quantize int8 exclude each other; give one")
        if device.type != "cpu":
            raise UserError(
                f"int8 decoding (--quantize int8, decode.precision int8) runs on the CPU, not "
                f"{device.type}: give --device cpu, or --precision auto for the {device.type}"
            )
        return "int8"
    if requested == "auto":
        return "bf16" if device.type == "cpu" and native_bf16(device) else "fp32"
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


# ---------------------------------------------------------------------------------------- threads

THREADS_ENV = "NMT_THREADS"


def default_threads() -> int:
    """The cores not already busy, at least one. torch's default, one thread per core, collapses
    when another process holds a core: its threads wait for each other at every operation
    (docs/results.md#threads-on-a-busy-machine)."""
    cores = usable_cores()
    if cores == 1:
        return 1
    return max(1, min(cores, int(cores - busy_cores() + 0.5)))


def resolve_threads(requested: int | None = None) -> tuple[int, str]:
    """-> (threads, where the number came from): --threads, $NMT_THREADS, $OMP_NUM_THREADS, or
    the cores not already busy."""
    if requested is not None:
        if requested < 1:
            raise UserError(f"--threads: must be 1 or more, got {requested}")
        return requested, "--threads"
    for name in (THREADS_ENV, "OMP_NUM_THREADS"):
        value = os.environ.get(name, "").strip()
        if value:
            try:
                n = int(value)
            except ValueError:
                n = 0
            if n < 1:
                raise UserError(f"${name}: must be a whole number of 1 or more, got '{value}'")
            return n, f"${name}"
    return default_threads(), "cores not busy"


def configure_threads(requested: int | None = None) -> int:
    """Set torch's intra-op (and, where still possible, inter-op) threads; returns the count."""
    n, _ = resolve_threads(requested)
    torch.set_num_threads(n)
    try:  # allowed once, before any inter-op work; a second call in one process keeps the first
        torch.set_num_interop_threads(n)
    except RuntimeError:
        pass
    return n
