"""Where an Inline's elements and protected spans go in its translation
(nmt_cli/documents/inline.py).

Words are cut into units (leading punctuation, core, trailing punctuation); each source unit
maps to the target units its word is aligned to (attention made hard by its argmax,
nmt_cli/translation/words.py); an element then covers one contiguous range of target units inside
its parent's and disjoint from its siblings', and a protected span goes next to the targets of its
neighbouring source unit.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nmt_cli.documents.inline import Element, Inline

SPACE = None  # a space in the output being assembled; adjacent ones collapse into one


def is_punct(char: str) -> bool:
    return unicodedata.category(char)[0] == "P"


def word_units(word: str) -> list[tuple[str, str]]:
    """(kind, text) of a word's units: leading punctuation, core, trailing punctuation."""
    i, j = 0, len(word)
    while i < j and is_punct(word[i]):
        i += 1
    while j > i and is_punct(word[j - 1]):
        j -= 1
    if i == j:
        return [("core", word)]
    parts = [("lead", word[:i]), ("core", word[i:j]), ("trail", word[j:])]
    return [(kind, text) for kind, text in parts if text]


@dataclass
class Unit:
    word: int
    kind: str
    text: str
    start: int = 0  # source units: the range of the Inline's text they came from
    end: int = 0


def target_units(translation: str) -> list[Unit]:
    return [
        Unit(w, kind, text)
        for w, word in enumerate(translation.split())
        for kind, text in word_units(word)
    ]


class Placement:
    """The elements and spans of one Inline placed over the units of one translation."""

    def __init__(self, inline: Inline, src: list[Unit], translation: str, alignment):
        self.inline, self.src = inline, src
        self.tgt = target_units(translation)
        self.kids = inline.children()
        n_src = src[-1].word + 1 if src else 0
        n_tgt = self.tgt[-1].word + 1 if self.tgt else 0
        if alignment is None:
            alignment = [(j * n_src // max(n_tgt, 1), j) for j in range(n_tgt)]
        aligned: dict[int, list[int]] = {}
        for i, j in alignment:
            if 0 <= i < n_src and 0 <= j < n_tgt:
                aligned.setdefault(i, []).append(j)
        units_of_word: dict[int, list[int]] = {}
        for k, unit in enumerate(self.tgt):
            units_of_word.setdefault(unit.word, []).append(k)
        self.maps: list[list[int]] = []  # source unit -> target units
        for unit in src:
            targets = []
            for j in aligned.get(unit.word, []):
                same = [k for k in units_of_word[j] if self.tgt[k].kind == unit.kind]
                core = [k for k in units_of_word[j] if self.tgt[k].kind == "core"]
                targets.extend(same or core or units_of_word[j][:1])
            self.maps.append(sorted(set(targets)))
        self.span: dict[int, tuple[int, int]] = {}  # element -> target unit range [lo, hi)
        self.point: dict[tuple[str, int], int] = {}  # ("e"|"a", index) -> boundary position
        self._place(-1, 0, len(self.tgt))

    def _covered(self, el: Element) -> list[int]:
        return [k for k, u in enumerate(self.src) if u.start < el.end and u.end > el.start]

    def _anchor(self, start: int, end: int) -> int:
        """Where something found between source units goes: after the targets of the unit
        before it, else before those of the unit after it, else next to the nearest aligned."""
        text = self.inline.text
        glue_left = start > 0 and not text[start - 1].isspace()
        glue_right = end < len(text) and not text[end].isspace()
        before = [k for k, u in enumerate(self.src) if u.end <= start]
        after = [k for k, u in enumerate(self.src) if u.start >= end]
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
                covered = self._covered(el) if el.start < el.end else []
                targets = sorted({t for u in covered for t in self.maps[u]})
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
                best = max(free, key=lambda r: r[1] - r[0])
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
