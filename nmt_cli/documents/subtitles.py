"""Subtitles (.srt, .vtt) translated cue by cue, read and written a group of cues at a time.

A file is blocks separated by blank lines. A cue is the block with a timing line (``-->``):
the lines before it (SubRip's number, WebVTT's identifier) and the timing line itself (times,
cue settings) are copied as they were; its text lines are translated together as one text, so
that a sentence spread over two lines is one sentence, and the translation is laid out again
on as many lines, cut at the spaces that balance them. A cue's inline tags (``<i>``, ``<b>``,
``<u>``, ``<font ...>``, WebVTT's ``<c.class>`` and ``<v Speaker>``) go through the document
layer's HTML rules (nmt_cli/documents/markup.py); WebVTT's timestamp tags (``<00:01.500>``)
are kept verbatim. A WebVTT file's header and its NOTE, STYLE and REGION blocks, and every
blank line, are copied as they were; any other block without a timing line (text a blank line
cut off its cue, say, or a SubRip block that happens to start with "NOTE") is text the file
shows or meant to, translated as a cue's lines are. The file keeps its line ends.
"""

from __future__ import annotations

import html
from collections.abc import Iterator, Sequence

from nmt_cli.documents.office import Translate

CUES_AT_ONCE = 200  # cues translated together; the file is read and written in such groups
TIMESTAMP_TAG = r"<\d[\d:.]*>"  # WebVTT's karaoke timestamps, kept verbatim
ENTITY = r"&(?:[A-Za-z]+|#\d+|#x[0-9A-Fa-f]+);"  # an entity the file wrote, kept as written


def _blocks(lines: Iterator[str]) -> Iterator[list[str]]:
    """Lines (each with its line end) grouped into blocks, a run of blank lines a block alone."""
    block: list[str] = []
    blank = False
    for line in lines:
        is_blank = not line.strip()
        if block and is_blank != blank:
            yield block
            block = []
        block.append(line)
        blank = is_blank
    if block:
        yield block


# WebVTT's blocks that hold no text to translate, by their first word; a file is WebVTT when its
# first line's first word is WEBVTT (SubRip has no such blocks)
NOT_TEXT = ("WEBVTT", "NOTE", "STYLE", "REGION")


def _first_word(block: list[str]) -> str:
    words = block[0].lstrip("\ufeff").split()
    return words[0] if words else ""


def _cue_text(block: list[str], webvtt: bool) -> int:
    """The index of the first line of ``block`` to translate: a cue's first text line, 0 for a
    block of text without a timing line; -1 where nothing is (blank lines; in a WebVTT file its
    header and NOTE, STYLE and REGION blocks)."""
    first = _first_word(block)
    if not first or (webvtt and first in NOT_TEXT):
        return -1
    for k, line in enumerate(block[:3]):
        if "-->" in line:
            return k + 1
    return 0


def _ending(line: str) -> str:
    return line[len(line.rstrip("\r\n")) :]


def laid_out(text: str, count: int, may_start=lambda word: True) -> list[str]:
    """``text`` on ``count`` lines (fewer where it has fewer words), cut at spaces into lines of
    about equal length; a line other than the first begins with a word ``may_start`` allows
    where one near the cut does."""
    words = text.split()
    count = max(1, min(count, len(words)))
    lines: list[str] = []
    at = 0
    for k in range(count, 0, -1):
        left = words[at:]
        if k == 1:
            lines.append(" ".join(left))
            break
        target = len(" ".join(left)) / k
        taken, size = 1, len(left[0])
        while taken < len(left) - (k - 1) and size + 1 + len(left[taken]) / 2 <= target:
            size += 1 + len(left[taken])
            taken += 1
        taken = _allowed_cut(left, taken, len(left) - (k - 1), may_start)
        lines.append(" ".join(left[:taken]))
        at += taken
    return lines


def _allowed_cut(words: list[str], taken: int, most: int, may_start) -> int:
    """``taken``, or the nearest number of words to take (1 to ``most``) after which the next
    line may start."""
    for shift in range(most):
        for cut in (taken - shift, taken + shift):
            if 1 <= cut <= most and may_start(words[cut]):
                return cut
    return taken


def translate_subtitles(lines: Iterator[str], translate: Translate) -> Iterator[str]:
    """The translated file, as strings to write in order, from its lines (each with its line
    end); cues are translated CUES_AT_ONCE at a time."""
    group: list[list[str]] = []
    webvtt = None
    for block in _blocks(lines):
        if webvtt is None:
            webvtt = _first_word(block) == "WEBVTT"
        group.append(block)
        if sum(_cue_text(b, webvtt) >= 0 for b in group) >= CUES_AT_ONCE:
            yield from _translated(group, translate, webvtt)
            group = []
    yield from _translated(group, translate, bool(webvtt))


def _translated(blocks: Sequence[list[str]], translate: Translate, webvtt: bool) -> Iterator[str]:
    cues = [(b, _cue_text(b, webvtt)) for b in blocks]
    texts = [
        " ".join(line.strip() for line in b[k:]).replace("&", "&amp;") for b, k in cues if k >= 0
    ]
    outputs = iter(translate(texts, "html") if texts else [])
    for block, k in cues:
        if k < 0:
            yield "".join(block)
            continue
        if len(block) == k:  # a cue without text: its output is empty
            next(outputs)
            yield "".join(block)
            continue
        words = html.unescape(next(outputs))
        if not words.strip():  # nothing came back: the cue stays as it was
            yield "".join(block)
            continue
        ending = _ending(block[-1]) or _ending(block[0]) or "\n"
        shown = [line + ending for line in laid_out(words, len(block) - k)]
        if not _ending(block[-1]):  # the file ended without a line end
            shown[-1] = shown[-1][: -len(ending)]
        yield "".join(block[:k]) + "".join(shown)
