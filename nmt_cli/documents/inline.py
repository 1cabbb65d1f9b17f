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

from nmt_cli.documents.protect import Protector
from nmt_cli.documents.units import Unit, is_punct, target_units, word_units

SPACE = None  # a space in the output being assembled; adjacent ones collapse into one


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

    def restore(
        self,
        translation: str,
        alignment: Sequence[tuple[int, int]] | None,
        coverage: Sequence[tuple[int, int]] | None = None,
    ) -> str:
        """``translation`` (of :meth:`model_input`) with the tags and protected spans put back by
        ``alignment``: (source word, target word) pairs over the whitespace words of
        model_input() and of the translation, as Translation.alignment gives them (None: a
        monotone alignment is assumed); ``coverage``: pairs alike for the source words the
        alignment leaves out (Translation.coverage), where an element whose words it left out
        goes. HTML inlines give escaped HTML. Whitespace before and after the text is kept."""
        model, src = self._view()
        if not model:
            return self.markup()
        # the whitespace around the text, not a protected span's own (a <br> is "\n"): that is
        # written by the span's markup where the placement puts it
        first = min((a.start for a in self.protected), default=len(self.text))
        last = max((a.end for a in self.protected), default=0)
        lead = self.text[: min(len(self.text) - len(self.text.lstrip()), first)]
        trail = self.text[max(len(self.text.rstrip()), last) :]
        if not self.needs_alignment:
            return lead + self.escape(translation.strip()) + trail
        placed = Placement(self, src, translation, alignment, coverage)
        return lead + placed.render() + trail


def plain_inline(text: str, protector: Protector | None = None) -> Inline:
    """The Inline of plain text (format "text"): no tags, the protector's spans protected."""
    atoms = [Atom(s, e) for s, e in protector.find(text)] if protector is not None else []
    return Inline(text, [], atoms, html=False)


