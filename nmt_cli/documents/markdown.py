"""Markdown (.md) translated with its syntax, code and URLs untouched.

markdown-it-py (CommonMark, with tables and strikethrough) finds the blocks; only the inline
text of paragraphs, headings and table cells is translated, every other line (code blocks and
fences, HTML blocks, link reference definitions, rules, blank lines, a YAML front matter) is
copied as it was, and so is everything around that text on its lines (``#``, ``>``, list
markers, indentation, ``|``). Inside the text, :func:`inline_carrier` makes an HTML document
for the document layer: emphasis (``*``, ``_``, ``**``, ``__``, ``~~``) and link text become
inline elements whose words the alignment follows, each written back with the markers it had
(a link keeps its destination and title); inline code, images, autolinks, inline HTML and
backslash escapes are protected spans written back verbatim, and bare URLs are kept by the
layer's built-in patterns. A paragraph's translation is laid out again on as many lines as it
had (fewer where it has fewer words), each with the prefix its line had, never starting a line
with a marker that would begin another block.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from markdown_it import MarkdownIt

from nmt_cli.documents.markup import MAX_INLINE_DEPTH, MarkupTooDeep
from nmt_cli.documents.office import Translate
from nmt_cli.documents.subtitles import laid_out
from nmt_cli.runtime.errors import UserError

BATCH = 256
WORK_PER_CHARACTER = 256  # steps of searching for closing markers a character of inline text
WORK_AT_LEAST = 100_000  # and at least these, for short texts
_PUNCT = set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_AUTOLINK = re.compile(r"<[A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*>|<[^\s<>@]+@[^\s<>@]+>")
_HTML_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>|<!--.*?-->", re.DOTALL)
_BLOCK_START = re.compile(r"^(?:[-+*>#=|<]|\d+[.)]|`{3}|~{3})")
_OUTPUT = re.compile(r'<span data-n="(\d+)">|</span>|<code data-n="(\d+)">[^<]*</code>|[^<]+|<')


def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table").enable("strikethrough")


class _Carrier:
    """The HTML of one inline text: ``markers[k]`` the (opening, closing) markdown of element k,
    or (verbatim text, None) of protected span k.

    Its reading is bounded, for text from anywhere: emphasis and links nest at most
    MAX_INLINE_DEPTH deep (as HTML's inline elements do), and the searches for closing markers
    take at most WORK_PER_CHARACTER steps a character of the text; past either, a UserError."""

    def __init__(self, source: str):
        self.source = source
        self.markers: list[tuple[str, str | None]] = []
        self.depth = 0
        self.work_left = WORK_PER_CHARACTER * len(source) + WORK_AT_LEAST
        # where the run of equal characters through each position ends
        self.run_end = [0] * len(source)
        end = len(source)
        for k in range(len(source) - 1, -1, -1):
            if k + 1 < len(source) and source[k + 1] != source[k]:
                end = k + 1
            self.run_end[k] = end

    def atom(self, raw: str) -> str:
        self.markers.append((raw, None))
        return f'<code data-n="{len(self.markers) - 1}">{html.escape(raw, quote=False)}</code>'

    def element(self, opening: str, closing: str, inner: str) -> str:
        self.markers.append((opening, closing))
        return f'<span data-n="{len(self.markers) - 1}">{inner}</span>'

    def scan(self, i: int, j: int) -> str:
        """The HTML of source[i:j]."""
        if self.depth >= MAX_INLINE_DEPTH:
            raise MarkupTooDeep(
                f"the markdown nests emphasis and links more than {MAX_INLINE_DEPTH} deep"
            )
        self.depth += 1
        s, out, text = self.source, [], []
        k = i
        while k < j:
            found = self._construct(k, j)
            if found is None:
                text.append(s[k])
                k += 1
                continue
            out.append(html.escape("".join(text), quote=False))
            text = []
            markup, k = found
            out.append(markup)
        out.append(html.escape("".join(text), quote=False))
        self.depth -= 1
        return "".join(out)

    def spend(self, steps: int) -> None:
        """Count ``steps`` of searching against the text's budget."""
        self.work_left -= steps
        if self.work_left < 0:
            raise UserError(
                f"the markdown's inline text of {len(self.source)} characters has too many "
                "emphasis or link markers that open and never close to be read"
            )

    def run_length(self, k: int, j: int) -> int:
        """How many characters equal to source[k] follow from k, within source[:j]."""
        return min(self.run_end[k], j) - k

    def _construct(self, k: int, j: int) -> tuple[str, int] | None:
        """(HTML, end) of the construct starting at source[k] within source[:j], or None."""
        s, c = self.source, self.source[k]
        if c == "\\" and k + 1 < j and s[k + 1] in _PUNCT:
            return self.atom(s[k : k + 2]), k + 2
        if c == "`":
            end = _code_span_end(s, k, j)
            self.spend((end or j) - k)
            return (self.atom(s[k:end]), end) if end else None
        if c == "!" and k + 1 < j and s[k + 1] == "[":
            link = _link(s, k + 1, j, self.spend)
            return (self.atom(s[k : link[1]]), link[1]) if link else None
        if c == "[":
            link = _link(s, k, j, self.spend)
            if link is None:
                return None
            label_end, end = link
            inner = self.scan(k + 1, label_end)
            return self.element("[", s[label_end:end], inner), end
        if c == "<":
            m = _AUTOLINK.match(s, k, j) or _HTML_TAG.match(s, k, j)
            return (self.atom(m[0]), m.end()) if m else None
        if c in "*_~":
            return self._emphasis(k, j)
        return None

    def _emphasis(self, k: int, j: int) -> tuple[str, int] | None:
        s = self.source
        run = self.run_length(k, j)
        if s[k] == "~" and run != 2:
            return None
        marker = s[k] * min(run, 2)
        start = k + len(marker)
        if start >= j or s[start].isspace() or (s[k] == "_" and k > 0 and s[k - 1].isalnum()):
            return None
        at, steps = start, 0
        while at < j:
            steps += 1
            if s[at] == "`":
                at = _code_span_end(s, at, j) or at + 1
                continue
            if s[at] == "\\":
                at += 2
                continue
            if s[at] == s[k]:  # a run of the marker's character: a closer if just as long
                length = self.run_length(at, j)
                after = at + length
                closes = length == len(marker) and not s[at - 1].isspace()
                if s[k] == "_" and after < len(s) and s[after].isalnum():
                    closes = False
                if closes and at > start:
                    self.spend(steps)
                    return self.element(marker, marker, self.scan(start, at)), after
                at = after
                continue
            at += 1
        self.spend(steps)
        return None


def _run_length(s: str, k: int, j: int) -> int:
    n = k
    while n < j and s[n] == s[k]:
        n += 1
    return n - k


def _code_span_end(s: str, k: int, j: int) -> int:
    """The end of the code span opened at s[k] (0 where it is not closed)."""
    n = _run_length(s, k, j)
    at = k + n
    while at < j:
        if s[at] == "`":
            m = _run_length(s, at, j)
            if m == n:
                return at + m
            at += m
        else:
            at += 1
    return 0


def _link(s: str, k: int, j: int, spend) -> tuple[int, int] | None:
    """(end of the label, end of the link) of ``[label](destination "title")`` or
    ``[label][reference]`` starting at s[k]; None where none is. ``spend`` is told the steps
    the search took."""
    found = _link_ends(s, k, j)
    spend((found[1] if found else j) - k)
    return found


def _link_ends(s: str, k: int, j: int) -> tuple[int, int] | None:
    depth, at = 0, k
    while at < j:
        c = s[at]
        if c == "\\":
            at += 2
            continue
        if c == "`":
            at = _code_span_end(s, at, j) or at + 1
            continue
        depth += c == "["
        depth -= c == "]"
        if depth == 0:
            break
        at += 1
    if depth or at >= j or at + 1 >= j:
        return None
    label_end = at
    if s[at + 1] == "[":
        close = s.find("]", at + 2, j)
        return (label_end, close + 1) if close > 0 else None
    if s[at + 1] != "(":
        return None
    depth, at, quote = 0, at + 1, None
    while at < j:
        c = s[at]
        if quote:
            quote = None if c == quote else quote
        elif c in "\"'" and s[at - 1].isspace():
            quote = c
        elif c == "\\":
            at += 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return label_end, at + 1
        at += 1
    return None


def inline_carrier(source: str) -> tuple[str, _Carrier]:
    """(the HTML the document layer translates, the markers to write the output back with)."""
    carried = _Carrier(source)
    return carried.scan(0, len(source)), carried


def written_back(output: str, carried: _Carrier) -> str:
    """The markdown of the document layer's output for :func:`inline_carrier`'s HTML."""
    out, open_elements = [], []
    for m in _OUTPUT.finditer(output):
        if m[1] is not None:
            k = int(m[1])
            open_elements.append(k)
            out.append(carried.markers[k][0])
        elif m[0] == "</span>":
            if open_elements:
                out.append(carried.markers[open_elements.pop()][1] or "")
        elif m[2] is not None:
            out.append(carried.markers[int(m[2])][0])
        else:
            out.append(html.unescape(m[0]))
    return "".join(out)


def _front_matter(lines: Sequence[str]) -> int:
    """How many lines a YAML front matter (between two ``---`` lines at the top) takes."""
    if not lines or lines[0].rstrip() != "---":
        return 0
    for k in range(1, len(lines)):
        if lines[k].rstrip() in ("---", "..."):
            return k + 1
    return 0


def text_spans(lines: Sequence[str]) -> list[list[tuple[int, int, int]]]:
    """The (line, start, end) of each line of each paragraph's, heading's and table cell's text,
    as markdown-it-py finds them, in order; text it cannot find again on its lines is left out
    (copied as it was)."""
    skip = _front_matter(lines)
    tokens = _parser().parse("".join(lines[skip:]))
    cursor: dict[int, int] = {}
    out = []
    for token in tokens:
        if token.type != "inline" or token.map is None:
            continue
        spans = []
        contents = token.content.split("\n")
        for k, content in enumerate(contents):
            number, core = token.map[0] + skip + k, content.strip()
            if k < len(contents) - 1 and _hard_break(core):
                core = core[:-1].rstrip()  # the backslash of a hard line break stays at its end
            found = (
                _found(lines[number], core, cursor.get(number, 0)) if number < len(lines) else None
            )
            if not core or found is None:
                spans = []
                break
            spans.append((number, *found))
            cursor[number] = found[1]
        if spans:
            out.append(spans)
    return out


def _hard_break(core: str) -> bool:
    """Whether a paragraph line ends in a backslash hard line break (an odd run of them)."""
    return (len(core) - len(core.rstrip("\\"))) % 2 == 1


def _found(line: str, core: str, start: int) -> tuple[int, int] | None:
    """Where ``core`` (markdown-it's content of a line) is on ``line`` from ``start``: as it is,
    or with a table cell's escaped pipes (``\\|``, which the content gives as ``|``)."""
    at = line.find(core, start)
    if at >= 0:
        return at, at + len(core)
    if "|" in core:
        match = re.compile(re.escape(core).replace(r"\|", r"\\?\|")).search(line, start)
        if match:
            return match.span()
    return None


def _lines(document: str) -> list[str]:
    """The lines of ``document`` with their ends, cut where markdown-it cuts them (``\\n``,
    ``\\r\\n``, ``\\r``; not at a form feed or U+2028 as str.splitlines does)."""
    return re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", document)


def _may_start_line(word: str) -> bool:
    return not _BLOCK_START.match(word)


def translate_markdown(document: str, translate: Translate) -> str:
    """``document`` with the text of its paragraphs, headings and table cells translated by
    ``translate`` (HTML texts in, HTML texts out)."""
    lines = _lines(document)
    found = text_spans(lines)
    edits: dict[int, list[tuple[int, int, str]]] = {}
    dropped: set[int] = set()
    for at in range(0, len(found), BATCH):
        batch = found[at : at + BATCH]
        carried = [inline_carrier("\n".join(lines[n][a:b] for n, a, b in s)) for s in batch]
        outputs = translate([document for document, _ in carried], "html")
        for spans, (_, carrier), output in zip(batch, carried, outputs):
            words = written_back(output, carrier)
            if words.strip():
                _place(lines, spans, laid_out(words, len(spans), _may_start_line), edits, dropped)
    out = []
    for number, line in enumerate(lines):
        if number in dropped:
            continue
        for start, end, new in sorted(edits.get(number, []), reverse=True):
            line = line[:start] + new + line[end:]
        out.append(line)
    return "".join(out)


def _place(lines, spans, shown: list[str], edits: dict, dropped: set) -> None:
    """Edits putting ``shown`` (one string per line, at most one per span) in place of the
    spans; the lines of spans left over are dropped, the last one's end kept."""
    last = len(shown) - 1
    for k, (number, start, end) in enumerate(spans):
        if k < last or (k == last and last == len(spans) - 1):
            edits.setdefault(number, []).append((start, end, shown[k]))
        elif k == last:
            final, _, final_end = spans[-1]
            tail = lines[final][final_end:].rstrip("\r\n")
            body_end = len(lines[number].rstrip("\r\n"))
            edits.setdefault(number, []).append((start, body_end, shown[k] + tail))
        else:
            dropped.add(number)
