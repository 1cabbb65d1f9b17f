"""The document layer: texts in, segments for the model, texts out.

A plain text is cut into paragraphs at its line breaks and each paragraph into sentences
(nmt_cli/documents/segment.py); an HTML document into the flowing text of its blocks
(nmt_cli/documents/markup.py's parse_html), each cut into sentences alike. A segment, what the model
translates, is one sentence, or one clause of a sentence longer than the model handles well.
Everything between segments (spaces, tabs, line breaks, blank lines, markup) is kept as the user
wrote it and put back around the translations, so nothing a user gave is ever dropped. Tags and
protected spans inside a segment travel as nmt_cli/documents/inline.py's Inline, which puts them
back by the word alignment. The plan (nmt_cli/documents/plan.py) does the cutting and the
joining; this module translates a plan's segments, and again in parts where a translation
dropped most of a segment's words (:class:`Retry`):

    plan = plan_documents(texts, fmt="html")
    translations = translate_plan(translator, plan, TranslateOptions())
    whole = [plan.joined(i, translations) for i in range(len(texts))]

:meth:`DocumentPlan.joined` is the one join of a text's segments, for every output: the texts
put back (a clause cut leaves no sentence-initial capital and no repeated words where the parts
meet), the scores added, one confidence, the alignment and attention shifted past the words
before each segment (nmt_cli/translation/results.py's ``combined``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass, field, replace

from nmt_cli.data.casing import case_of, sentence_cased
from nmt_cli.data.tokenizer import normalize
from nmt_cli.documents.numbers import check_style, number_writer
from nmt_cli.documents.plan import DocumentPlan, plan_documents
from nmt_cli.documents.protect import Protector
from nmt_cli.documents.recall import Recall, everything
from nmt_cli.documents.segment import DEFAULT_LANGUAGE, clause_spans
from nmt_cli.runtime.errors import UserError
from nmt_cli.translation.contract import TranslateOptions, Translating, check_texts
from nmt_cli.translation.forcing import check_prefixes
from nmt_cli.translation.results import Translation, empty_translation


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
    place, ``translation`` the whole as one Translation (:meth:`DocumentPlan.joined`: scores,
    confidence, alternatives, alignment), ``segments`` the Translations of its segments in
    order, ``cut`` whether a segment was cut at the model's source limit."""

    text: str
    segments: list[Translation]
    cut: bool = False
    translation: Translation = field(default_factory=empty_translation)


def build_protector(
    patterns: Sequence[str] | None,
    vocabulary=None,
    lowercase: bool = False,
    numbers: str = "keep",
) -> Protector | None:
    """The Protector of the built-in patterns (placeholders, URLs, e-mail addresses, numbers
    unless ``numbers`` is "model"), the user's ``patterns`` and the characters ``vocabulary``
    (the model's Tokenizer) lacks, read lowercased for a ``lowercase`` model; None when
    ``patterns`` is None (protection off)."""
    if patterns is None:
        return None
    return Protector(
        list(patterns),
        vocabulary=vocabulary,
        lowercase=lowercase,
        numbers=check_style(numbers) != "model",
    )


def segment_counter(translator: Translating, restore_case: bool = True) -> Callable[[str], int]:
    """The subword count of a text as ``translator``'s model reads it: with ``restore_case``
    (TranslateOptions.restore_case), an ALL CAPS or Title Case text in sentence case."""

    def count(text: str) -> int:
        if restore_case:
            text = sentence_cased(text, case_of(text))
        cleaned = normalize(text, translator.lowercase)
        return len(translator.tokenizer.src.encode(cleaned))

    return count


def document_plan(
    translator: Translating,
    texts: Sequence[str],
    documents: DocumentOptions,
    whole: bool = False,
    options: TranslateOptions | None = None,
) -> DocumentPlan:
    """The plan `nmt translate` makes of ``texts`` for ``translator``: sentences in the source
    language (the recipe's unless ``documents`` names one), the built-in and the user's
    protected spans, numbers carried as ``options.numbers`` says, segments longer than
    ``decode.max_segment_tokens`` subwords cut at clause boundaries; ``whole``: each line one
    segment, never cut (a line with a forced prefix)."""
    recipe = translator.recipe
    options = options or TranslateOptions()
    limit = 0 if whole else translator.config.max_segment_tokens
    source = documents.language or (recipe.src if recipe is not None else DEFAULT_LANGUAGE)
    target = options.target or (recipe.tgt if recipe is not None else None)
    return plan_documents(
        texts,
        fmt=documents.fmt,
        language=source,
        split_sentences=documents.split_sentences and not whole,
        protector=build_protector(
            documents.protect, translator.tokenizer, translator.lowercase, options.numbers
        ),
        max_tokens=limit,
        count_tokens=long_only(segment_counter(translator, options.restore_case), limit),
        write_number=number_writer(options.numbers, source, target),
    )


