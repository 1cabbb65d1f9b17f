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
    spacing: frozenset[str] = frozenset()  # voids that separate words: tabs, line breaks
    mixed: bool = False


DOCX = Dialect(
    parts=r"word/(document|header\d*|footer\d*|footnotes|endnotes|comments)\.xml",
    paragraphs=frozenset({W + "p"}),
    run=W + "r",
    text=W + "t",
    run_properties=W + "rPr",
    boxes=frozenset(
        W + t
        for t in ("hyperlink", "ins", "smartTag", "fldSimple", "bdo", "dir", "sdt", "sdtContent")
    ),
    first=frozenset({W + "pPr", W + "smartTagPr", W + "sdtPr", W + "sdtEndPr"}),
    spacing=frozenset({W + "tab", W + "br", W + "cr"}),
)
PPTX = Dialect(
    parts=r"ppt/(slides/slide|notesSlides/notesSlide)\d+\.xml",
    paragraphs=frozenset({A + "p"}),
    run=A + "r",
    text=A + "t",
    run_properties=A + "rPr",
    first=frozenset({A + "pPr"}),
    last=frozenset({A + "endParaRPr"}),
    spacing=frozenset({A + "br"}),
)
ODT = Dialect(
    parts=r"(content|styles)\.xml",
    paragraphs=frozenset({T + "p", T + "h"}),
    boxes=frozenset(T + t for t in ("span", "a", "meta", "ruby-base")),
    spacing=frozenset({T + "tab", T + "line-break", T + "s"}),
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
        pieces, base = _based(_pieces(paragraph, dialect), dialect)
        document, registry = carrier(pieces)
        if any(p.words().strip() for p in pieces):
            work.append((paragraph, document, registry, base))
    outputs: list[str] = []
    for at in range(0, len(work), BATCH):
        outputs += translate([document for _, document, _, _ in work[at : at + BATCH]], "html")
    changed = 0
    # The last first: a paragraph in a text box or a note is written back before the one
    # that holds it, so that a part copied out of a run carries it translated.
    for (paragraph, document, registry, base), output in reversed(list(zip(work, outputs))):
        if output != document:
            _rebuild(paragraph, pieces_of(output, registry), dialect, base)
            changed += 1
    return changed


def _based(pieces: list[Piece], dialect: Dialect) -> tuple[list[Piece], object]:
    """(``pieces`` with the paragraph's base runs as bare text, a base run): the base is the
    run properties most of its text has (OOXML writes them on every run); only runs formatted
    otherwise are carried as tags, and words the translation puts outside them go into runs
    with the base properties."""
    if dialect.mixed:
        return pieces, None
    weight: dict[bytes, int] = {}
    runs = [p.wrap if p.wrap is not None else p.node for p in pieces]
    for p, run in zip(pieces, runs):
        if p.kind == "run":
            key = _properties(run, dialect)
            weight[key] = weight.get(key, 0) + len(p.text)
    if not weight:
        return pieces, None
    base = max(weight, key=weight.get)
    plain = [p.kind == "run" and _properties(r, dialect) == base for p, r in zip(pieces, runs)]
    out = [Piece("text", text=p.text) if bare else p for p, bare in zip(pieces, plain)]
    return out, runs[plain.index(True)]


def _properties(run, dialect: Dialect) -> bytes:
    found = run.find(dialect.run_properties)
    return b"" if found is None else etree.tostring(found)


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
            out.append(_void(child, dialect))
    return out


def _void(node, dialect: Dialect) -> Piece:
    """A void; one that separates words where it is a tab or a line break (or a run of them)."""
    content = (
        [c for c in node if c.tag != dialect.run_properties] if node.tag == dialect.run else []
    )
    space = (
        node.tag in dialect.spacing
        or bool(content)
        and all(c.tag in dialect.spacing for c in content)
    )
    return Piece("void", node, space=space)


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
            out.append(_void(child, dialect))
        if child.tail:
            out.append(Piece("text", text=child.tail))
    return out


def _run_pieces(run, dialect: Dialect) -> list[Piece]:
    """A run as one piece, or, where it holds text and something else (a tab between two
    words), one piece per part, each written back as a run of the same properties."""
    content = [c for c in run if c.tag != dialect.run_properties]
    texts = [c for c in content if c.tag == dialect.text]
    if not texts:
        return [_void(run, dialect)]
    if len(content) == 1:
        return [Piece("run", run, text=texts[0].text or "")]
    out = []
    for part in content:
        if part.tag == dialect.text:
            out.append(Piece("run", part, text=part.text or "", wrap=run))
        else:
            out.append(Piece("void", part, space=part.tag in dialect.spacing, wrap=run))
    return out


def _rebuild(parent, pieces: list[Piece], dialect: Dialect, base) -> None:
    """``parent``'s children made ``pieces`` in order (its first and last properties kept in
    their place), each run given its words, bare words in new runs like ``base`` (a run with
    the paragraph's base properties; None: a run without properties)."""
    if dialect.mixed:
        _rebuild_mixed(parent, pieces, dialect)
        return
    first = [c for c in parent if c.tag in dialect.first]
    last = [c for c in parent if c.tag in dialect.last]
    for child in list(parent):
        parent.remove(child)
    parent.extend(first)
    for piece in _bare_text_in_runs(pieces):
        if piece.node is None:
            node = _new_run(base, dialect)
        elif piece.wrap is not None:  # a part of a run, copied now: after what it holds
            node = _new_run(piece.wrap, dialect, copy.deepcopy(piece.node))
        else:
            node = piece.node
        if piece.kind == "run":
            _set_text(node, piece.text, dialect)
        elif piece.kind == "box":
            _rebuild(node, piece.children, dialect, base)
        parent.append(node)
    parent.extend(last)


def _bare_text_in_runs(pieces: list[Piece]) -> list[Piece]:
    """``pieces`` with each stretch of bare words (base text, or words aligned to no run) one
    new run (node None)."""
    out: list[Piece] = []
    for piece in pieces:
        if piece.kind != "text":
            out.append(piece)
        elif out and out[-1].kind == "run" and out[-1].node is None:
            out[-1].text += piece.text
        else:
            out.append(Piece("run", None, text=piece.text))
    return out


def _new_run(like, dialect: Dialect, content=None):
    """A run with the attributes and properties of the run ``like`` (None: none), holding
    ``content`` (None: an empty text element)."""
    run = etree.Element(dialect.run, attrib=dict(like.attrib) if like is not None else {})
    properties = like.find(dialect.run_properties) if like is not None else None
    if properties is not None:
        run.append(copy.deepcopy(properties))
    run.append(content if content is not None else etree.Element(dialect.text))
    return run


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
