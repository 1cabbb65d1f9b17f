"""HTML documents into translatable runs and markup written back as it was.

:func:`parse_html` reads a document with the standard library's lenient HTML parser
(html.parser) and gives, in order, strings (markup copied from the document byte for byte) and
:class:`~nmt_cli.documents.inline.Inline` runs (a block's flowing text with its inline elements,
for the document layer to cut into sentences). The rules, in docs/markup.md#html:

- block elements (p, div, li, h1-h6, td, th, title, ... : every element not listed as inline)
  end a run; their tags are copied verbatim;
- inline elements (b, i, em, strong, a, span, u, sup, sub, small, mark, ...) stay in the run as
  Inline elements, written back with their attributes (re-quoted) around the words they cover;
  br, img and wbr are void ones;
- ``<code>``, ``<kbd>``, ``<samp>`` and inline elements with ``translate="no"`` or
  ``class="notranslate"`` become protected spans of the run, written back verbatim; ``<pre>``,
  ``<script>``, ``<style>``, ``<textarea>``, ``<svg>``, ``<math>``, ``<template>`` and block
  elements marked so are copied verbatim as strings, as are comments, the doctype and
  processing instructions;
- attribute values (alt, title, ...) are copied as they are, not translated;
- entities are decoded in the run's text (what the model reads) and escaped again on output;
- a run with nothing to translate (whitespace, only protected spans) is copied verbatim;
- malformed markup gets what the parser makes of it: every character of the document is either
  copied or in a run, stray end tags are dropped, unclosed inline elements are closed at the end
  of their run;
- inline elements nest at most :data:`MAX_INLINE_DEPTH` deep in a run (the tags are put back
  by walking the nesting); a document nested deeper is refused with one line
  (:class:`MarkupTooDeep`), never cut.
"""

from __future__ import annotations

import html
from html.parser import HTMLParser

from nmt_cli.documents.inline import Atom, Element, Inline
from nmt_cli.documents.protect import Protector
from nmt_cli.runtime.errors import UserError

MAX_INLINE_DEPTH = 100  # far past what pages nest (b, i, a, span: a handful), far below recursion


class MarkupTooDeep(UserError):
    """An HTML document whose inline elements nest deeper than MAX_INLINE_DEPTH."""


INLINE = frozenset(
    [
        "a",
        "abbr",
        "acronym",
        "b",
        "bdi",
        "bdo",
        "big",
        "cite",
        "data",
        "del",
        "dfn",
        "em",
        "font",
        "i",
        "ins",
        "label",
        "mark",
        "q",
        "rp",
        "rt",
        "ruby",
        "s",
        "small",
        "span",
        "strike",
        "strong",
        "sub",
        "sup",
        "time",
        "tt",
        "u",
        "var",
    ]
)
VOID_INLINE = frozenset({"br", "img", "wbr"})
VERBATIM_INLINE = frozenset({"code", "kbd", "samp"})
VERBATIM_BLOCK = frozenset({"pre", "script", "style", "textarea", "svg", "math", "template"})
VOID = frozenset(
    [
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
        "keygen",
    ]
)


def _no_translate(attrs: list[tuple[str, str | None]]) -> bool:
    for name, value in attrs:
        if name == "translate" and (value or "").strip().lower() == "no":
            return True
        if name == "class" and "notranslate" in (value or "").split():
            return True
    return False


def _start_tag(tag: str, attrs: list[tuple[str, str | None]], close: bool = False) -> str:
    """A start tag written back well-formed: every attribute kept, its value double-quoted."""
    parts = [tag]
    for name, value in attrs:
        parts.append(name if value is None else f'{name}="{html.escape(value, quote=True)}"')
    return "<" + " ".join(parts) + (" />" if close else ">")


class _Events(HTMLParser):
    """The parser's events, each with the offset in the document where it starts."""

    def __init__(self, document: str):
        super().__init__(convert_charrefs=True)
        self.line_starts = [0]
        for k, char in enumerate(document):
            if char == "\n":
                self.line_starts.append(k + 1)
        self.events: list[tuple] = []

    def _offset(self) -> int:
        line, column = self.getpos()
        return self.line_starts[line - 1] + column

    def handle_starttag(self, tag, attrs):
        self.events.append(("start", self._offset(), tag, attrs))

    def handle_startendtag(self, tag, attrs):
        self.events.append(("startend", self._offset(), tag, attrs))

    def handle_endtag(self, tag):
        self.events.append(("end", self._offset(), tag, None))

    def handle_data(self, data):
        self.events.append(("data", self._offset(), data, None))

    def handle_comment(self, data):
        self.events.append(("other", self._offset(), None, None))

    def handle_decl(self, decl):
        self.events.append(("decl", self._offset(), None, None))

    def handle_pi(self, data):
        self.events.append(("other", self._offset(), None, None))

    def unknown_decl(self, data):
        self.events.append(("other", self._offset(), None, None))


