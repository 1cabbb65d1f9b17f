"""The document layer: texts in, segments for the model, texts out.

A plain text is cut into paragraphs at its line breaks and each paragraph into sentences
(nmt_cli/documents/segment.py); an HTML document into the flowing text of its blocks
(nmt_cli/documents/markup.py's parse_html), each cut into sentences alike. A segment, what the model
translates, is one sentence, or one clause of a sentence longer than the model handles well.
Everything between segments (spaces, tabs, line breaks, blank lines, markup) is kept as the user
wrote it and put back around the translations, so nothing a user gave is ever dropped. Tags and
protected spans inside a segment travel as nmt_cli/documents/inline.py's Inline, which puts them
back by the word alignment.

    plan = plan_documents(texts, fmt="html")
    translations = translator.translate(plan.segments, alignments=plan.needs_alignment)
    outputs = plan.assemble(translations)
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nmt_cli.documents.segment import DEFAULT_LANGUAGE, clause_spans, sentence_spans
from nmt_cli.runtime.errors import UserError

if TYPE_CHECKING:
    from nmt_cli.documents.inline import Inline
    from nmt_cli.documents.protect import Protector
    from nmt_cli.translation.translator import Translation

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

    def _literal(self, text: int, part: str) -> None:
        if part:
            self._parts[text].append(part)

    def _segment(self, text: int, model_input: str, inline: Inline | None) -> None:
        self._parts[text].append(len(self.segments))
        self.segments.append(model_input)
        self.text_of.append(text)
        self._inlines.append(inline)
        if inline is not None and inline.needs_alignment:
            self.needs_alignment = True

    def inline_of(self, segment: int) -> Inline | None:
        """The tags and protected spans segment ``segment`` has to put back (None: none)."""
        return self._inlines[segment]

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
        return words if inline is None else inline.restore(words, alignment)

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
    than that is cut at clause boundaries (:func:`nmt_cli.documents.segment.clause_spans`)."""
    if fmt not in FORMATS:
        raise UserError(f"format: '{fmt}' is not one of {', '.join(FORMATS)}")
    plan = DocumentPlan(len(texts))
    too_long = None
    if max_tokens > 0 and count_tokens is not None:
        too_long = lambda s: count_tokens(s) > max_tokens  # noqa: E731
    cutter = _Cutter(language, split_sentences, too_long)
    for i, text in enumerate(texts):
        if fmt == "html":
            _plan_html(plan, i, text, cutter, protector)
        else:
            _plan_text(plan, i, text, cutter, protector)
    return plan


class _Cutter:
    """Segment spans of one paragraph: its sentences, long ones cut into clauses, no cut inside
    a protected span."""

    def __init__(self, language, split_sentences, too_long):
        self.language, self.split, self.too_long = language, split_sentences, too_long

    def spans(self, text: str, kept: Sequence[tuple[int, int]] = ()) -> list[tuple[int, int]]:
        """``kept``: the protected spans of ``text``, which no cut may fall inside."""
        if not text.strip():
            return []
        if self.split:
            spans = sentence_spans(text, self.language)
        else:
            start = len(text) - len(text.lstrip())
            spans = [(start, len(text.rstrip()))]
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
            from nmt_cli.documents.inline import plain_inline

            inline = plain_inline(piece, protector)
            piece = inline.text
            if not inline.protected:  # nothing to put back: the text is the model input
                inline = None
        at = 0
        kept = [] if inline is None else [(x.start, x.end) for x in inline.protected]
        for a, b in cutter.spans(piece, kept):
            plan._literal(i, piece[at:a])
            if inline is None:
                plan._segment(i, piece[a:b], None)
            else:
                part = inline.slice(a, b)
                plan._segment(i, part.model_input(), part if part.needs_alignment else None)
            at = b
        plan._literal(i, piece[at:])


