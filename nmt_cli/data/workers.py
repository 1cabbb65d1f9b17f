"""Worker processes for preprocessing: a function mapped over a stream of chunks on every core,
results in input order, with only a few chunks in flight.

``concurrent.futures``' own ``map`` submits the whole input at once, which for a corpus stream
would read the corpus into memory; here at most ``ahead`` chunks per worker are submitted before
the oldest result is taken. Workers are forked (no re-import, start-up in milliseconds) and
ignore SIGINT: Ctrl-C reaches the whole process group, and only the main process should act on
it (nmt_cli/runtime/interrupts.py), cancelling what is queued. On Linux they also die with the
thread
that forked them (the one iterating ``ordered_map``), so a main process killed outright leaves
none behind.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import TypeVar

from nmt_cli.runtime.cores import usable_cores

PR_SET_PDEATHSIG = 1  # linux/prctl.h

T = TypeVar("T")
R = TypeVar("R")


def _worker_start(parent: int) -> None:
    """In each worker: ignore SIGINT (the main process acts on it), and die with the main process.
    A forked worker holds its own copies of the pool's pipes, so when the main process is killed
    outright (SIGKILL, the OOM killer) the worker never reads an end of input and would wait
    forever; Linux's PR_SET_PDEATHSIG has the kernel kill it instead."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: no such call
        return
    if os.getppid() != parent:  # the main process died before the call took effect
        os._exit(1)


def ordered_map(
    func: Callable[[T], R], items: Iterable[T], workers: int | None = None, ahead: int = 2
) -> Iterator[R]:
    """``map(func, items)`` on ``workers`` processes (None: one per usable core, see
    nmt_cli.runtime.cores.usable_cores), in order; serial in this process when there is one worker
    or fork is unavailable. ``func`` and each item must pickle."""
    if workers is None:
        workers = usable_cores()
    if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        yield from map(func, items)
        return
    pool = ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("fork"),
        initializer=_worker_start,
        initargs=(os.getpid(),),
    )
    pending: deque = deque()
    try:
        for item in items:
            pending.append(pool.submit(func, item))
            if len(pending) >= workers * ahead:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        pool.shutdown(wait=not pending, cancel_futures=True)
