"""Flowing text with inline tags and protected spans, in and out of a translation.

An :class:`Inline` is the plain text a reader sees, the inline elements over it (character
ranges, properly nested) and the protected spans in it (placeholders, URLs, characters the
vocabulary lacks, inline ``<code>``: nmt_cli/documents/protect.py). The model is given the text
alone, with
the protected spans left out (none of the trained models copies a placeholder symbol reliably:
docs/markup.md#what-the-models-copy). Its translation gets the elements and the spans back by the
word alignment the model computed (attention as a soft alignment, Bahdanau et al. 2015, eq. 6,
made hard by its argmax: nmt_cli/translation/words.py):

- every word is cut into units, leading punctuation, core, trailing punctuation, so that a tag
  closed before a full stop stays before the translation's full stop;
- an element covers the target units aligned to the source units it covered, made one contiguous
  range, inside its parent's range and disjoint from its siblings' (so the output nests properly
  and every tag comes out exactly once);
- a protected span (and an element with no words in it, written as it was) goes right after the
  target units of the source unit before it (or before those of the unit after it), inside its
  parent element, with the spacing it had in the source.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from nmt_cli.documents.placement import Placement, Unit, is_punct, word_units
from nmt_cli.documents.protect import Protector


@dataclass
class Element:
    """An inline element over text[start:end] (start == end: a void or empty one). ``open`` and
    ``close`` are its markup as written back; ``parent`` the index of the enclosing element in
    the Inline's list (-1: none)."""

    start: int
    end: int
    open: str
    close: str = ""
    parent: int = -1
    continued: bool = False  # cut at its start: the slice before opened it
    continues: bool = False  # cut at its end: the slice after closes it

    @property
    def open_markup(self) -> str:
        return "" if self.continued else self.open

    @property
    def close_markup(self) -> str:
        return "" if self.continues else self.close


@dataclass
class Atom:
    """A protected span text[start:end], written back as ``raw`` when given (the markup of an
    inline ``<code>`` or ``translate="no"`` element), else as its text."""

    start: int
    end: int
    raw: str | None = None


