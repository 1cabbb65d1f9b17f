"""The document layer: texts in, segments for the model, texts out.

A plain text is cut into paragraphs at its line breaks and each paragraph into sentences
(nmt_cli/segment.py); an HTML document into the flowing text of its blocks
(nmt_cli/markup.py's parse_html), each cut into sentences alike. A segment, what the model
translates, is one sentence, or one clause of a sentence longer than the model handles well.
Everything between segments (spaces, tabs, line breaks, blank lines, markup) is kept as the user
wrote it and put back around the translations, so nothing a user gave is ever dropped. Tags and
protected spans inside a segment travel as nmt_cli/inline.py's Inline, which puts them back by
the word alignment.

    plan = plan_documents(texts, fmt="html")
    translations = translator.translate(plan.segments, alignments=plan.needs_alignment)
    outputs = plan.assemble(translations)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from nmt_cli.errors import UserError
from nmt_cli.segment import DEFAULT_LANGUAGE, clause_spans, sentence_spans

if TYPE_CHECKING:
    from nmt_cli.inline import Inline
    from nmt_cli.protect import Protector
    from nmt_cli.translate import Translation

FORMATS = ("text", "html")
_LINE_BREAK = re.compile(r"(\r\n|\r|\n)")


class DocumentPlan:
    """The segments of some texts and how to put their translations back.

    ``segments``: the model inputs of every text's segments, in order; ``text_of[s]``: the text
    segment ``s`` belongs to; ``needs_alignment``: some segment has tags or protected spans to
    put back, so the translations must carry their word alignments."""

    def __init__(self, count: int):
        self.segments: list[str] = []
        self.text_of: list[int] = []
        self.needs_alignment = False
        self._parts: list[list[str | int]] = [[] for _ in range(count)]
        self._inlines: list[Inline | None] = []
        self._pads: list[tuple[str, str]] = []

    def _literal(self, text: int, part: str) -> None:
        if part:
            self._parts[text].append(part)

    def _segment(
        self, text: int, model_input: str, inline: Inline | None, pad: tuple[str, str] = ("", "")
    ) -> None:
        self._parts[text].append(len(self.segments))
        self.segments.append(model_input)
        self.text_of.append(text)
        self._inlines.append(inline)
        self._pads.append(pad)
        if inline is not None and inline.needs_alignment:
            self.needs_alignment = True

    def segments_of(self, text: int) -> list[int]:
        """The indices of text ``text``'s segments, in order."""
        return [p for p in self._parts[text] if isinstance(p, int)]

    def assemble(self, translations: Sequence[Translation], alternative: int = 0) -> list[str]:
        """One output text per input text, the translations of its segments in place of them and
        everything else as it was. ``alternative`` k uses each segment's k-th alternative (its
        best where it has fewer)."""
        if len(translations) != len(self.segments):
            raise ValueError(f"{len(translations)} translations for {len(self.segments)} segments")
        outputs = []
        for parts in self._parts:
            pieces = []
            for part in parts:
                if isinstance(part, str):
                    pieces.append(part)
                else:
                    pieces.append(self._put_back(part, translations[part], alternative))
            outputs.append("".join(pieces))
        return outputs

    def _put_back(self, index: int, tr: Translation, alternative: int) -> str:
        words, alignment = tr.text, tr.alignment
        if 0 < alternative < len(tr.alternatives):
            words, alignment = tr.alternatives[alternative].text, None
        inline = self._inlines[index]
        if inline is None:
            return words
        lead, trail = self._pads[index]
        restored = inline.restore(words, alignment)
        return lead + restored.strip() + trail if (lead or trail) else restored

    def cut(self, translations: Sequence[Translation]) -> list[bool]:
        """For each text, whether a segment of it was cut at the model's source limit."""
        flags = [False] * len(self._parts)
        for s, tr in enumerate(translations):
            if tr.truncated:
                flags[self.text_of[s]] = True
        return flags


