"""Bounds on the native memory that torch's CPU kernels keep between calls.

Two things grow with the number of distinct tensor shapes a process meets, and training batches
and decoding batches differ in shape almost every time:

- **oneDNN's primitive cache.** On a CPU with bf16 hardware torch runs bf16 matrix products
  through oneDNN, which compiles a primitive for each operand shape and keeps the most recently
  used ``ONEDNN_PRIMITIVE_CACHE_CAPACITY`` of them (1,024 by default; the variable is oneDNN's
  documented knob, read when the process creates its first primitive). A training step or a
  beam search reuses a few dozen shapes within itself, while nearly every new batch brings new
  ones, so a small cache keeps what recurs and drops what a batch used once.
- **ideep's computation cache.** ideep, the layer between torch and oneDNN, keeps its own cache
  of prepared matrix products per shape, up to ``LRU_CACHE_CAPACITY`` (1,024 by default; read,
  like oneDNN's, at first use). It is bounded the same way.
- **Freed heap that glibc keeps.** Tensors of a few megabytes come and go each step, between
  small allocations that live on (such as the primitives), so the freed memory lies in pieces
  that glibc does not hand back to the system. ``release_free_heap`` asks it to, through
  ``malloc_trim`` (glibc's documented call, man 3 malloc_trim); elsewhere it does nothing.

Measurements: docs/results.md (memory on bf16 CPUs).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import itertools
import os
import sys
from functools import cache

PRIMITIVE_CACHE_ENV = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"
PRIMITIVE_CACHE_CAPACITY = 64
COMPUTATION_CACHE_ENV = "LRU_CACHE_CAPACITY"
COMPUTATION_CACHE_CAPACITY = 16


def bound_primitive_cache(
    capacity: int = PRIMITIVE_CACHE_CAPACITY, computations: int = COMPUTATION_CACHE_CAPACITY
) -> int:
    """Bound oneDNN's primitive cache to ``capacity`` primitives and ideep's computation cache to
    ``computations`` entries, each unless the environment already sets its variable; returns the
    primitive bound in force.

    It takes effect when called before the process's first oneDNN primitive (its first bf16
    matrix product on the CPU), which importing torch does not create.
    """
    os.environ.setdefault(COMPUTATION_CACHE_ENV, str(computations))
    value = os.environ.setdefault(PRIMITIVE_CACHE_ENV, str(capacity))
    try:
        return int(value)
    except ValueError:
        return capacity


@cache
def _glibc():
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # another C library (musl) has no malloc_trim
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_free_heap() -> bool:
    """Hand the heap's free pages back to the system (glibc's ``malloc_trim(0)``, which goes
    through every arena); True when some memory was released, False when none was or the C
    library has no such call."""
    trim = _glibc()
    return bool(trim(0)) if trim is not None else False


class HeapTrimmer:
    """Calls ``release_free_heap`` every ``every`` ticks, so a loop of many steps keeps its
    freed memory from piling up without paying for a trim at each step; ``every`` 0: never.
    Threads may share one: each tick is counted once."""

    def __init__(self, every: int):
        self.every = every
        self._ticks = itertools.count(1)

    def tick(self) -> bool:
        """Count one step; True when this one trimmed."""
        if not self.every or next(self._ticks) % self.every:
            return False
        release_free_heap()
        return True
