"""Zip packages (.docx, .odt, .pptx, .epub) read within limits and written back, and their XML
parts parsed safely.

A package is checked before any member is unpacked (:class:`PackageLimits`: how many members,
how many bytes in all once unpacked, how much a large member may expand), so that a zip bomb is
refused by a one-line :class:`LimitError` naming the limit. XML is parsed with lxml without
entity expansion, DTDs or network access, and a part that declares a DOCTYPE or an entity is
refused (the billion-laughs and external-entity attacks need one). Writing back copies every
member the translation did not change byte for byte, in the order and with the compression it
had (the ``mimetype`` member of an .odt or .epub stays first and stored).
"""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

from lxml import etree

from nmt_cli.runtime.errors import UserError


class LimitError(UserError):
    """A file over one of the limits on what it may hold or unpack to (HTTP 413)."""


@dataclass(frozen=True)
class PackageLimits:
    """What a zip package may unpack to: ``members`` files, ``total_bytes`` in all, and a
    member over ``ratio_from`` bytes at most ``ratio`` times its compressed size."""

    members: int = 10_000
    total_bytes: int = 512 << 20
    ratio: int = 100
    ratio_from: int = 1 << 20


_SAFE_XML = etree.XMLParser(
    resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False, remove_comments=False
)


def open_package(source: BinaryIO, name: str, limits: PackageLimits) -> zipfile.ZipFile:
    """The zip archive in the seekable binary file ``source`` (``name`` for messages), checked
    against ``limits``; its members are read when asked for."""
    try:
        archive = zipfile.ZipFile(source)
    except (zipfile.BadZipFile, OSError) as exc:
        raise UserError(f"{name}: not a zip package ({exc})") from None
    infos = archive.infolist()
    if len(infos) > limits.members:
        raise LimitError(f"{name}: {len(infos)} members, over the limit of {limits.members}")
    total = sum(info.file_size for info in infos)
    if total > limits.total_bytes:
        raise LimitError(
            f"{name}: unpacks to {total} bytes, over the limit of {limits.total_bytes}"
        )
    for info in infos:
        ratio = info.file_size // max(info.compress_size, 1)
        if info.file_size > limits.ratio_from and ratio > limits.ratio:
            raise LimitError(
                f"{name}: member {info.filename} expands {ratio} times, over the limit of "
                f"{limits.ratio}"
            )
    return archive


def read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, name: str) -> bytes:
    try:
        return archive.read(info)
    except (zipfile.BadZipFile, zlib.error, OSError, NotImplementedError, RuntimeError) as exc:
        raise UserError(f"{name}: cannot unpack {info.filename} ({exc})") from None


def parse_xml(data: bytes, name: str) -> etree._Element:
    """The root of the XML part ``data`` (``name``: the file and member, for messages), parsed
    without entities; a DOCTYPE or entity declaration is refused."""
    refused = f"{name}: declares a DOCTYPE or an entity, which is not read"
    if b"<!DOCTYPE" in data or b"<!ENTITY" in data:
        raise UserError(refused)
    try:
        root = etree.fromstring(data, _SAFE_XML)
    except etree.XMLSyntaxError as exc:
        raise UserError(f"{name}: not well-formed XML ({exc})") from None
    info = root.getroottree().docinfo
    if info.doctype or info.internalDTD is not None or info.externalDTD is not None:
        raise UserError(refused)  # in an encoding the byte test above cannot read (UTF-16)
    return root


def write_xml(root: etree._Element) -> bytes:
    """The XML part of ``root``, with the declaration and standalone flag it was read with."""
    info = root.getroottree().docinfo
    return etree.tostring(
        root, xml_declaration=True, encoding=info.encoding or "UTF-8", standalone=info.standalone
    )


def rewrite_package(
    archive: zipfile.ZipFile,
    target: BinaryIO,
    name: str,
    change: Callable[[str, bytes], bytes | None],
) -> None:
    """Write ``archive`` to ``target`` a member at a time, each as ``change(member name, its
    bytes)`` makes it (None: as it was): same order, names, dates and compression."""
    with zipfile.ZipFile(target, "w") as out:
        for info in archive.infolist():
            data = read_member(archive, info, name)
            new = change(info.filename, data)
            out.writestr(info, data if new is None else new, compress_type=info.compress_type)
