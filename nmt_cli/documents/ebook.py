"""E-books (.epub): each XHTML content document translated as an HTML document by the document
layer (nmt_cli/documents/markup.py: markup copied as it was, inline tags carried by the
alignment), one at a time; every other member (the package document, the table of contents in
NCX, style sheets, pictures, fonts, the ``mimetype`` first and stored) copied as it was."""

from __future__ import annotations

import posixpath
import re
from typing import BinaryIO
from urllib.parse import unquote

from nmt_cli.documents.office import Translate
from nmt_cli.documents.package import (
    PackageLimits,
    open_package,
    parse_xml,
    read_member,
    rewrite_package,
)
from nmt_cli.runtime.errors import UserError

CONTAINER = "META-INF/container.xml"
XHTML_TYPES = {"application/xhtml+xml", "text/html"}
_OPF = "{http://www.idpf.org/2007/opf}"
_ROOTFILE = "{urn:oasis:names:tc:opendocument:xmlns:container}rootfile"


def content_documents(archive, name: str) -> list[str]:
    """The members the package document's manifest lists as XHTML, its hrefs read as the URLs
    they are (every .xhtml, .html and .htm member where the package has no container.xml naming
    one)."""
    names = set(archive.namelist())
    package = None
    if CONTAINER in names:
        root = parse_xml(read_member(archive, archive.getinfo(CONTAINER), name), name)
        package = next((r.get("full-path") for r in root.iter(_ROOTFILE)), None)
    if package is None or package not in names:
        return [n for n in archive.namelist() if re.search(r"\.(x?html?)$", n, re.IGNORECASE)]
    root = parse_xml(read_member(archive, archive.getinfo(package), name), f"{name}: {package}")
    base = posixpath.dirname(package)
    out = []
    for item in root.iter(_OPF + "item"):
        if item.get("media-type") in XHTML_TYPES and item.get("href"):
            # an href is a URL: "ch%201.xhtml" names the member "ch 1.xhtml"
            href = item.get("href").split("#")[0]
            for path in (unquote(href), href):
                member = posixpath.normpath(posixpath.join(base, path))
                if member in names:
                    out.append(member)
                    break
    return out


def translate_epub(
    source: BinaryIO, target: BinaryIO, translate: Translate, name: str, limits: PackageLimits
) -> None:
    """Write to ``target`` the e-book in ``source`` with its XHTML content documents translated
    by ``translate``, one at a time."""
    archive = open_package(source, name, limits)
    documents = set(content_documents(archive, name))

    def change(member: str, data: bytes) -> bytes | None:
        if member not in documents:
            return None
        try:
            document = data.decode("utf-8")
        except UnicodeDecodeError:
            raise UserError(f"{name}: {member} is not UTF-8") from None
        (translated,) = translate([document], "html")
        return translated.encode("utf-8") if translated != document else None

    rewrite_package(archive, target, name, change)