class Placement:
    """The elements and spans of one Inline placed over the units of one translation."""

    def __init__(self, inline: Inline, src: list[Unit], translation: str, alignment, coverage=None):
        self.inline, self.src = inline, src
        self.tgt = target_units(translation)
        self.kids = inline.children()
        n_src = src[-1].word + 1 if src else 0
        n_tgt = self.tgt[-1].word + 1 if self.tgt else 0
        if alignment is None:
            alignment = [(j * n_src // max(n_tgt, 1), j) for j in range(n_tgt)]
        self.maps = self._unit_maps(alignment, n_src, n_tgt)  # source unit -> target units
        # the same for the source words the alignment left out (an element's fallback)
        self.covering = self._unit_maps(coverage or [], n_src, n_tgt)
        self.span: dict[int, tuple[int, int]] = {}  # element -> target unit range [lo, hi)
        self.point: dict[tuple[str, int], int] = {}  # ("e"|"a", index) -> boundary position
        self._place(-1, 0, len(self.tgt))

    def _unit_maps(self, pairs, n_src: int, n_tgt: int) -> list[list[int]]:
        """For each source unit, the target units ``pairs`` (source word, target word) give it:
        those of each aligned word of its own kind (leading punctuation, core, trailing), else
        its core, else its first."""
        aligned: dict[int, list[int]] = {}
        for i, j in pairs:
            if 0 <= i < n_src and 0 <= j < n_tgt:
                aligned.setdefault(i, []).append(j)
        units_of_word: dict[int, list[int]] = {}
        for k, unit in enumerate(self.tgt):
            units_of_word.setdefault(unit.word, []).append(k)
        maps = []
        for unit in self.src:
            targets = []
            for j in aligned.get(unit.word, []):
                same = [k for k in units_of_word[j] if self.tgt[k].kind == unit.kind]
                core = [k for k in units_of_word[j] if self.tgt[k].kind == "core"]
                targets.extend(same or core or units_of_word[j][:1])
            maps.append(sorted(set(targets)))
        return maps

    def _covered(self, el: Element) -> list[int]:
        return [k for k, u in enumerate(self.src) if u.start < el.end and u.end > el.start]

    def _targets(self, el: Element) -> list[int]:
        """The target units of the words ``el`` covers: those the alignment chose, else (none
        chosen) those the coverage gives."""
        covered = self._covered(el) if el.start < el.end else []
        return sorted({t for u in covered for t in self.maps[u]}) or sorted(
            {t for u in covered for t in self.covering[u]}
        )

    def _run_fit(self, k: int, run: tuple[int, int]) -> tuple[int, int, int]:
        """How well element ``k`` fits in the target run [a, b): the targets of the elements
        inside it that the run holds (they can only be placed inside their parent), then its own
        targets it holds, then its length."""
        el = self.inline.elements[k]
        inner = {
            t
            for j, other in enumerate(self.inline.elements)
            if j != k
            and el.start <= other.start
            and other.end <= el.end
            and other.start < other.end
            for t in self._targets(other)
        }
        a, b = run
        return (
            sum(a <= t < b for t in inner),
            sum(a <= t < b for t in self._targets(el)),
            b - a,
        )

    def _anchor(self, start: int, end: int) -> int:
        """Where something found between source units goes: after the translation where it
        follows the source sentence's full stop (``.``, ``!``, ``?``), else after the targets of
        the unit before it, else before those of the unit after it, else next to the nearest
        aligned."""
        text = self.inline.text
        glue_left = start > 0 and not text[start - 1].isspace()
        glue_right = end < len(text) and not text[end].isspace()
        before = [k for k, u in enumerate(self.src) if u.end <= start]
        after = [k for k, u in enumerate(self.src) if u.start >= end]
        last = self.src[before[-1]] if before and not after else None
        if last is not None and last.kind == "trail" and any(c in last.text for c in ".!?…"):
            return len(self.tgt)  # after the sentence's full stop: after the translation
        glued_word = glue_right and not glue_left and after and self.src[after[0]].kind != "trail"
        left = [before[-1]] if before else []
        right = [after[0]] if after else []
        for k in (right + left if glued_word else left + right) + before[::-1] + after:
            if self.maps[k]:
                return _end_of_first_run(self.maps[k]) if k in before else self.maps[k][0]
        return 0 if not before else len(self.tgt)

    def _place(self, node: int, lo: int, hi: int) -> None:
        spanning, points = [], []
        for _, kind, k in self.kids[node]:
            if kind == "e":
                el = self.inline.elements[k]
                targets = self._targets(el)  # none chosen: where the coverage puts its words
                if targets:
                    want_lo = lo if el.continued else targets[0]
                    want_hi = hi if el.continues else targets[-1] + 1
                    spanning.append((k, want_lo, want_hi))
                    continue
                item = el
            else:
                item = self.inline.protected[k]
            points.append((kind, k, self._anchor(item.start, item.end)))
        taken: list[tuple[int, int]] = []

        def cut_first(s: tuple[int, int, int]) -> tuple:
            el = self.inline.elements[s[0]]
            return (not (el.continued or el.continues), s[2] - s[1], s[0])

        for k, want_lo, want_hi in sorted(spanning, key=cut_first):
            a, b = max(want_lo, lo), min(want_hi, hi)
            free = _free_runs(a, b, taken)
            if free:
                best = max(free, key=lambda run: self._run_fit(k, run))
                self.span[k] = best
                taken.append(best)
            else:
                el = self.inline.elements[k]
                points.append(("e", k, self._anchor(el.start, el.end)))
        for kind, k, pos in points:
            item = self.inline.elements[k] if kind == "e" else self.inline.protected[k]
            end = item.end
            if kind == "e" and (item.continued or item.continues):
                self.point[(kind, k)] = lo if item.continued else hi
                continue
            pos = self._clamp(pos, lo, hi, taken)
            glued = end < len(self.inline.text) and not self.inline.text[end].isspace()
            if not glued and self._inside_word(pos):  # free-standing: not inside a word
                for moved in (self._word_edge(pos, 1), self._word_edge(pos, -1)):
                    moved = self._clamp(moved, lo, hi, taken)
                    if not self._inside_word(moved):
                        pos = moved
                        break
            self.point[(kind, k)] = pos
        for k, (a, b) in list(self.span.items()):
            if self.inline.elements[k].parent == node:
                self._place(k, a, b)

    def _inside_word(self, pos: int) -> bool:
        return 0 < pos < len(self.tgt) and self.tgt[pos].word == self.tgt[pos - 1].word

    def _word_edge(self, pos: int, step: int) -> int:
        """The end (step 1) or the start (step -1) of the target word around boundary ``pos``."""
        while self._inside_word(pos):
            pos += step
        return pos

    @staticmethod
    def _clamp(pos: int, lo: int, hi: int, taken: list[tuple[int, int]]) -> int:
        """``pos`` moved into [lo, hi] and out of the inside of the ranges ``taken``."""
        pos = min(max(pos, lo), hi)
        for a, b in taken:
            if a < pos < b:
                pos = a if pos - a <= b - pos else b
        return pos

    # -- the output ------------------------------------------------------------------------------

    def _tokens(self, node: int, lo: int, hi: int, out: list) -> None:
        """The output in order: ("u", target unit), ("o"|"c", markup), ("p", (kind, index))."""
        items = []
        for key, kind, k in self.kids[node]:
            if kind == "e" and k in self.span:
                items.append((self.span[k][0], key, "span", k))
            else:
                items.append((self.point[(kind, k)], key, kind, k))
        items.sort()
        cursor = lo
        for pos, _, kind, k in items:
            while cursor < pos:
                out.append(("u", cursor))
                cursor += 1
            if kind == "span":
                el = self.inline.elements[k]
                a, b = self.span[k]
                out.append(("o", el.open_markup))
                self._tokens(k, a, b, out)
                out.append(("c", el.close_markup))
                cursor = max(cursor, b)
            else:
                out.append(("p", (kind, k)))
        while cursor < hi:
            out.append(("u", cursor))
            cursor += 1

    def _point(self, kind: str, k: int) -> tuple[str, int, int, bool]:
        """The markup of a placed span or element, its source range, and whether it shows any
        text. An element whose words found no place in the translation is written empty, with
        the spans and elements inside it."""
        inline = self.inline
        if kind == "a":
            atom = inline.protected[k]
            return inline.atom_markup(atom), atom.start, atom.end, atom.end > atom.start
        el = inline.elements[k]
        return (
            self._collapsed(k),
            el.start,
            el.end,
            any(
                el.start <= a.start and a.end <= el.end and a.end > a.start
                for a in inline.protected
            ),
        )

    def _collapsed(self, k: int) -> str:
        inline = self.inline
        el = inline.elements[k]
        if not self._covered(el):
            inner = inline.source_markup(k, el.start, el.end, self.kids)
            return el.open_markup + inner + el.close_markup
        parts = []
        for _, kind, child in self.kids[k]:
            if kind == "a":
                parts.append(inline.atom_markup(inline.protected[child]))
            else:
                parts.append(self._collapsed(child))
        return el.open_markup + " ".join(p for p in parts if p) + el.close_markup

    def _flush(self, group: list, pieces: list, boundary: bool) -> None:
        """The tags and spans between two target units, with the spaces they need: a span keeps
        the whitespace it had on either side; between two words one space at least, before the
        tags that open there."""
        text = self.inline.text
        out: list = []
        spaced = False
        last_point = None
        for kind, item in group:
            if kind == "p":
                markup, start, end, shows = self._point(*item)
                if shows and (start == 0 or text[start - 1].isspace()):
                    out.append(SPACE)
                    spaced = True
                out.append(markup if shows else ("p", markup))
                last_point = len(out) - 1 if shows else last_point
                if shows and (end == len(text) or text[end].isspace()):
                    out.append(SPACE)
                    spaced = True
            else:
                out.append((kind, item))
        if boundary and not spaced:
            at = len(out)
            while at > 0 and isinstance(out[at - 1], tuple) and out[at - 1][0] == "o":
                at -= 1
            out.insert(at, SPACE)
        elif boundary and last_point is not None and SPACE not in out[last_point:]:
            at = len(out)  # a span glued to punctuation the translation put elsewhere
            while at > last_point + 1 and isinstance(out[at - 1], tuple) and out[at - 1][0] == "o":
                at -= 1
            out.insert(at, SPACE)
        pieces.extend(out)
        group.clear()

    def render(self) -> str:
        tokens: list = []
        self._tokens(-1, 0, len(self.tgt), tokens)
        pieces: list = []  # text, SPACE, and ("o"|"c", tag markup)
        group: list = []
        previous = None
        for kind, item in tokens:
            if kind != "u":
                group.append((kind, item))
                continue
            unit = self.tgt[item]
            self._flush(group, pieces, previous is not None and unit.word != previous)
            pieces.append(self.inline.escape(unit.text))
            previous = unit.word
        self._flush(group, pieces, False)
        return _join(pieces)


def _end_of_first_run(targets: list[int]) -> int:
    """The boundary after the first run of consecutive units in sorted ``targets``."""
    end = targets[0] + 1
    for t in targets[1:]:
        if t != end:
            break
        end += 1
    return end


def _free_runs(a: int, b: int, taken: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of [a, b) no interval of ``taken`` covers."""
    runs, cursor = [], a
    for x, y in sorted(taken):
        if y <= cursor or x >= b:
            continue
        if x > cursor:
            runs.append((cursor, x))
        cursor = max(cursor, y)
    if cursor < b:
        runs.append((cursor, b))
    return runs


def _join(pieces: list) -> str:
    """The output string: spaces with only tags between them collapse into the first, and none
    is kept before the first or after the last text."""
    out: list[str] = []
    seen_text = False
    last_space = None  # index in out of a space no text has followed yet
    for piece in pieces:
        if piece is SPACE:
            if seen_text and last_space is None:
                last_space = len(out)
                out.append(" ")
        elif isinstance(piece, tuple):
            out.append(piece[1])
        elif piece:
            out.append(piece)
            seen_text, last_space = True, None
    if last_space is not None:
        del out[last_space]
    return "".join(out)
