"""The CPU cores this process may use, and how many of them other processes keep busy.

Free of torch, so that the command line can start sampling the cores' load before it imports
torch (``start_sample``, nmt_cli/runtime/startup.py): the sample then spans the import, and
choosing the number of threads afterwards need not wait for a sample of its own.

A core's load over an interval [t0, t1] is the share of its time, in /proc/stat's jiffies, spent
neither idle nor waiting for I/O; the load of other processes is the sum over this process's
cores c, less this process's own share:

    busy = sum_c (busy_c(t1) - busy_c(t0)) / (total_c(t1) - total_c(t0))
           - (own CPU seconds(t1) - own CPU seconds(t0)) / (t1 - t0)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass


def usable_cores() -> int:
    """How many cores this process may run on: its CPU affinity, capped by a cgroup CPU quota
    (a container given two CPUs' worth of time counts two, whatever the affinity)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cores = os.cpu_count() or 1
    try:  # cgroup v2: "max 100000" or "200000 100000" (quota and period, in microseconds)
        with open("/sys/fs/cgroup/cpu.max") as fh:
            quota, period = fh.read().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, -(-int(quota) // int(period))))
    except (OSError, ValueError):
        pass
    return max(1, cores)


def parse_cpu_times(stat: str) -> dict[str, tuple[int, int]]:
    """(busy, total) jiffies per CPU ("cpu0", "cpu1", ...) from the text of /proc/stat."""
    times = {}
    for line in stat.splitlines():
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        name, *fields = line.split()
        values = [int(v) for v in fields[:8]]
        idle = values[3] + values[4]  # idle and iowait
        times[name] = (sum(values) - idle, sum(values))
    return times


def read_cpu_times() -> dict[str, tuple[int, int]]:
    """This machine's (busy, total) jiffies per CPU; empty where /proc/stat is missing."""
    try:
        with open("/proc/stat") as fh:
            return parse_cpu_times(fh.read())
    except (OSError, ValueError, IndexError):
        return {}


@dataclass(frozen=True)
class Sample:
    """The moment a load measurement begins or ends."""

    at: float  # monotonic seconds
    own_cpu: float  # this process's CPU seconds so far
    cpus: dict[str, tuple[int, int]]  # (busy, total) jiffies per CPU


def take_sample() -> Sample:
    return Sample(time.monotonic(), time.process_time(), read_cpu_times())


def busy_between(before: Sample, after: Sample, cores: set[str] | None = None) -> float:
    """How many of ``cores`` (CPU names; None: every CPU sampled) processes other than this one
    kept busy from ``before`` to ``after``: the module's equation, never below 0."""
    busy = 0.0
    for name, (b1, t1) in after.cpus.items():
        if name not in before.cpus or (cores is not None and name not in cores):
            continue
        b0, t0 = before.cpus[name]
        if t1 > t0:
            busy += (b1 - b0) / (t1 - t0)
    elapsed = after.at - before.at
    own = (after.own_cpu - before.own_cpu) / elapsed if elapsed > 0 else 0.0
    return max(0.0, busy - own)


_started: Sample | None = None  # what start_sample() took


def start_sample() -> None:
    """Begin measuring the cores' load now, for a later ``busy_cores`` to finish."""
    global _started
    _started = take_sample()


def _affinity() -> set[str] | None:
    try:
        return {f"cpu{i}" for i in os.sched_getaffinity(0)}
    except (AttributeError, OSError):
        return None


def busy_cores(
    sample_s: float = 0.25,
    *,
    take: Callable[[], Sample] = take_sample,
    sleep: Callable[[float], None] = time.sleep,
) -> float:
    """How many of this process's cores other processes keep busy, measured over at least
    ``sample_s`` seconds; 0 where the CPUs' times cannot be read. After ``start_sample`` the
    measurement runs from then and sleeps only for what is left of ``sample_s``; otherwise it
    sleeps through a sample of its own. ``take`` (a sample of the clock and of /proc/stat) and
    ``sleep`` can be replaced, as the tests do."""
    before = _started if _started is not None and _started.cpus else take()
    if not before.cpus:
        return 0.0
    after = take()
    left = sample_s - (after.at - before.at)
    if left > 0:
        sleep(left)
        after = take()
    return busy_between(before, after, _affinity())
