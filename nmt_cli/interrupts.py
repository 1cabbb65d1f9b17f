"""Ctrl-C and SIGTERM in the commands that are not training: they stop the command at once and the
CLI prints one line saying what was left incomplete, then exits 128 + the signal number (130 for
SIGINT, 143 for SIGTERM). Training handles its own signals (it checkpoints first)."""

from __future__ import annotations

import signal
from contextlib import contextmanager
from typing import Callable, Iterator

_tasks: list[Callable[[], str]] = []


class Interrupted(Exception):
    """A signal stopped a command; ``left`` says what was not finished."""

    def __init__(self, signum: int, left: str | None = None):
        self.signum = signum
        self.exit_code = 128 + signum
        self.left = left if left is not None else unfinished()
        super().__init__(f"{signal.Signals(signum).name} received: {self.left}")


def _raise(signum, frame):
    raise Interrupted(signum)


def install() -> None:
    """SIGINT and SIGTERM raise Interrupted (which command-line libraries do not swallow, unlike
    KeyboardInterrupt); a SIGTERM otherwise kills the process with no word and no cleanup."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _raise)


@contextmanager
def task(describe: str | Callable[[], str]) -> Iterator[None]:
    """While inside, an interruption reports ``describe`` (or what it returns at that moment)."""
    _tasks.append(describe if callable(describe) else (lambda: describe))
    try:
        yield
    finally:
        _tasks.pop()


def unfinished() -> str:
    return _tasks[-1]() if _tasks else "stopped before it finished"
