"""Formatted runs of a paragraph carried through the inline-tag layer as HTML, and back.

An office or e-book paragraph is a sequence of :class:`Piece`: bare text, runs (a leaf holding
text under one formatting: bold, italic, a style, a font), boxes (an element holding pieces: a
hyperlink, an inserted change, an ODF span or link) and voids (kept whole: a tab, a line break,
a picture, a field, a bookmark, a note). :func:`carrier` writes them as one small HTML document,
each run and box a ``<span data-n="k">``, each void an ``<img data-n="k">``, so that the
document layer translates the paragraph as one flowing text and puts every tag back on the words
aligned to the ones it covered (nmt_cli/documents/inline.py); :func:`pieces_of` reads its output
back into pieces in the translation's order, each run with the words it now covers, for the
format to write into its XML (nmt_cli/documents/office.py). A piece the output lacks (which the
inline layer does not let happen) is put at the end, so that nothing is lost.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field, replace


@dataclass
class Piece:
    """``kind``: "text" (bare ``text``), "run" (``node`` whose text is ``text``), "box"
    (``node`` holding ``children``) or "void" (``node`` kept whole)."""

    kind: str
    node: object = None
    text: str = ""
    children: list[Piece] = field(default_factory=list)
    space: bool = False  # a void that separates words (a tab, a line break)
    wrap: object = None  # the run a part of it came from: written back as a run of its own

    def words(self) -> str:
        """The text a reader sees in this piece (a run's, a box's children's)."""
        if self.kind in ("text", "run"):
            return self.text
        return "".join(p.words() for p in self.children)


def carrier(pieces: list[Piece]) -> tuple[str, list[Piece]]:
    """(the HTML the document layer translates, the runs, boxes and voids by their ``data-n``)."""
    registry: list[Piece] = []

    def written(parts: list[Piece]) -> str:
        out = []
        for p in parts:
            if p.kind == "text":
                out.append(html.escape(p.text, quote=False))
                continue
            registry.append(p)
            n = len(registry) - 1
            if p.kind == "void":
                out.append(f'<{"br" if p.space else "img"} data-n="{n}">')
                continue
            inner = html.escape(p.text, quote=False) if p.kind == "run" else written(p.children)
            body = inner.strip()
            if not body:
                out.append(f'<span data-n="{n}">{inner}</span>')
                continue
            # Spaces at a run's edges go outside its tag, where the layer keeps them between
            # the words (inside, two neighbouring runs could lose the space between them).
            at = inner.index(body)
            out.append(f'{inner[:at]}<span data-n="{n}">{body}</span>{inner[at + len(body) :]}')
        return "".join(out)

    return written(pieces), registry


_TOKEN = re.compile(r'<span data-n="(\d+)">|</span>|<(?:img|br) data-n="(\d+)"\s*/?>|[^<]+|<')


def pieces_of(translated: str, registry: list[Piece]) -> list[Piece]:
    """The pieces of ``translated`` (the document layer's output for a :func:`carrier`), in
    its order: a run's text is the words inside its span, bare words are "text" pieces."""
    top: list[Piece] = []
    stack: list[Piece | None] = [None]
    seen: set[int] = set()

    def add(piece: Piece) -> None:
        parent = stack[-1]
        (top if parent is None else parent.children).append(piece)

    for m in _TOKEN.finditer(translated):
        if m[1] is not None and int(m[1]) < len(registry):
            source = registry[int(m[1])]
            seen.add(int(m[1]))
            piece = replace(source, text="", children=[])
            add(piece)
            stack.append(piece)
        elif m[0] == "</span>":
            if len(stack) > 1:
                stack.pop()
        elif m[2] is not None and int(m[2]) < len(registry):
            seen.add(int(m[2]))
            add(registry[int(m[2])])
        else:
            add(Piece("text", text=html.unescape(m[0])))
    whole: list[int] = []  # unseen pieces put at the end as they were, with what they hold
    for n, source in enumerate(registry):
        if n not in seen and not any(_holds(registry, m, n) for m in whole):
            whole.append(n)
            top.append(replace(source, kind="void", children=[]))
    for piece in _all(top):
        if piece.kind == "run":  # a run holds only its words
            piece.text = "".join(c.words() for c in piece.children)
            piece.children = []
    return top


def _holds(registry: list[Piece], outer: int, inner: int) -> bool:
    return any(p is registry[inner] for p in _all(registry[outer].children))


def _all(pieces: list[Piece]):
    for p in pieces:
        yield p
        yield from _all(p.children)