@dataclass
class Inline:
    """One run of flowing text with inline tags and protected spans (see the module docstring).
    ``html``: the text came from HTML, so what :meth:`restore` gives is escaped HTML."""

    text: str
    elements: list[Element] = field(default_factory=list)
    protected: list[Atom] = field(default_factory=list)
    html: bool = False

    # -- the source side -------------------------------------------------------------------------

    def _view(self) -> tuple[str, list[Unit]]:
        """What the model reads, and its units with the text ranges they came from."""
        cached = getattr(self, "_cached_view", None)
        if cached is not None:
            return cached
        hidden = [False] * len(self.text)
        for atom in self.protected:
            for k in range(atom.start, atom.end):
                hidden[k] = True
        chars: list[tuple[str, int]] = []  # (char, index in text), whitespace collapsed
        gap = False  # a protected span was left out since the last kept character
        for k, char in enumerate(self.text):
            if hidden[k] and not char.isspace():  # a <br> is hidden whitespace
                gap = True
                continue
            if char.isspace():
                if chars and chars[-1][0] != " ":
                    chars.append((" ", k))
                gap = False
                continue
            if gap and chars and chars[-1][0] == " " and is_punct(char) and char not in "([{«¿¡":
                chars.pop()  # "Hello {name}, you" reads "Hello, you"
            chars.append((char, k))
            gap = False
        while chars and chars[-1][0] == " ":
            chars.pop()
        model = "".join(c for c, _ in chars)
        units: list[Unit] = []
        pos = 0
        for w, word in enumerate(model.split(" ") if model else []):
            for kind, text in word_units(word):
                first, last = chars[pos][1], chars[pos + len(text) - 1][1]
                units.append(Unit(w, kind, text, first, last + 1))
                pos += len(text)
            pos += 1  # the space
        self._cached_view = (model, units)
        return self._cached_view

    def model_input(self) -> str:
        """The text the model is given: the Inline's text without its protected spans, whitespace
        collapsed."""
        return self._view()[0]

    @property
    def needs_alignment(self) -> bool:
        """Whether it has tags or protected spans to put back into a translation."""
        return bool(self.elements or self.protected)

    def slice(self, start: int, end: int, *, closed: bool = False) -> Inline:
        """The Inline of text[start:end]. An element crossing a cut is opened by the slice it
        starts in and closed by the one it ends in, so that the restored slices of a partition
        of the text, joined in order, give every tag exactly once, properly nested; a void
        element at a cut belongs to the slice after it. ``closed``: close such elements at the
        cut and reopen them after it instead, so that each slice restores well-formed alone."""
        n = len(self.text)
        start, end = max(0, min(start, n)), max(0, min(end, n))
        end = max(start, end)
        keep: dict[int, int] = {}
        elements: list[Element] = []
        for k, el in enumerate(self.elements):
            if el.start < el.end:
                lo, hi = max(el.start, start), min(el.end, end)
                if lo >= hi:
                    continue
            elif start <= el.start < end or el.start == end == n:
                lo = hi = el.start
            else:
                continue
            parent = el.parent
            while parent >= 0 and parent not in keep:
                parent = self.elements[parent].parent
            keep[k] = len(elements)
            cut = {"continued": el.continued or (el.start < start and not closed)}
            cut["continues"] = el.continues or (el.end > end and el.start < el.end and not closed)
            elements.append(
                replace(el, start=lo - start, end=hi - start, parent=keep.get(parent, -1), **cut)
            )
        atoms = []
        for atom in self.protected:
            lo, hi = max(atom.start, start), min(atom.end, end)
            if lo < hi:
                raw = atom.raw if atom.raw is None or lo == atom.start else ""
                atoms.append(Atom(lo - start, hi - start, raw))
        return Inline(self.text[start:end], elements, atoms, self.html)

    # -- writing back ----------------------------------------------------------------------------

    def escape(self, text: str) -> str:
        return html.escape(text, quote=False) if self.html else text

    def atom_markup(self, atom: Atom) -> str:
        return atom.raw if atom.raw is not None else self.escape(self.text[atom.start : atom.end])

    def children(self) -> dict[int, list[tuple[tuple, str, int]]]:
        """Each element's (and the top level's, -1) children in source order: (sort key, kind,
        index) with kind "e" (element) or "a" (protected span)."""
        kids: dict[int, list[tuple[tuple, str, int]]] = {-1: []}
        for k, el in enumerate(self.elements):
            kids.setdefault(k, [])
            kids.setdefault(el.parent, []).append(((el.start, 0, k), "e", k))
        for k, atom in enumerate(self.protected):
            owner = -1
            for e, el in enumerate(self.elements):
                if el.start <= atom.start and atom.end <= el.end and el.start < el.end:
                    owner = e  # the last one in document order is the innermost
            kids[owner].append(((atom.start, 1, k), "a", k))
        for value in kids.values():
            value.sort()
        return kids

    def source_markup(self, node: int, lo: int, hi: int, kids) -> str:
        """text[lo:hi] as written, with the elements and spans inside ``node``."""
        out, cursor = [], lo
        for _, kind, k in kids[node]:
            item = self.elements[k] if kind == "e" else self.protected[k]
            out.append(self.escape(self.text[cursor : item.start]))
            if kind == "e":
                out.append(item.open_markup)
                out.append(self.source_markup(k, item.start, item.end, kids))
                out.append(item.close_markup)
            else:
                out.append(self.atom_markup(item))
            cursor = max(cursor, item.end)
        out.append(self.escape(self.text[cursor:hi]))
        return "".join(out)

    def markup(self) -> str:
        """The Inline written back untranslated: its text with its tags and spans, as given."""
        return self.source_markup(-1, 0, len(self.text), self.children())

    def restore(self, translation: str, alignment: Sequence[tuple[int, int]] | None) -> str:
        """``translation`` (of :meth:`model_input`) with the tags and protected spans put back by
        ``alignment``: (source word, target word) pairs over the whitespace words of
        model_input() and of the translation, as Translation.alignment gives them (None: a
        monotone alignment is assumed). HTML inlines give escaped HTML. Whitespace before and
        after the text is kept."""
        model, src = self._view()
        if not model:
            return self.markup()
        lead = self.text[: len(self.text) - len(self.text.lstrip())]
        trail = self.text[len(self.text.rstrip()) :]
        if not self.needs_alignment:
            return lead + self.escape(translation.strip()) + trail
        return lead + Placement(self, src, translation, alignment).render() + trail


def plain_inline(text: str, protector: Protector | None = None) -> Inline:
    """The Inline of plain text (format "text"): no tags, the protector's spans protected."""
    atoms = [Atom(s, e) for s, e in protector.find(text)] if protector is not None else []
    return Inline(text, [], atoms, html=False)