class _Run:
    """The Inline being gathered, and where it started in the document."""

    def __init__(self, start: int):
        self.start = start
        self.text: list[str] = []
        self.length = 0
        self.elements: list[Element] = []
        self.atoms: list[Atom] = []
        self.open: list[tuple[str, int]] = []  # (tag, element index) of unclosed elements
        self.breaks: list[int] = [0]  # where protector matches may not cross (tags, spans)

    def add_text(self, text: str) -> None:
        self.text.append(text)
        self.length += len(text)

    def parent(self) -> int:
        return self.open[-1][1] if self.open else -1

    def add_element(self, open_markup: str, close: str = "", void: bool = True, tag: str = ""):
        self.breaks.append(self.length)
        self.elements.append(Element(self.length, self.length, open_markup, close, self.parent()))
        if not void:
            if len(self.open) >= MAX_INLINE_DEPTH:
                raise MarkupTooDeep(
                    f"the HTML nests inline elements more than {MAX_INLINE_DEPTH} deep "
                    f"(a <{tag[:20]}> inside {len(self.open)} others)"
                )
            self.open.append((tag, len(self.elements) - 1))

    def close(self, tag: str) -> None:
        if not any(t == tag for t, _ in self.open):
            return  # a stray end tag: dropped, as browsers do
        while self.open:
            name, k = self.open.pop()
            self.elements[k].end = self.length
            if name == tag:
                break
        self.breaks.append(self.length)

    def add_atom(self, text: str, raw: str) -> None:
        if not text:
            self.add_element(raw)
            return
        self.breaks.append(self.length)
        self.atoms.append(Atom(self.length, self.length + len(text), raw))
        self.add_text(text)
        self.breaks.append(self.length)

    def empty(self) -> bool:
        return not self.length and not self.elements

    def finish(self, protector: Protector | None) -> Inline:
        while self.open:
            _, k = self.open.pop()
            self.elements[k].end = self.length
        text = "".join(self.text)
        atoms = list(self.atoms)
        if protector is not None:
            cuts = sorted(set(self.breaks + [len(text)]))
            raw_ranges = [(a.start, a.end) for a in self.atoms]
            for a, b in zip(cuts, cuts[1:]):
                if any(s <= a and b <= e for s, e in raw_ranges):
                    continue
                atoms.extend(Atom(a + s, a + e) for s, e in protector.find(text[a:b]))
            atoms.sort(key=lambda atom: atom.start)
        return Inline(text, self.elements, atoms, html=True)


def _matching_end(events: list[tuple], k: int) -> int:
    """The index of the event after the end tag closing the element started at events[k]
    (the end of the list when it is never closed)."""
    tag, depth = events[k][2], 0
    for j in range(k, len(events)):
        kind, _, name, _ = events[j]
        if kind == "start" and name == tag:
            depth += 1
        elif kind == "end" and name == tag:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(events)


def parse_html(document: str, protector: Protector | None = None) -> list[str | Inline]:
    """The document as markup strings to copy and Inline runs to translate, in order; joined
    back (strings as they are, each Inline as its :meth:`~Inline.markup`) they give the
    document again, up to the rules in the module docstring."""
    parser = _Events(document)
    parser.feed(document)
    parser.close()
    events = parser.events
    offsets = [e[1] for e in events] + [len(document)]
    for k in range(1, len(offsets)):  # the parser reports positions in order; keep them so
        offsets[k] = max(offsets[k], offsets[k - 1])
    out: list[str | Inline] = []
    if events and offsets[0] > 0:
        out.append(document[: offsets[0]])
    run: _Run | None = None

    def raw(a: int, b: int) -> str:
        return document[offsets[a] : offsets[b]]

    def flush() -> None:
        nonlocal run
        if run is not None and not run.empty():
            inline = run.finish(protector)
            out.append(inline if inline.model_input() else raw_of_run)
        run = None

    raw_of_run = ""
    k = 0
    while k < len(events):
        kind, _, tag, attrs = events[k]
        if kind == "data":
            if run is None:
                if not tag.strip():
                    out.append(raw(k, k + 1))
                    k += 1
                    continue
                run, run_from = _Run(offsets[k]), k
            run.add_text(tag)
            k += 1
        elif kind in ("start", "startend") and (
            tag in VERBATIM_INLINE or tag in VERBATIM_BLOCK or _no_translate(attrs)
        ):
            end = k + 1 if kind == "startend" or tag in VOID else _matching_end(events, k)
            markup = raw(k, end)
            inline_level = tag in VERBATIM_INLINE or tag in INLINE or tag in VOID_INLINE
            if inline_level:
                if run is None:
                    run, run_from = _Run(offsets[k]), k
                inner = "".join(e[2] for e in events[k + 1 : end] if e[0] == "data")
                run.add_atom(inner, markup)
            else:
                raw_of_run = raw(run_from, k) if run is not None else ""
                flush()
                out.append(markup)
            k = end
        elif kind in ("start", "startend") and tag == "br":
            if run is None:
                run, run_from = _Run(offsets[k]), k
            run.add_atom("\n", _start_tag(tag, attrs, kind == "startend"))  # a line break
            k += 1
        elif kind in ("start", "startend") and (tag in INLINE or tag in VOID_INLINE):
            if run is None:
                run, run_from = _Run(offsets[k]), k
            void = kind == "startend" or tag in VOID_INLINE
            close = "" if void else f"</{tag}>"
            run.add_element(_start_tag(tag, attrs, kind == "startend"), close, void, tag)
            k += 1
        elif kind == "end" and (tag in INLINE or tag in VOID_INLINE or tag in VERBATIM_INLINE):
            if run is not None:
                run.close(tag)  # a stray one is dropped
            else:
                out.append(raw(k, k + 1))
            k += 1
        elif kind == "other" and run is not None:
            run.add_element(raw(k, k + 1))
            k += 1
        else:  # block tags, end tags of void or unknown inline ones, comments, the doctype
            raw_of_run = raw(run_from, k) if run is not None else ""
            flush()
            out.append(raw(k, k + 1))
            k += 1
    raw_of_run = raw(run_from, len(events)) if run is not None else ""
    flush()
    return out