def translate_documents(
    translator: Translating,
    texts: Sequence[str],
    options: TranslateOptions | None = None,
    documents: DocumentOptions | None = None,
    recall: Recall | None = None,
) -> list[DocumentTranslation]:
    """Translate whole texts with ``translator``: all segments of all texts batched together,
    then each text put back together (:meth:`DocumentPlan.joined`). ``options``: the call's, its
    ``prefixes`` one per text (each line then one segment, never cut: a prefix begins the
    whole line); a segment whose translation dropped most of its words is translated again in
    parts (:class:`Retry`), except under a prefix; ``recall``: a translation memory and cache
    that answer segments before decoding (nmt_cli/documents/recall.py)."""
    options = options or TranslateOptions()
    documents = documents or DocumentOptions()
    prefixes = options.prefixes
    if prefixes is not None and documents.fmt == "html":
        raise UserError("prefixes: give them for lines of text, not for an HTML document")
    plan = document_plan(translator, texts, documents, prefixes is not None, options)
    found = everything(plan)
    if recall is not None:
        found = recall.split(plan, segment_options(plan, options))
    translations = found.merged(translate_plan(translator, plan, options, found.todo))
    if prefixes is None:
        retry = Retry(plan, translations, kept=found.found)
        if retry.segments:
            again = translator.translate(retry.segments, replace(options, warn_cut=False))
            translations = retry.replaced(again)
    found.keep(translations)
    cut = plan.cut(translations)
    out = []
    for i in range(len(texts)):
        joined = plan.joined(i, translations)
        segments = [translations[s] for s in plan.segments_of(i)]
        out.append(DocumentTranslation(joined.text, segments, cut[i], joined))
    return out


def translate_texts(
    translator: Translating,
    texts: Sequence[str],
    options: TranslateOptions | None = None,
    /,
    *,
    fmt: str = "text",
    split_sentences: bool = True,
    protect: Sequence[str] | None = (),
    language: str | None = None,
    **changes,
) -> list[DocumentTranslation]:
    """Whole texts in, whole translations out (:class:`DocumentTranslation`: ``.text``,
    ``.translation``, ``.segments``, ``.cut``): each text cut into paragraphs at its line
    breaks and sentences inside them (``split_sentences``), or an HTML document
    (``fmt="html"``), its whitespace and markup put back around the translations;
    ``protect``: do-not-translate regexes besides the built-in placeholders, URLs and e-mail
    addresses (None: none); ``options`` and ``changes`` (TranslateOptions fields) as the
    translator's ``translate`` takes them, the prefixes one per text."""
    check_texts(texts, "texts")
    documents = DocumentOptions(fmt, split_sentences, protect, language)
    options = replace(options or TranslateOptions(), **changes)
    return translate_documents(translator, texts, options, documents)


def segment_options(plan: DocumentPlan, options: TranslateOptions) -> TranslateOptions:
    """``options`` for ``plan``'s segments: ``options.prefixes``, one per text, given to each
    text's first segment (the alignments that tags and protected spans need are asked per
    segment by :func:`segment_calls`)."""
    prefixes = options.prefixes
    if prefixes is not None:
        check_prefixes(prefixes, len(plan._parts), "texts")
        firsts = {ids[0] for i in range(len(plan._parts)) if (ids := plan.segments_of(i))}
        prefixes = tuple(
            prefixes[plan.text_of[s]] if s in firsts else None for s in range(len(plan.segments))
        )
    return replace(options, prefixes=prefixes)


