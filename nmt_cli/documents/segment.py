"""Sentence boundaries inside a paragraph, from sentencex (Wikimedia's rule-based segmenter for
some 300 languages, with their abbreviation lists).

The segmenter was chosen by its accuracy on real paragraphs whose true boundaries are known
(docs/translate.md, "Sentence segmentation", measured by bench/segmenters.py). Its pieces are
mapped back onto the paragraph as character spans, so that the text between two sentences (the
spaces, a tab) stays exactly as the user wrote it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from sentencex import segment

DEFAULT_LANGUAGE = "en"


def spans_of(text: str, pieces: Iterable[str]) -> list[tuple[int, int]]:
    """The character spans ``[start, end)`` of ``pieces`` (a segmenter's sentences, in order)
    inside ``text``, each without its surrounding whitespace. A piece the segmenter changed (so
    that it cannot be found where expected) ends the search: the rest of the text is one span,
    so that nothing is ever lost."""
    spans: list[tuple[int, int]] = []
    cursor = 0
    for piece in pieces:
        stripped = piece.strip()
        if not stripped:
            continue
        start = text.find(stripped, cursor)
        if start < 0:
            break
        end = start + len(stripped)
        spans.append((start, end))
        cursor = end
    rest = text[cursor:]
    if rest.strip():
        lead = len(rest) - len(rest.lstrip())
        tail = len(rest.rstrip())
        spans.append((cursor + lead, cursor + tail))
    return _with_gaps_joined(text, spans)


def _with_gaps_joined(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Spans whose gap holds more than whitespace (text a segmenter skipped) are merged, so that
    the spans and the whitespace between them give back the whole text."""
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and text[merged[-1][1] : start].strip():
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    if merged and text[: merged[0][0]].strip():
        merged[0] = (0, merged[0][1])
    return merged


def sentence_spans(text: str, language: str = DEFAULT_LANGUAGE) -> list[tuple[int, int]]:
    """The sentences of one paragraph (no line breaks inside) as character spans, in order, each
    without leading or trailing whitespace; an all-whitespace text has none. ``language``: an
    ISO 639 code (the source language); sentencex falls back to its generic rules for codes it
    does not know."""
    if not text.strip():
        return []
    return spans_of(text, segment(language or DEFAULT_LANGUAGE, text))


def split_sentences(text: str, language: str = DEFAULT_LANGUAGE) -> list[str]:
    """The sentences of a paragraph, without surrounding whitespace."""
    return [text[a:b] for a, b in sentence_spans(text, language)]


# Words a clause may begin with, where a long sentence can be cut before them (en, fr, de).
CONJUNCTIONS = frozenset(
    {"and", "or", "but", "while", "whereas", "because", "although", "as", "which", "who", "where"}
    | {"et", "ou", "mais", "tandis", "alors", "car", "qui", "où"}
    | {"und", "oder", "aber", "während", "weil", "denn", "wobei"}
)
_CLAUSE_END = ",;:"


def _cut_points(
    text: str, start: int, end: int, keep: Sequence[tuple[int, int]]
) -> tuple[list[int], list[int]]:
    """Where ``text[start:end]`` may be cut: after a comma, semicolon or colon, or before a
    conjunction (clause boundaries), and else at any space. A cut point is the position of the
    space that would end the first part."""
    clauses, spaces = [], []
    for i in range(start + 1, end - 1):
        if text[i] != " " or text[i - 1] == " " or any(a < i < b for a, b in keep):
            continue
        spaces.append(i)
        word = text[i + 1 : end].split(" ", 1)[0].lower()
        if text[i - 1] in _CLAUSE_END or word in CONJUNCTIONS:
            clauses.append(i)
    return clauses, spaces


def clause_spans(
    text: str,
    start: int,
    end: int,
    too_long: Callable[[str], bool],
    keep: Sequence[tuple[int, int]] = (),
    at_clauses: bool = True,
) -> list[tuple[int, int]]:
    """The span ``text[start:end]`` cut into parts none of which is ``too_long``, where possible:
    at the clause boundary nearest the middle (commas, semicolons, colons, conjunctions), else at
    the space nearest the middle, again in each half while a half is too long. A part without a
    space is left whole; no cut falls inside a span of ``keep`` (protected spans).
    ``at_clauses`` False: cut at the space nearest the middle, clause boundary or not."""
    if not too_long(text[start:end]):
        return [(start, end)]
    clauses, spaces = _cut_points(text, start, end, keep)
    points = (clauses if at_clauses else []) or spaces
    if not points:
        return [(start, end)]
    middle = (start + end) / 2
    cut = min(points, key=lambda i: abs(i - middle))
    right = cut
    while right < end and text[right] == " ":
        right += 1
    left_end = cut
    while left_end > start and text[left_end - 1] == " ":
        left_end -= 1
    return clause_spans(text, start, left_end, too_long, keep, at_clauses) + clause_spans(
        text, right, end, too_long, keep, at_clauses
    )
