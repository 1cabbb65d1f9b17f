"""A document plan: texts cut into the segments the model translates (paragraphs at line
breaks, sentences, clauses past the source limit, HTML runs), what lies between them kept as the
user wrote it, and the segments' translations joined back into each text
(:meth:`DocumentPlan.joined`, the one join of cut translations)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace

from nmt_cli.documents.inline import Atom, Inline, plain_inline
from nmt_cli.documents.markup import parse_html
from nmt_cli.documents.numbers import NUMBER
from nmt_cli.documents.protect import Protector
from nmt_cli.documents.segment import DEFAULT_LANGUAGE, clause_spans, sentence_spans
from nmt_cli.documents.wordless import has_words
from nmt_cli.runtime.errors import UserError
from nmt_cli.translation.contract import TranslateOptions
from nmt_cli.translation.results import Translation, combined, empty_translation, kth
from nmt_cli.translation.words import remapped, word_map

FORMATS = ("text", "html")
_LINE_BREAK = re.compile(r"(\r\n|\r|\n)")
_EDGE_PUNCTUATION = ",;:.!?\"'«»()"
_SENTENCE_END = (".", "!", "?", "…", ".»", '."')


class DocumentPlan:
    """The segments of some texts and how to put their translations back.

    ``segments``: the model inputs of every text's segments, in order; ``text_of[s]``: the text
    segment ``s`` belongs to; ``needs_alignment``: some segment has tags or protected spans to
    put back, so its translation must carry the word alignment (:meth:`aligned` says which)."""

    def __init__(self, count: int):
        self.segments: list[str] = []
        self.text_of: list[int] = []
        self._parts: list[list[str | int]] = [[] for _ in range(count)]
        self._inlines: list[Inline | None] = []
        self._continues: list[bool] = []  # the segment begins inside a sentence (a clause cut)

    def add_literal(self, text: int, part: str) -> None:
        """Text ``text`` goes on with ``part`` as it is (markup, spaces, a copied span)."""
        if part:
            self._parts[text].append(part)

    def add_segment(
        self, text: int, model_input: str, inline: Inline | None, continues: bool = False
    ) -> None:
        """Text ``text`` goes on with a segment the model translates: ``model_input``, the tags
        and spans ``inline`` puts back, whether it ``continues`` the segment before it."""
        self._parts[text].append(len(self.segments))
        self.segments.append(model_input)
        self.text_of.append(text)
        self._inlines.append(inline)
        self._continues.append(continues)

    @property
    def needs_alignment(self) -> bool:
        """Whether some segment has tags or protected spans to put back."""
        return any(self.aligned(s) for s in range(len(self.segments)))

    def aligned(self, segment: int) -> bool:
        """Whether segment ``segment`` has tags or protected spans that its translation's word
        alignment puts back; only such segments are translated with alignments."""
        inline = self._inlines[segment]
        return inline is not None and inline.needs_alignment

    def options_for(self, segment: int, asked: TranslateOptions) -> TranslateOptions:
        """The options segment ``segment`` is decoded with: ``asked``, with the alignment and
        its coverage where its tags or protected spans are put back by them (:meth:`aligned`:
        an element whose words no target word chose goes over the words its coverage gives),
        and alike where ``asked`` wants alignments anyway (one call for all)."""
        if not (asked.alignments or self.aligned(segment)):
            return asked
        return replace(asked, alignments=True, coverage=True)

    def inline_of(self, segment: int) -> Inline | None:
        """The tags and protected spans segment ``segment`` has to put back (None: none)."""
        return self._inlines[segment]

    def continues(self, segment: int) -> bool:
        """Whether segment ``segment`` continues the sentence of the one before it (a clause
        cut at the model's source limit)."""
        return self._continues[segment]

    def source(self, text: int) -> str:
        """Text ``text`` as the plan holds it: what lies between its segments, and their model
        inputs."""
        return "".join(p if isinstance(p, str) else self.segments[p] for p in self._parts[text])

    def segments_of(self, text: int) -> list[int]:
        """The indices of text ``text``'s segments, in order."""
        return [p for p in self._parts[text] if isinstance(p, int)]

    def joined(self, text: int, translations: Sequence[Translation]) -> Translation:
        """Text ``text``'s translation from ``translations`` (one per segment of the plan):
        everything between its segments as it was, each segment's translation in its place
        (its tags and protected spans put back), for the best and for each alternative (a
        segment with fewer gives its best); where a clause cut meets, the later part loses a
        sentence-initial capital its source did not have and the words that repeat the end of
        the part before. The alignments (the best's and each alternative's) index the words
        printed: where a segment's spans were put back, its source words as given and its
        translation's words with the spans (:meth:`_printed`). One segment's Translation is
        kept whole, its texts put in place."""
        ids = self.segments_of(text)
        met, texts = self._texts(text, translations)
        source = self.source(text)
        if not ids:
            return replace(empty_translation(source), text=texts[0])
        printed = [self._printed(s, met[s]) for s in ids]
        if len(ids) == 1:
            tr = printed[0][1]
            alternatives = [replace(a, text=texts[k]) for k, a in enumerate(tr.alternatives)]
            return replace(tr, text=texts[0], alternatives=alternatives)
        return combined(source, [p[0] for p in printed], [p[1] for p in printed], texts)

    def _printed(self, index: int, tr: Translation) -> tuple[str, Translation]:
        """(segment ``index``'s source as given, ``tr`` as printed): where the segment had
        protected spans or tags put back, its texts with them and its alignments moved onto
        those words (:func:`nmt_cli.translation.words.word_map`); else as it is."""
        inline = self._inlines[index]
        if inline is None:
            return self.segments[index], tr
        source = word_map(self.segments[index], inline.text)

        def moved(k: int, words: str, alignment):
            restored = self._put_back(index, tr, k)
            return restored, remapped(alignment, source, word_map(words, restored))

        text, alignment = moved(0, tr.text, tr.alignment)
        alternatives = []
        for k, a in enumerate(tr.alternatives):
            words, pairs = moved(k, a.text, a.alignment)
            alternatives.append(replace(a, text=words, alignment=pairs, coverage=None))
        # the coverage indexed the words as decoded: used up by putting the tags back
        printed = replace(tr, text=text, alignment=alignment, alternatives=alternatives)
        return inline.text, replace(printed, coverage=None)

    def assemble(self, translations: Sequence[Translation], alternative: int = 0) -> list[str]:
        """One output text per input text (:meth:`joined`'s), ``alternative`` k taking each
        segment's k-th alternative (its best where it has fewer)."""
        out = []
        for i in range(len(self._parts)):
            texts = self._texts(i, translations)[1]
            out.append(texts[alternative] if alternative < len(texts) else texts[0])
        return out

    def _texts(self, text: int, translations: Sequence[Translation]) -> tuple[dict, list[str]]:
        """(the segments' translations as they meet at cuts, the text's translation for the
        best and each alternative)."""
        if len(translations) != len(self.segments):
            raise ValueError(f"{len(translations)} translations for {len(self.segments)} segments")
        ids = self.segments_of(text)
        met = self._met_at_cuts(ids, translations)
        depth = max([len(met[s].alternatives) for s in ids] + [1])
        return met, [self._text(text, met, k) for k in range(depth)]

    def _text(self, text: int, met: dict, alternative: int) -> str:
        """Text ``text`` with its segments' translations (``alternative``) in place. A part after
        a clause cut starts in lowercase where its source does and the output before it does
        not end a sentence (the model capitalises what it translates as a sentence)."""
        out: list[str] = []
        for part in self._parts[text]:
            if isinstance(part, str):
                out.append(part)
                continue
            words = self._put_back(part, met[part], alternative)
            if met[part].from_memory and not words:
                # a correction given with a segment before it covers this one too
                # (nmt_cli/documents/recall.py): no whitespace left before the nothing in its place
                while out and not out[-1].strip():
                    out.pop()
                if out:
                    out[-1] = out[-1].rstrip()
            so_far = "".join(out).rstrip()
            if (
                self._continues[part]
                and so_far
                and not so_far.endswith(_SENTENCE_END)
                and _starts_lowercase(self.segments[part])
            ):
                words = _lowered_start(words)
            out.append(words)
        return "".join(out)

    def _put_back(self, index: int, tr: Translation, alternative: int) -> str:
        words, alignment, coverage = tr.text, tr.alignment, tr.coverage
        if alternative:  # the alternative's own alignment (None where none was asked for)
            chosen = kth(tr, alternative)
            if chosen is not None:
                words, alignment, coverage = chosen.text, chosen.alignment, chosen.coverage
        inline = self._inlines[index]
        return words if inline is None else inline.restore(words, alignment, coverage)

    def _met_at_cuts(self, ids: Sequence[int], translations: Sequence[Translation]) -> dict:
        """The translations of a text's segments, each after a clause cut without the words
        that repeat the end of the part before it (plain segments: an Inline places its spans
        by the words as translated)."""
        out = {s: translations[s] for s in ids}
        for before, s in zip(ids, ids[1:]):
            if self._continues[s] and self._inlines[s] is None and self._inlines[before] is None:
                out[s] = _without_repeat(out[before].text, out[s])
        return out

    def cut(self, translations: Sequence[Translation]) -> list[bool]:
        """For each text, whether a segment of it was cut at the model's source limit."""
        flags = [False] * len(self._parts)
        for s, tr in enumerate(translations):
            if tr.truncated:
                flags[self.text_of[s]] = True
        return flags


def _starts_lowercase(source: str) -> bool:
    first = next((c for c in source if c.isalpha()), "")
    return first.islower()


def _lowered_start(text: str) -> str:
    """``text`` with a capitalised first word lowercased (an acronym, two capitals, is kept)."""
    at = len(text) - len(text.lstrip())
    word = text[at:].split(" ", 1)[0]
    if len(word) > 1 and word[0].isupper() and not word[1].isupper():
        return text[:at] + word[0].lower() + text[at + 1 :]
    return text


def _bare(word: str) -> str:
    return word.strip(_EDGE_PUNCTUATION).lower()


def _without_repeat(before: str, tr: Translation) -> Translation:
    """``tr`` without its first n >= 2 words where they repeat the last n of ``before`` (a
    clause translated apart restates the end of the one before it); its alignment and word
    attention follow."""
    tail, words = [_bare(w) for w in before.split()], tr.text.split()
    head = [_bare(w) for w in words]
    n = next((n for n in range(min(len(tail), len(words) - 1), 1, -1) if tail[-n:] == head[:n]), 0)
    if not n:
        return tr
    text = " ".join(words[n:])
    alignment = tr.alignment and [(i, j - n) for i, j in tr.alignment if j >= n]
    attention = tr.attention
    if attention is not None:
        attention = replace(
            attention, target_words=attention.target_words[n:], weights=attention.weights[n:]
        )
    alternatives = [
        replace(a, text=text, alignment=alignment) if k == 0 else a
        for k, a in enumerate(tr.alternatives)
    ]
    return replace(
        tr, text=text, alternatives=alternatives, alignment=alignment, attention=attention
    )


def plan_documents(
    texts: Sequence[str],
    *,
    fmt: str = "text",
    language: str = DEFAULT_LANGUAGE,
    split_sentences: bool = True,
    protector: Protector | None = None,
    max_tokens: int = 0,
    count_tokens: Callable[[str], int] | None = None,
    write_number: Callable[[str], str] | None = None,
) -> DocumentPlan:
    """The segments of ``texts`` (plain text or HTML documents, as ``fmt`` says) and how to put
    their translations back. ``language``: the source language, for the sentence boundaries;
    ``split_sentences`` False keeps each paragraph (line) one segment, for sentence-per-line
    input; ``protector``: the spans to carry verbatim (placeholders, URLs, user patterns), None
    for none; ``max_tokens`` > 0 with ``count_tokens`` (subwords of a text): a segment longer
    than that is cut at clause boundaries (:func:`nmt_cli.documents.segment.clause_spans`);
    ``write_number``: how a protected number is written back (nmt_cli/documents/numbers.py's
    number_writer; None: as it is). A segment without words (wordless.py) is kept as it was."""
    if fmt not in FORMATS:
        raise UserError(f"format: '{fmt}' is not one of {', '.join(FORMATS)}")
    plan = DocumentPlan(len(texts))
    too_long = None
    if max_tokens > 0 and count_tokens is not None:
        too_long = lambda s: count_tokens(s) > max_tokens  # noqa: E731
    cutter = _Cutter(language, split_sentences, too_long)
    for i, text in enumerate(texts):
        if fmt == "html":
            _plan_html(plan, i, text, cutter, protector, write_number)
        else:
            _plan_text(plan, i, text, cutter, protector, write_number)
    return plan


_NUMBER = re.compile(NUMBER)


def _numbers_written(inline: Inline, write_number: Callable[[str], str] | None) -> Inline:
    """``inline`` with each protected number to be written back as ``write_number`` says."""
    if write_number is None:
        return inline
    atoms = []
    for atom in inline.protected:
        text = inline.text[atom.start : atom.end]
        if atom.raw is None and _NUMBER.fullmatch(text) and write_number(text) != text:
            atom = Atom(atom.start, atom.end, inline.escape(write_number(text)))
        atoms.append(atom)
    return replace(inline, protected=atoms)


class _Cutter:
    """Segment spans of one paragraph: its sentences, long ones cut into clauses, no cut inside
    a protected span. Each span says whether it continues a sentence (a clause after a cut)."""

    def __init__(self, language, split_sentences, too_long):
        self.language, self.split, self.too_long = language, split_sentences, too_long

    def spans(self, text: str, kept: Sequence[tuple[int, int]] = ()) -> list[tuple[int, int, bool]]:
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
            return [(a, b, False) for a, b in spans]
        parts: list[tuple[int, int, bool]] = []
        # The length that counts is the model's: protected spans (numbers, placeholders) are
        # left out of what it reads, so they are blanked before measuring.
        read = list(text)
        for x, y in kept:
            read[x:y] = " " * (y - x)
        read = "".join(read)
        for a, b in spans:
            clauses = clause_spans(read, a, b, self.too_long, kept)
            parts += [(x, y, k > 0) for k, (x, y) in enumerate(clauses)]
        return parts


def _joined_across(spans, kept):
    """Neighbouring spans merged where the cut between them falls inside a protected span: one
    that reaches into either of them. A protected span wholly between the two (a ``<br>`` after
    a full stop) cuts nothing."""
    out: list[tuple[int, int]] = []
    for a, b in spans:
        if out and any(x < a and y > out[-1][1] and (x < out[-1][1] or y > a) for x, y in kept):
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def _plan_text(
    plan: DocumentPlan, i: int, text: str, cutter: _Cutter, protector, write_number
) -> None:
    pieces = _LINE_BREAK.split(text)
    for k, piece in enumerate(pieces):
        if k % 2:  # a line break, kept as it was
            plan.add_literal(i, piece)
            continue
        inline = None
        if protector is not None:
            inline = _numbers_written(plain_inline(piece, protector), write_number)
            piece = inline.text
            if not inline.protected:  # nothing to put back: the text is the model input
                inline = None
        at = 0
        kept = [] if inline is None else [(x.start, x.end) for x in inline.protected]
        for a, b, continues in cutter.spans(piece, kept):
            plan.add_literal(i, piece[at:a])
            if inline is None:
                if has_words(piece[a:b]):
                    plan.add_segment(i, piece[a:b], None, continues)
                else:
                    plan.add_literal(i, piece[a:b])
            else:
                part = inline.slice(a, b)
                if not has_words(part.model_input()):
                    plan.add_literal(i, part.markup())
                else:
                    inner = part if part.needs_alignment else None
                    plan.add_segment(i, part.model_input(), inner, continues)
            at = b
        plan.add_literal(i, piece[at:])


def _plan_html(
    plan: DocumentPlan, i: int, document: str, cutter: _Cutter, protector, write_number
) -> None:
    for part in parse_html(document, protector):
        if isinstance(part, str):
            plan.add_literal(i, part)
            continue
        part = _numbers_written(part, write_number)
        text = part.text
        spans = cutter.spans(text, [(x.start, x.end) for x in part.protected])
        if not spans:  # only whitespace and markup: nothing to translate, all to keep
            plan.add_literal(i, part.restore("", []))
            continue
        # Slices cover the whole run, so that every tag lands in one of them; each keeps the
        # whitespace around its sentence when restored.
        bounds = [0] + [a for a, _, _ in spans[1:]] + [len(text)]
        for (x, y), (_, _, continues) in zip(zip(bounds, bounds[1:]), spans):
            sliced = part.slice(x, y)
            if has_words(sliced.model_input()):
                plan.add_segment(i, sliced.model_input(), sliced, continues)
            else:
                plan.add_literal(i, sliced.markup())
