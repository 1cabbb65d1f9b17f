"""The CPU cores this process may use, and how many of them other processes keep busy.

Free of torch, so that the command line can start sampling the cores' load before it imports
torch (``start_sample``): the sample then spans the import, and choosing the number of threads
afterwards costs no waiting (a 0.25 s pause of every `nmt translate` start before).
"""

from __future__ import annotations

import os
import time

# (monotonic seconds, this process's CPU seconds, per-CPU (busy, total) jiffies) at start_sample()
_started: tuple[float, float, dict[str, tuple[int, int]]] | None = None


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity, capped by a cgroup CPU quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:  # cgroup v2: "max 100000" or "200000 100000" (quota and period, in microseconds)
        quota, period = open("/sys/fs/cgroup/cpu.max").read().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, int(-(-int(quota) // int(period)))))
    except (OSError, ValueError):
        pass
    return max(1, cores)


def _cpu_times() -> dict[str, tuple[int, int]]:
    """(busy, total) jiffies per CPU from /proc/stat; empty where there is none."""
    times = {}
    try:
        with open("/proc/stat") as fh:
            for line in fh:
                if not line.startswith("cpu") or line.startswith("cpu "):
                    continue
                name, *fields = line.split()
                values = [int(v) for v in fields[:8]]
                idle = values[3] + values[4]  # idle and iowait
                times[name] = (sum(values) - idle, sum(values))
    except (OSError, ValueError, IndexError):
        return {}
    return times


def start_sample() -> None:
    """Begin measuring the cores' load now, for a later ``busy_cores`` to finish."""
    global _started
    _started = (time.monotonic(), time.process_time(), _cpu_times())


def busy_cores(sample_s: float = 0.25) -> float:
    """How many of this process's cores other processes keep busy, measured from /proc/stat over
    at least ``sample_s`` seconds; 0 where /proc/stat is missing. After ``start_sample`` the
    measurement runs from then, this process's own CPU time taken out, and waits only for what
    is left of ``sample_s``; otherwise it sleeps through a sample of its own."""
    try:
        mine = {f"cpu{i}" for i in os.sched_getaffinity(0)}
    except (AttributeError, OSError):
        mine = None
    if _started is not None and _started[2]:
        began, own_before, before = _started
    else:
        began, own_before, before = time.monotonic(), time.process_time(), _cpu_times()
    if not before:
        return 0.0
    left = sample_s - (time.monotonic() - began)
    if left > 0:
        time.sleep(left)
    after, own_after, elapsed = _cpu_times(), time.process_time(), time.monotonic() - began
    busy = 0.0
    for name, (b1, t1) in after.items():
        if name not in before or (mine is not None and name not in mine):
            continue
        b0, t0 = before[name]
        if t1 > t0:
            busy += (b1 - b0) / (t1 - t0)
    own = (own_after - own_before) / elapsed if elapsed > 0 else 0.0
    return max(0.0, busy - own)
