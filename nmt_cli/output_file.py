"""Output files that never look finished before they are: written to a temporary name beside the
target and renamed onto it only when the writer completes."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from nmt_cli.errors import UserError


@contextmanager
def atomic_text_output(path: Path | None) -> Iterator[TextIO | None]:
    """A UTF-8 text stream that becomes ``path`` when the block ends without an exception; on any
    exception (an error, Ctrl-C) the temporary file is removed and ``path`` is left as it was.
    Yields None for ``path`` None (the caller writes to stdout)."""
    if path is None:
        yield None
        return
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{path}: is a folder; give a file name to write")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        stream = open(tmp, "w", encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{path}: cannot write ({exc.strerror})") from None
    try:
        with stream:
            yield stream
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError):
            raise UserError(f"{path}: cannot write ({exc.strerror or exc})") from None
        raise
