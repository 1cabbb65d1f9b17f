"""The file formats the document layer reads, by extension, with their media types: a table that
the CLI and the service consult before they know they need a format's module (those import their
parsers: lxml, markdown-it), so that plain-text translation starts without them."""

from __future__ import annotations

from pathlib import Path

EXTENSIONS = {
    ".txt": "text",
    ".html": "html",
    ".htm": "html",
    ".docx": "docx",
    ".pptx": "pptx",
    ".odt": "odt",
    ".epub": "epub",
    ".srt": "srt",
    ".vtt": "vtt",
    ".md": "md",
    ".markdown": "md",
}
FILE_FORMATS = ("docx", "pptx", "odt", "epub", "srt", "vtt", "md")
PACKAGES = ("docx", "pptx", "odt", "epub")
MEDIA_TYPES = {
    "text": "text/plain; charset=utf-8",
    "html": "text/html; charset=utf-8",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "odt": "application/vnd.oasis.opendocument.text",
    "epub": "application/epub+zip",
    "srt": "application/x-subrip; charset=utf-8",
    "vtt": "text/vtt; charset=utf-8",
    "md": "text/markdown; charset=utf-8",
}


def format_of(path: str | Path | None, given: str | None = None) -> str | None:
    """The file format ``given``, else the one ``path``'s extension names (None: neither)."""
    if given is not None:
        return given
    if path is None:
        return None
    return EXTENSIONS.get(Path(str(path)).suffix.lower())
