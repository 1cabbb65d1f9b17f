"""Files on `nmt serve` (LibreTranslate's ``/translate_file``): each format's module of the
document layer (nmt_cli/documents/files.py) run in a worker thread, its texts translated as a
request's are (nmt_cli/serving/documents.py's translate_plan: the memory and the cache first,
then the batcher with every other request's), a part at a time so that a long document never
asks for more of the queue than half of it.

A file has limits of its own (nmt_cli/serving/settings.py's FileSettings, from ``nmt serve``'s
options): its size, the characters it has to translate (counted before any is translated: 413
past it), what a zip package may unpack to; translated files wait for their download in
nmt_cli/serving/kept_files.py.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread

from nmt_cli.documents.files import (
    FileLimits,
    counted_characters,
    format_patterns,
    translate_file,
)
from nmt_cli.documents.package import LimitError, PackageLimits
from nmt_cli.runtime.errors import UserError
from nmt_cli.serving.documents import plan_texts, translate_plan
from nmt_cli.serving.request_body import RequestError
from nmt_cli.serving.settings import FileSettings
from nmt_cli.translation.contract import TranslateOptions


def file_limits(files: FileSettings) -> FileLimits:
    """The document layer's limits for files under ``files``."""
    return FileLimits(PackageLimits(), text_bytes=files.max_bytes)


def _failed(exc: UserError) -> RequestError:
    status = 413 if isinstance(exc, LimitError) else 400
    return RequestError(status, f"Invalid request: {exc}")


async def translate_upload(
    service,
    data: bytes,
    fmt: str,
    name: str,
    route_of: Callable[[list[str]], Any],
    charge: Callable[[int], None],
) -> bytes:
    """The translation of the uploaded file ``data`` (format ``fmt``, named ``name``) through
    the route ``route_of`` gives for a sample of its text, ``charge`` told the characters it
    has to translate first; a file the format's module refuses is a 400, one over a limit a
    413."""
    files: FileSettings = service.file_settings
    if len(data) > files.max_bytes:
        raise RequestError(
            413,
            f"Invalid request: the file has {len(data)} bytes, over the limit {files.max_bytes}",
        )
    limits = file_limits(files)
    sample: list[str] = []
    try:
        chars = await anyio.to_thread.run_sync(
            counted_characters, io.BytesIO(data), fmt, name, limits, sample
        )
    except UserError as exc:
        raise _failed(exc) from None
    if chars > files.max_chars:
        raise RequestError(
            413,
            f"Invalid request: the file has {chars} characters to translate, over the limit "
            f"{files.max_chars}",
        )
    route = route_of(["".join(sample)[:2000] or " "])
    charge(chars)
    patterns = format_patterns(fmt)
    most = max(1, service.settings.max_queue // 2)

    async def decoded(texts: Sequence[str], kind: str) -> list[str]:
        plan = plan_texts(route, texts, kind, patterns=patterns)
        return plan.assemble(await translate_plan(service, route, plan, TranslateOptions(), most))

    def translate(texts: Sequence[str], kind: str) -> list[str]:
        return anyio.from_thread.run(decoded, texts, kind)

    def work() -> bytes:
        target = io.BytesIO()
        translate_file(io.BytesIO(data), target, fmt, translate, name, limits)
        return target.getvalue()

    try:
        return await anyio.to_thread.run_sync(work)
    except UserError as exc:
        raise _failed(exc) from None