def _plan_html(plan: DocumentPlan, i: int, document: str, cutter: _Cutter, protector) -> None:
    from nmt_cli.documents.markup import parse_html

    for part in parse_html(document, protector):
        if isinstance(part, str):
            plan._literal(i, part)
            continue
        text = part.text
        spans = cutter.spans(text, [(x.start, x.end) for x in part.protected])
        if not spans:  # only whitespace and markup: nothing to translate, all to keep
            plan._literal(i, part.restore("", []))
            continue
        # Slices cover the whole run, so that every tag lands in one of them; each keeps the
        # whitespace around its sentence when restored.
        bounds = [0] + [a for a, _ in spans[1:]] + [len(text)]
        for x, y in zip(bounds, bounds[1:]):
            sliced = part.slice(x, y)
            plan._segment(i, sliced.model_input(), sliced)


@dataclass
class DocumentOptions:
    """How texts become segments: ``fmt`` text or html, ``split_sentences`` (False: one segment
    per paragraph), ``protect`` do-not-translate regexes besides the built-in ones (None:
    nothing protected), ``language`` the source language (None: the model's recipe's)."""

    fmt: str = "text"
    split_sentences: bool = True
    protect: Sequence[str] | None = ()
    language: str | None = None


@dataclass
class DocumentTranslation:
    """One translated text: ``text`` the whole translation with its whitespace and markup in
    place, ``segments`` the Translations of its segments in order, ``cut`` whether a segment was
    cut at the model's source limit."""

    text: str
    segments: list[Translation]
    cut: bool = False


def alignment_side_by_side(segments: Sequence[str], translations: Sequence) -> list:
    """The word alignment of consecutive ``segments`` translated apart as ``translations``, as
    one text's: each segment's pairs shifted past the source and target words before it."""
    pairs, src_at, tgt_at = [], 0, 0
    for segment, tr in zip(segments, translations):
        pairs += [(a + src_at, b + tgt_at) for a, b in tr.alignment or []]
        src_at += len(segment.split())
        tgt_at += len(tr.text.split())
    return pairs


def build_protector(
    patterns: Sequence[str] | None, vocabulary=None, lowercase: bool = False
) -> Protector | None:
    """The Protector of the built-in patterns (placeholders, URLs, e-mail addresses), the
    user's ``patterns`` and the characters ``vocabulary`` (the model's Tokenizer) lacks, read
    lowercased for a ``lowercase`` model; None when ``patterns`` is None (protection off)."""
    if patterns is None:
        return None
    from nmt_cli.documents.protect import Protector

    return Protector(list(patterns), vocabulary=vocabulary, lowercase=lowercase)


def segment_counter(translator) -> Callable[[str], int]:
    """The subword count of a text as ``translator``'s model reads it."""
    from nmt_cli.data.tokenizer import normalize

    def count(text: str) -> int:
        cleaned = normalize(text, translator.lowercase)
        return len(translator.tokenizer.src.encode(cleaned))

    return count


def translate_documents(
    translator,
    texts: Sequence[str],
    *,
    fmt: str = "text",
    split_sentences: bool = True,
    protect: Sequence[str] | None = (),
    language: str | None = None,
    nbest: int = 1,
    beam_size: int | None = None,
    alternative: int = 0,
) -> list[DocumentTranslation]:
    """Translate whole texts with ``translator`` (a
    :class:`nmt_cli.translation.translator.Translator`): all
    segments of all texts batched together, then each text put back together. ``protect``:
    do-not-translate regexes on top of the built-in ones (None: nothing protected);
    ``language``: the source language (default: the model's recipe's); segments longer than
    ``decode.max_segment_tokens`` subwords are cut at clause boundaries."""
    recipe = translator.recipe
    limit = translator.config.max_segment_tokens
    plan = plan_documents(
        texts,
        fmt=fmt,
        language=language or (recipe.src if recipe is not None else DEFAULT_LANGUAGE),
        split_sentences=split_sentences,
        protector=build_protector(protect, translator.tokenizer, translator.lowercase),
        max_tokens=limit,
        count_tokens=_long_only(segment_counter(translator), limit),
    )
    translations = translator.translate(
        plan.segments, nbest=nbest, beam_size=beam_size, alignments=plan.needs_alignment
    )
    translations = retry_short(translator, plan, translations, beam_size)
    outputs = plan.assemble(translations, alternative)
    cut = plan.cut(translations)
    return [
        DocumentTranslation(outputs[i], [translations[s] for s in plan.segments_of(i)], cut[i])
        for i in range(len(texts))
    ]