def segment_calls(
    plan: DocumentPlan, asked: TranslateOptions, todo: Sequence[int]
) -> list[tuple[TranslateOptions, list[int]]]:
    """The translate calls for ``plan``'s segments numbered ``todo``, ``asked`` being
    :func:`segment_options`: one for the segments whose tags or protected spans are put back
    by the word alignment (:meth:`DocumentPlan.options_for`), and one for the rest, as asked;
    one call when every segment is of a kind. Each call's prefixes are its segments'."""
    groups: dict[tuple[bool, bool], tuple[TranslateOptions, list[int]]] = {}
    for s in todo:
        options = plan.options_for(s, asked)
        groups.setdefault((options.alignments, options.coverage), (options, []))[1].append(s)
    calls = []
    for _, (options, segments) in sorted(groups.items()):
        if options.prefixes is not None:
            options = replace(options, prefixes=tuple(options.prefixes[s] for s in segments))
        calls.append((options, segments))
    return calls


def translate_plan(
    translator: Translating,
    plan: DocumentPlan,
    options: TranslateOptions,
    todo: Sequence[int] | None = None,
) -> list[Translation]:
    """The Translations of ``plan``'s segments (:func:`segment_calls`), or of those numbered
    ``todo`` (the rest answered without decoding, nmt_cli/documents/recall.py), in order; an
    error about a prefix names its text."""
    todo = range(len(plan.segments)) if todo is None else todo
    found: dict[int, Translation] = {}
    for asked, segments in segment_calls(plan, segment_options(plan, options), todo):
        try:
            translations = translator.translate([plan.segments[s] for s in segments], asked)
        except UserError as exc:
            raise UserError(_texts_named(str(exc), plan, segments)) from None
        found.update(zip(segments, translations))
    return [found[s] for s in todo]


def _texts_named(message: str, plan: DocumentPlan, segments: Sequence[int]) -> str:
    """``message`` about a call's line (the call's ``segments``, numbered from 1) naming the
    text that line is a segment of."""
    return re.sub(
        r"^prefix of line (\d+)",
        lambda m: f"prefix of line {plan.text_of[segments[int(m[1]) - 1]] + 1}",
        message,
    )


# A translation with fewer words than this share of its source's has dropped part of it, as a
# model does with two sentences run together without a full stop (docs/translate.md#paragraphs).
MIN_WORD_RATIO = 0.5
MIN_RETRY_WORDS = 6  # shorter segments are left as they are


class Retry:
    """The second pass over a plan's translations: plain-text segments of at least
    MIN_RETRY_WORDS words whose translation kept fewer than MIN_WORD_RATIO of them, cut into
    parts of at most half their words (at clause boundaries, else at spaces), but those in
    ``kept`` (answered without decoding: a correction is kept as given). ``segments``: the
    parts to translate; :meth:`replaced` puts the parts' translations, joined as a text's
    segments are (:meth:`DocumentPlan.joined`), in place of the first where they have more
    words."""

    def __init__(
        self, plan: DocumentPlan, translations: Sequence[Translation], kept: Container[int] = ()
    ):
        self.translations = list(translations)
        self.short = [s for s in range(len(translations)) if s not in kept and self._short(plan, s)]
        sources = [plan.segments[s] for s in self.short]
        self.plan = DocumentPlan(len(sources))
        for i, text in enumerate(sources):
            too_long = functools.partial(_more_words_than, len(text.split()) // 2)
            at = 0
            for k, (a, b) in enumerate(clause_spans(text, 0, len(text), too_long)):
                self.plan.add_literal(i, text[at:a])
                self.plan.add_segment(i, text[a:b], None, continues=k > 0)
                at = b
            self.plan.add_literal(i, text[at:])
        self.segments = self.plan.segments

    def _short(self, plan: DocumentPlan, s: int) -> bool:
        words = len(plan.segments[s].split())
        kept = len(self.translations[s].text.split())
        return (
            plan.inline_of(s) is None and words >= MIN_RETRY_WORDS and kept < MIN_WORD_RATIO * words
        )

    def replaced(self, parts: Sequence[Translation]) -> list[Translation]:
        out = list(self.translations)
        for i, s in enumerate(self.short):
            again = self.plan.joined(i, parts)
            if len(again.text.split()) > len(out[s].text.split()):
                out[s] = replace(again, source=out[s].source)
        return out


def _more_words_than(limit: int, text: str) -> bool:
    return len(text.split()) > limit


def long_only(count: Callable[[str], int], limit: int) -> Callable[[str], int]:
    """``count``, asked only of texts with more characters than ``limit``: a subword has at
    least one character, so a shorter text cannot have more subwords than that."""
    return lambda text: count(text) if len(text) >= limit else 0