def plan_documents(
    texts: Sequence[str],
    *,
    fmt: str = "text",
    language: str = DEFAULT_LANGUAGE,
    split_sentences: bool = True,
    protector: Protector | None = None,
    max_tokens: int = 0,
    count_tokens: Callable[[str], int] | None = None,
) -> DocumentPlan:
    """The segments of ``texts`` (plain text or HTML documents, as ``fmt`` says) and how to put
    their translations back. ``language``: the source language, for the sentence boundaries;
    ``split_sentences`` False keeps each paragraph (line) one segment, for sentence-per-line
    input; ``protector``: the spans to carry verbatim (placeholders, URLs, user patterns), None
    for none; ``max_tokens`` > 0 with ``count_tokens`` (subwords of a text): a segment longer
    than that is cut at clause boundaries (:func:`nmt_cli.segment.clause_spans`)."""
    if fmt not in FORMATS:
        raise UserError(f"format: '{fmt}' is not one of {', '.join(FORMATS)}")
    plan = DocumentPlan(len(texts))
    too_long = None
    if max_tokens > 0 and count_tokens is not None:
        too_long = lambda s: count_tokens(s) > max_tokens  # noqa: E731
    cutter = _Cutter(language, split_sentences, protector, too_long)
    for i, text in enumerate(texts):
        if fmt == "html":
            _plan_html(plan, i, text, cutter, protector)
        else:
            _plan_text(plan, i, text, cutter, protector)
    return plan


class _Cutter:
    """Segment spans of one paragraph: its sentences, long ones cut into clauses, no cut inside
    a protected span."""

    def __init__(self, language, split_sentences, protector, too_long):
        self.language, self.split = language, split_sentences
        self.protector, self.too_long = protector, too_long

    def spans(self, text: str) -> list[tuple[int, int]]:
        if not text.strip():
            return []
        if self.split:
            spans = sentence_spans(text, self.language)
        else:
            start = len(text) - len(text.lstrip())
            spans = [(start, len(text.rstrip()))]
        kept = self.protector.find(text) if self.protector is not None else []
        spans = _joined_across(spans, kept)
        if self.too_long is None:
            return spans
        parts: list[tuple[int, int]] = []
        for a, b in spans:
            parts += clause_spans(text, a, b, self.too_long, kept)
        return parts


def _joined_across(spans, kept):
    """Neighbouring spans merged where the cut between them falls inside a protected span."""
    out: list[tuple[int, int]] = []
    for a, b in spans:
        if out and any(x < a and y > out[-1][1] for x, y in kept):
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def _plan_text(plan: DocumentPlan, i: int, text: str, cutter: _Cutter, protector) -> None:
    pieces = _LINE_BREAK.split(text)
    for k, piece in enumerate(pieces):
        if k % 2:  # a line break, kept as it was
            plan._literal(i, piece)
            continue
        inline = None
        if protector is not None:
            from nmt_cli.inline import plain_inline

            inline = plain_inline(piece, protector)
            piece = inline.text
        at = 0
        for a, b in cutter.spans(piece):
            plan._literal(i, piece[at:a])
            if inline is None:
                plan._segment(i, piece[a:b], None)
            else:
                part = inline.slice(a, b)
                plan._segment(i, part.model_input(), part if part.needs_alignment else None)
            at = b
        plan._literal(i, piece[at:])


def _plan_html(plan: DocumentPlan, i: int, document: str, cutter: _Cutter, protector) -> None:
    from nmt_cli.markup import parse_html

    for part in parse_html(document, protector):
        if isinstance(part, str):
            plan._literal(i, part)
            continue
        text = part.text
        spans = cutter.spans(text)
        if not spans:  # only whitespace and markup: nothing to translate, all to keep
            plan._literal(i, part.restore("", []))
            continue
        # Slices cover the whole run, so that every tag lands in one of them.
        bounds = [0] + [a for a, _ in spans[1:]] + [len(text)]
        for x, y in zip(bounds, bounds[1:]):
            piece = text[x:y]
            lead = piece[: len(piece) - len(piece.lstrip())]
            trail = piece[len(piece.rstrip()) :]
            sliced = part.slice(x, y)
            plan._segment(i, sliced.model_input(), sliced, (lead, trail))