# A translation with fewer words than this share of its source's has dropped part of it, as a
# model does with two sentences run together without a full stop (docs/translate.md#paragraphs).
MIN_WORD_RATIO = 0.5
MIN_RETRY_WORDS = 6  # shorter segments are left as they are


def retry_short(translator, plan: DocumentPlan, translations, beam_size) -> list[Translation]:
    """Plain-text segments of at least MIN_RETRY_WORDS words whose translation kept fewer than
    MIN_WORD_RATIO of them, translated again in parts of at most half their words, cut at
    clause boundaries (else at spaces); the parts' translations, joined with a space, replace
    the first translation where they have more words."""
    from nmt_cli.decoding.search import Hypothesis
    from nmt_cli.translation.translator import Alternative, Translation

    def short(s: int) -> bool:
        words = len(plan.segments[s].split())
        kept = len(translations[s].text.split())
        return (
            plan.inline_of(s) is None and words >= MIN_RETRY_WORDS and kept < MIN_WORD_RATIO * words
        )

    retry = [s for s in range(len(translations)) if short(s)]
    if not retry:
        return list(translations)
    pieces, owner = [], []
    for s in retry:
        text = plan.segments[s]
        too_long = functools.partial(_more_words_than, len(text.split()) // 2)
        for a, b in clause_spans(text, 0, len(text), too_long):
            pieces.append(text[a:b])
            owner.append(s)
    parts = translator.translate(pieces, beam_size=beam_size)
    out = list(translations)
    for s in retry:
        group = [tr for tr, o in zip(parts, owner) if o == s]
        text = " ".join(tr.text for tr in group if tr.text)
        if len(text.split()) <= len(out[s].text.split()):
            continue
        best = [tr.hypotheses[0] for tr in group if tr.hypotheses]
        score = sum(h.score for h in best)
        norm = sum(h.norm_score for h in best)
        tokens = [t for h in best for t in h.tokens]
        out[s] = Translation(
            out[s].source,
            text,
            [Hypothesis(tokens, score, norm)],
            [i for tr in group for i in tr.src_ids],
            any(tr.truncated for tr in group),
            [Alternative(text, score, norm)],
        )
    return out


def _more_words_than(limit: int, text: str) -> bool:
    return len(text.split()) > limit


def _long_only(count: Callable[[str], int], limit: int) -> Callable[[str], int]:
    """``count``, asked only of texts with more characters than ``limit``: a subword has at
    least one character, so a shorter text cannot have more subwords than that."""
    return lambda text: count(text) if len(text) >= limit else 0


MAX_HTML_BYTES = 16 << 20  # an HTML document is read whole; larger ones are refused


def translate_html_stream(
    translator, in_stream, out_stream, documents: DocumentOptions, name: str = "stdin"
) -> None:
    """Translate one HTML document read whole from a binary stream (at most MAX_HTML_BYTES)
    into a text stream. Bytes that are not UTF-8 become U+FFFD, with a warning."""
    data = in_stream.read(MAX_HTML_BYTES + 1)
    if len(data) > MAX_HTML_BYTES:
        raise UserError(
            f"{name}: over {MAX_HTML_BYTES >> 20} MiB; an HTML document is translated whole, "
            "so split it into smaller documents"
        )
    try:
        document = data.decode("utf-8")
    except UnicodeDecodeError:
        document = data.decode("utf-8", errors="replace")
        translator.warn(f"warning: {name} is not valid UTF-8; the bad bytes became U+FFFD")
    options = DocumentOptions(**{**vars(documents), "fmt": "html"})
    (result,) = translate_documents(translator, [document], **vars(options))
    if result.cut:
        translator.warn("warning: a sentence was cut at the model's source limit")
    out_stream.write(result.text)
    out_stream.flush()
