"""Files in their own formats through the document layer: .docx, .pptx, .odt (runs carried as
inline tags: nmt_cli/documents/office.py), .epub (XHTML documents: ebook.py), .srt and .vtt (cue
by cue: subtitles.py), .md (markdown.py), and .txt and .html as the layer reads them.

Every format is a module that turns its file into texts for one :data:`Translate` function and
writes the translations back; the function is the document layer's ``translate_documents``
for `nmt translate` and the Python API (:func:`layer_translate`), the service's batcher for
`nmt serve`. What a file may hold is bounded by :class:`FileLimits`: a zip package by what it
unpacks to (nmt_cli/documents/package.py), a text file (read whole: .md, .txt, .html) by its
size; subtitles and packages are read and written a part at a time.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import BinaryIO

from nmt_cli.documents.ebook import translate_epub
from nmt_cli.documents.formats import EXTENSIONS, format_of
from nmt_cli.documents.layer import DocumentOptions, translate_documents
from nmt_cli.documents.markdown import translate_markdown
from nmt_cli.documents.office import DIALECTS, Translate, translate_office
from nmt_cli.documents.package import LimitError, PackageLimits
from nmt_cli.documents.subtitles import ENTITY, TIMESTAMP_TAG, translate_subtitles
from nmt_cli.runtime.errors import UserError
from nmt_cli.runtime.output_file import atomic_write
from nmt_cli.translation.contract import TranslateOptions, Translating

_BOM = "\ufeff"


@dataclass(frozen=True)
class FileLimits:
    """What a file may hold: ``package`` for a zip package, ``text_bytes`` for a text file
    read whole (.md, .txt, .html)."""

    package: PackageLimits = field(default_factory=PackageLimits)
    text_bytes: int = 16 << 20


def translate_file(
    source: BinaryIO,
    target: BinaryIO,
    fmt: str,
    translate: Translate,
    name: str = "stdin",
    limits: FileLimits | None = None,
) -> None:
    """Write to ``target`` the translation of the file in ``source`` (seekable for a package),
    in format ``fmt`` (a key of :data:`EXTENSIONS`' values), its texts translated by
    ``translate`` (texts and "text" or "html" in, translations out)."""
    limits = limits or FileLimits()
    if fmt in DIALECTS:
        translate_office(source, target, fmt, translate, name, limits.package)
    elif fmt == "epub":
        translate_epub(source, target, translate, name, limits.package)
    elif fmt in ("srt", "vtt"):
        reader = io.TextIOWrapper(source, encoding="utf-8", newline="")
        try:
            for part in translate_subtitles(iter(reader.readline, ""), translate):
                target.write(part.encode("utf-8"))
        except UnicodeDecodeError:
            raise UserError(f"{name}: not UTF-8 text") from None
        finally:
            reader.detach()
    elif fmt in ("md", "text", "html"):
        document = _read_text(source, name, limits.text_bytes)
        bom = document.startswith(_BOM)
        document = document[1:] if bom else document
        if fmt == "md":
            translated = translate_markdown(document, translate)
        elif fmt == "text":  # each line a text: the layer cuts a text at its line breaks anyway
            translated = "\n".join(translate(document.split("\n"), "text"))
        else:
            (translated,) = translate([document], fmt)
        target.write(((_BOM if bom else "") + translated).encode("utf-8"))
    else:
        raise UserError(
            f"format: '{fmt}' is not one of {', '.join(sorted(set(EXTENSIONS.values())))}"
        )


def _read_text(source: BinaryIO, name: str, most: int) -> str:
    data = source.read(most + 1)
    if len(data) > most:
        raise LimitError(f"{name}: over {most} bytes, the limit of a text file read whole")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{name}: not UTF-8 text") from None


def counted_characters(
    source: BinaryIO,
    fmt: str,
    name: str = "stdin",
    limits: FileLimits | None = None,
    sample: list[str] | None = None,
) -> int:
    """How many characters of the file in ``source`` would be translated (its texts without
    markup), read without translating; ``source`` is left where it began. ``sample``, when
    given, gets the first texts (to identify the language by)."""
    total = 0

    def count(texts: Sequence[str], kind: str) -> list[str]:
        nonlocal total
        for text in texts:
            words = re.sub(r"<[^>]*>", " ", text) if kind == "html" else text
            total += len(words)
            if sample is not None and sum(map(len, sample)) < 2000:
                sample.append(" ".join(words.split()) + " ")
        return list(texts)

    start = source.tell()
    translate_file(source, io.BytesIO(), fmt, count, name, limits)
    source.seek(start)
    return total


def format_patterns(fmt: str) -> tuple[str, ...]:
    """The spans a format keeps verbatim besides the built-in ones: the entities a subtitle or
    markdown file wrote, WebVTT's timestamp tags."""
    if fmt in ("srt", "vtt"):
        return (TIMESTAMP_TAG, ENTITY)
    return (ENTITY,) if fmt == "md" else ()


def layer_translate(
    translator: Translating,
    fmt: str,
    options: TranslateOptions | None = None,
    documents: DocumentOptions | None = None,
) -> Translate:
    """The :data:`Translate` of ``translator`` through the document layer for a file of format
    ``fmt``: ``documents``' sentence splitting and protected spans (and the format's own:
    :func:`format_patterns`), its format the one each text comes in."""
    documents = documents or DocumentOptions()
    if documents.protect is not None:
        documents = replace(documents, protect=[*documents.protect, *format_patterns(fmt)])

    def translate(texts: Sequence[str], kind: str) -> list[str]:
        chosen = replace(documents, fmt=kind)
        return [r.text for r in translate_documents(translator, texts, options, chosen)]

    return translate


def translate_path(
    translator: Translating,
    source: str | Path,
    target: str | Path,
    fmt: str | None = None,
    options: TranslateOptions | None = None,
    documents: DocumentOptions | None = None,
    limits: FileLimits | None = None,
) -> None:
    """Translate the file ``source`` into ``target`` (written whole once complete), its format
    ``fmt`` or the one its extension names."""
    chosen = format_of(source, fmt)
    if chosen is None:
        raise UserError(f"{source}: unknown file format; give --format")
    translate = layer_translate(translator, chosen, options, documents)
    try:
        with open(source, "rb") as src, atomic_write(target, "wb", durable=False) as out:
            translate_file(src, out, chosen, translate, str(source), limits)
    except OSError as exc:
        raise UserError(
            f"{exc.filename or source}: cannot read or write ({exc.strerror})"
        ) from None
