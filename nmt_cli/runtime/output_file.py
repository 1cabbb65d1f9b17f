"""Output files that never look finished before they are: written to a temporary name beside the
target and renamed onto it only when the writer completes.

Every file nmt writes for later reading (checkpoints, encoded arrays, preprocessed text, the
recipe, meta.json, summary.json, translations with -o) goes through :class:`AtomicFile`, so a
crash or a signal at any moment leaves either the old file or the whole new one, and at most a
``.NAME.PID.part`` file beside it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TextIO

from nmt_cli.runtime.errors import UserError, failure_reason


def temporary_name(path: Path) -> Path:
    """Where ``path`` is written before it is renamed into place: hidden, beside it, per process."""
    return path.with_name(f".{path.name}.{os.getpid()}.part")


def fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable, where the file system allows it."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class AtomicFile:
    """A file opened under :func:`temporary_name` of ``path``; :meth:`commit` flushes it to disk
    and renames it onto ``path``, :meth:`abort` removes it and leaves ``path`` as it was. For
    writers that live longer than one block; :func:`atomic_write` is the usual way in."""

    def __init__(self, path: str | os.PathLike, mode: str = "wb", *, durable: bool = True):
        self.path = Path(path)
        self.tmp = temporary_name(self.path)
        self.durable = durable  # fsync the file and its folder (a crash keeps the new file)
        encoding = None if "b" in mode else "utf-8"
        try:
            self.file: IO = open(self.tmp, mode, encoding=encoding)
        except OSError as exc:  # name the file asked for, not its temporary name
            raise OSError(exc.errno, exc.strerror, str(self.path)) from None

    def commit(self) -> Path:
        try:
            self.file.flush()
            if self.durable:
                os.fsync(self.file.fileno())
            self.file.close()
            os.replace(self.tmp, self.path)
        except BaseException:
            self.abort()
            raise
        if self.durable:
            fsync_dir(self.path.parent)
        return self.path

    def abort(self) -> None:
        self.file.close()
        self.tmp.unlink(missing_ok=True)


@contextmanager
def atomic_write(
    path: str | os.PathLike, mode: str = "wb", *, durable: bool = True
) -> Iterator[IO]:
    """A file object (UTF-8 text for a text ``mode``) that becomes ``path`` when the block ends
    without an exception; on any exception the temporary file is removed and ``path`` is left as
    it was."""
    out = AtomicFile(path, mode, durable=durable)
    try:
        yield out.file
    except BaseException:
        out.abort()
        raise
    out.commit()


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Replace ``path`` by ``text`` (UTF-8), atomically."""
    with atomic_write(path, "w") as fh:
        fh.write(text)


@contextmanager
def atomic_text_output(path: Path | None) -> Iterator[TextIO | None]:
    """A UTF-8 text stream that becomes ``path`` when the block ends without an exception (see
    :func:`atomic_write`); a file that cannot be written is a one-line UserError. Yields None for
    ``path`` None (the caller writes to stdout)."""
    if path is None:
        yield None
        return
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{path}: is a folder; give a file name to write")
    try:
        out = AtomicFile(path, "w", durable=False)
    except OSError as exc:
        raise UserError(f"{path}: cannot write ({exc.strerror})") from None
    try:
        yield out.file
        out.commit()
    except BaseException as exc:
        out.abort()
        if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError):
            raise UserError(f"{path}: cannot write ({failure_reason(exc)})") from None
        raise
