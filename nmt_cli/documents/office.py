"""Office documents (.docx, .pptx, .odt): their paragraphs translated run by run, every other
part of the package copied as it was.

Each format is a :class:`Dialect`: which package members hold translatable paragraphs, which
elements are paragraphs, runs, a run's text, boxes (elements holding runs: hyperlinks, tracked
insertions, ODF spans and links) and properties that stay first or last (a paragraph's style,
PowerPoint's end-of-paragraph properties). A paragraph's pieces (nmt_cli/documents/runs.py) go
through the document layer as a small HTML document, so bold, italic, links and styles stay on
the words aligned to the ones they covered; everything else in a paragraph (tabs, breaks,
pictures, fields, bookmarks, notes) is a void kept whole and placed by the same alignment.
Headings, lists, tables and slides are paragraphs in their containers, which are not touched;
a paragraph nested in a void (a text box, a footnote) is translated as a paragraph of its own.
A Word run holding text and something else (a tab between two words) is split into runs of the
same properties first, one piece each.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import BinaryIO

from lxml import etree

from nmt_cli.documents.package import (
    PackageLimits,
    open_package,
    parse_xml,
    rewrite_package,
    write_xml,
)
from nmt_cli.documents.runs import Piece, carrier, pieces_of

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
T = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"
BATCH = 256  # paragraphs given to the document layer at once

Translate = Callable[[Sequence[str], str], list[str]]


@dataclass(frozen=True)
class Dialect:
    """How one office format writes paragraphs; ``mixed``: text lies between elements (ODF),
    else only inside runs (OOXML)."""

    parts: str  # a regex of the package members to translate
    paragraphs: frozenset[str]
    run: str = ""
    text: str = ""
    run_properties: str = ""
    boxes: frozenset[str] = frozenset()
    first: frozenset[str] = frozenset()
    last: frozenset[str] = frozenset()
    mixed: bool = False


DOCX = Dialect(
    parts=r"word/(document|header\d*|footer\d*|footnotes|endnotes|comments)\.xml",
    paragraphs=frozenset({W + "p"}),
    run=W + "r",
    text=W + "t",
    run_properties=W + "rPr",
    boxes=frozenset(W + t for t in ("hyperlink", "ins", "smartTag", "fldSimple", "bdo", "dir")),
    first=frozenset({W + "pPr", W + "smartTagPr"}),
)
PPTX = Dialect(
    parts=r"ppt/(slides/slide|notesSlides/notesSlide)\d+\.xml",
    paragraphs=frozenset({A + "p"}),
    run=A + "r",
    text=A + "t",
    run_properties=A + "rPr",
    first=frozenset({A + "pPr"}),
    last=frozenset({A + "endParaRPr"}),
)
ODT = Dialect(
    parts=r"(content|styles)\.xml",
    paragraphs=frozenset({T + "p", T + "h"}),
    boxes=frozenset(T + t for t in ("span", "a", "meta", "ruby-base")),
    mixed=True,
)
DIALECTS = {"docx": DOCX, "pptx": PPTX, "odt": ODT}


def translate_office(
    source: BinaryIO,
    target: BinaryIO,
    fmt: str,
    translate: Translate,
    name: str,
    limits: PackageLimits,
) -> None:
    """Write to ``target`` the package in ``source`` (format ``fmt``: docx, pptx or odt) with
    its paragraphs translated by ``translate`` (HTML texts in, HTML texts out), one member at a
    time."""
    dialect = DIALECTS[fmt]

    def change(member: str, data: bytes) -> bytes | None:
        if not re.fullmatch(dialect.parts, member):
            return None
        root = parse_xml(data, f"{name}: {member}")
        return write_xml(root) if translate_part(root, dialect, translate) else None

    rewrite_package(open_package(source, name, limits), target, name, change)


def translate_part(root, dialect: Dialect, translate: Translate) -> int:
    """Translate the paragraphs of one XML part in place; returns how many changed."""
    found = [el for el in root.iter() if el.tag in dialect.paragraphs]
    work = []
    for paragraph in found:
        pieces = _pieces(paragraph, dialect)
        document, registry = carrier(pieces)
        if any(p.words().strip() for p in pieces):
            work.append((paragraph, document, registry))
    changed = 0
    for at in range(0, len(work), BATCH):
        batch = work[at : at + BATCH]
        outputs = translate([document for _, document, _ in batch], "html")
        for (paragraph, document, registry), output in zip(batch, outputs):
            if output != document:
                _rebuild(paragraph, pieces_of(output, registry), dialect, _template(registry))
                changed += 1
    return changed


def _pieces(parent, dialect: Dialect) -> list[Piece]:
    if dialect.mixed:
        return _mixed_pieces(parent, dialect)
    out: list[Piece] = []
    for child in parent:
        if child.tag in dialect.first or child.tag in dialect.last:
            continue
        if child.tag == dialect.run:
            out.extend(_run_pieces(child, dialect))
        elif child.tag in dialect.boxes:
            out.append(_box(child, _pieces(child, dialect)))
        else:
            out.append(Piece("void", child))
    return out


def _box(node, children: list[Piece]) -> Piece:
    """A box, or a void where it holds no text."""
    if any(p.words() for p in children):
        return Piece("box", node, children=children)
    return Piece("void", node)


def _mixed_pieces(parent, dialect: Dialect) -> list[Piece]:
    out: list[Piece] = []
    if parent.text:
        out.append(Piece("text", text=parent.text))
    for child in parent:
        if child.tag in dialect.boxes:
            out.append(_box(child, _mixed_pieces(child, dialect)))
        else:
            out.append(Piece("void", child))
        if child.tail:
            out.append(Piece("text", text=child.tail))
    return out


def _run_pieces(run, dialect: Dialect) -> list[Piece]:
    """A run as one piece, or, where it holds text and something else, one piece per part in a
    copy of the run with the same properties (the run itself stays as it was until rebuilt)."""
    content = [c for c in run if c.tag != dialect.run_properties]
    texts = [c for c in content if c.tag == dialect.text]
    if not texts:
        return [Piece("void", run)]
    if len(content) == 1:
        return [Piece("run", run, text=texts[0].text or "")]
    properties = [c for c in run if c.tag == dialect.run_properties]
    out = []
    for part in content:
        single = etree.Element(run.tag, attrib=dict(run.attrib))
        single.extend(copy.deepcopy(c) for c in properties + [part])
        text = part.text or "" if part.tag == dialect.text else None
        out.append(Piece("void", single) if text is None else Piece("run", single, text=text))
    return out


def _template(registry: list[Piece]):
    return next((p.node for p in registry if p.kind == "run"), None)


def _rebuild(parent, pieces: list[Piece], dialect: Dialect, template) -> None:
    """``parent``'s children made ``pieces`` in order (its first and last properties kept in
    their place), each run given its words."""
    if dialect.mixed:
        _rebuild_mixed(parent, pieces, dialect)
        return
    first = [c for c in parent if c.tag in dialect.first]
    last = [c for c in parent if c.tag in dialect.last]
    for child in list(parent):
        parent.remove(child)
    parent.extend(first)
    for piece in _bare_text_in_runs(pieces, dialect, template):
        if piece.kind == "run":
            _set_text(piece.node, piece.text, dialect)
        elif piece.kind == "box":
            _rebuild(piece.node, piece.children, dialect, template)
        parent.append(piece.node)
    parent.extend(last)


def _bare_text_in_runs(pieces: list[Piece], dialect: Dialect, template) -> list[Piece]:
    """``pieces`` with bare words (aligned to no run) and spaces added to the run right before
    them, else the next run, else the last, else a new run like the paragraph's first."""
    out: list[Piece] = []
    pending = ""
    for piece in pieces:
        if piece.kind == "text":
            if out and out[-1].kind == "run":
                out[-1].text += piece.text
            else:
                pending += piece.text
            continue
        if piece.kind == "run" and pending:
            piece.text, pending = pending + piece.text, ""
        out.append(piece)
    if pending:
        before = next((p for p in reversed(out) if p.kind == "run"), None)
        if before is not None:
            before.text += pending
        elif pending.strip() and template is not None:
            out.append(Piece("run", copy.deepcopy(template), text=pending))
    return out


def _set_text(run, text: str, dialect: Dialect) -> None:
    node = next(c for c in run if c.tag == dialect.text)
    node.text = text
    if dialect.text == DOCX.text and text != text.strip():
        node.set(XML_SPACE, "preserve")


def _rebuild_mixed(parent, pieces: list[Piece], dialect: Dialect) -> None:
    for child in list(parent):
        parent.remove(child)
    parent.text = None
    last = None
    for piece in pieces:
        if piece.kind == "text":
            if last is None:
                parent.text = (parent.text or "") + piece.text
            else:
                last.tail = (last.tail or "") + piece.text
            continue
        node = piece.node
        node.tail = None
        if piece.kind == "box":
            _rebuild_mixed(node, piece.children, dialect)
        parent.append(node)
        last = node
