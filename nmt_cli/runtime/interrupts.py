"""Ctrl-C and SIGTERM in the commands that are not training: they stop the command at once and the
CLI prints one line saying what was left incomplete, then exits 128 + the signal number (130 for
SIGINT, 143 for SIGTERM). Training handles its own signals (it checkpoints first)."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_tasks: list[Callable[[], str]] = []
# what the whole command leaves undone, when no task says more (nmt_cli.runtime.startup.command
# sets it)
_command = "stopped before it finished"
_deferring = 0  # depth of deferred() blocks
_pending: int | None = None  # a signal that arrived inside one


class Interrupted(BaseException):
    """A signal stopped a command; ``left`` says what was not finished. A BaseException, like
    KeyboardInterrupt, so that no ``except Exception`` on the way (logging's, a library's)
    swallows it."""

    def __init__(self, signum: int, left: str | None = None):
        self.signum = signum
        self.exit_code = 128 + signum
        self.left = left if left is not None else unfinished()
        super().__init__(f"{signal.Signals(signum).name} received: {self.left}")


def _raise(signum, frame):
    global _pending
    if _deferring:
        _pending = signum
        return
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


def command(describe: str) -> None:
    """What an interruption anywhere in this command leaves undone (inner tasks say more)."""
    global _command
    _command = describe


def unfinished() -> str:
    return _tasks[-1]() if _tasks else _command


@contextmanager
def deferred() -> Iterator[None]:
    """A signal that arrives inside waits until the block ends, so that what the block writes is
    written whole (an output line, and the count of lines written that the message reports)."""
    global _deferring, _pending
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
    if not _deferring and _pending is not None:
        signum, _pending = _pending, None
        raise Interrupted(signum)
