"""Segments answered without decoding: a stored correction of the sentence (a translation
memory), else the model's own earlier translation of it with the same options (a cache).

The document layer looks a plan's segments up here before it decodes (:meth:`Recall.split`),
decodes only the rest, and puts the two back in the plan's order
(:meth:`Recollection.merged`); so a corrected sentence is served alone or inside a paragraph,
in plain text or HTML, and every output (joins, confidences, n-best) treats it as any segment.

A memory entry matches a sentence whose text equals its source once runs of whitespace are one
space and the ends are trimmed (:func:`memory_key`); a sentence the layer cut into clauses (past
the model's source limit) is matched whole, its first segment answered with the correction and
the others with nothing, and so is a whole plain text of several sentences corrected as one
(LibreTranslate's page sends the whole text it translated). A sentence carrying tags or
protected spans to put back (they need the word alignment the model makes) is left to the
model. A memory answer is marked ``from_memory``, with confidence 1 and no alignment. Where a
call forces prefixes, nothing is looked up: each prefix belongs to its own sentence.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from nmt_cli.documents.plan import DocumentPlan
from nmt_cli.translation.cache import TranslationCache, options_key
from nmt_cli.translation.contract import TranslateOptions
from nmt_cli.translation.results import Alternative, Translation


class SentenceMemory(Protocol):
    """Stored translations of whole sentences, such as `nmt serve --suggestions`' store."""

    def recall(self, source: str, target: str, key: str) -> str | None:
        """The stored translation of the sentence whose :func:`memory_key` is ``key`` from
        ``source`` into ``target``; None where there is none."""
        ...


def memory_key(text: str) -> str:
    """``text`` as a memory matches it: runs of whitespace one space, the ends trimmed."""
    return " ".join(text.split())


def memory_translation(source: str, text: str) -> Translation:
    """The Translation of segment ``source`` that a memory answered with ``text``."""
    words = len(text.split())
    best = Alternative(text, 0.0, 0.0, confidence=1.0, length=words)
    return Translation(source, text, [], [], alternatives=[best], confidence=1.0, from_memory=True)


@dataclass
class Recollection:
    """A plan's segments split into those found (``found``: segment -> Translation; of them,
    ``memory`` came from the memory, out of ``remembering`` looked up there) and those to decode
    (``todo``, in order), with the cache keys the decoded ones are kept under."""

    count: int
    found: dict[int, Translation] = field(default_factory=dict)
    memory: set[int] = field(default_factory=set)
    remembering: int = 0
    todo: list[int] = field(default_factory=list)
    cache: TranslationCache | None = None
    keys: dict[int, Hashable] = field(default_factory=dict)

    def merged(self, decoded: Sequence[Translation]) -> list[Translation]:
        """One Translation per segment of the plan: the found ones and ``decoded`` (those of
        :attr:`todo`, in order) in place."""
        if len(decoded) != len(self.todo):
            raise ValueError(f"{len(decoded)} translations for {len(self.todo)} segments")
        out: list = [None] * self.count
        for s, tr in self.found.items():
            out[s] = tr
        for s, tr in zip(self.todo, decoded):
            out[s] = tr
        return out

    def keep(self, translations: Sequence[Translation]) -> None:
        """Cache the final translations (after the layer's second pass) of the decoded
        segments."""
        if self.cache is None:
            return
        for s, key in self.keys.items():
            self.cache.put(key, translations[s])


def everything(plan: DocumentPlan) -> Recollection:
    """Nothing found: every segment of ``plan`` to decode."""
    count = len(plan.segments)
    return Recollection(count, todo=list(range(count)))


@dataclass
class Recall:
    """Where ``model`` (a hashable naming what decodes: the model or the chain of models) looks
    segments up before translating from ``source`` into ``target``: ``memory``, then
    ``cache``; either may be None."""

    source: str
    target: str
    model: Hashable
    memory: SentenceMemory | None = None
    cache: TranslationCache | None = None

    def split(self, plan: DocumentPlan, options: TranslateOptions) -> Recollection:
        """``plan``'s segments found and to decode; ``options``: the segments' translate options
        (:func:`nmt_cli.documents.layer.segment_options`)."""
        if options.prefixes is not None:
            return everything(plan)
        out = Recollection(len(plan.segments), cache=self.cache)
        if self.memory is not None:
            self._remember(plan, out)
        # a segment's key: the options it is decoded with (DocumentPlan.options_for)
        keys: dict[tuple[bool, bool], tuple | None] = {}
        for s, text in enumerate(plan.segments):
            if s in out.found:
                continue
            decoded = plan.options_for(s, options)
            kind = (decoded.alignments, decoded.coverage)
            if self.cache is not None and kind not in keys:
                keys[kind] = options_key(decoded)
            decoded_as = keys.get(kind)
            if decoded_as is not None:
                key = (self.model, decoded_as, text)
                cached = self.cache.get(key)
                if cached is not None:
                    out.found[s] = replace(cached, source=text)
                    continue
                out.keys[s] = key
            out.todo.append(s)
        return out

    def _remember(self, plan: DocumentPlan, out: Recollection) -> None:
        """The memory's answers: for a whole plain text of several sentences corrected as one
        (as LibreTranslate's page sends a correction), else for each sentence."""
        for i in sorted(set(plan.text_of)):  # the texts with segments
            ids = plan.segments_of(i)
            if len(ids) > 1 and all(plan.inline_of(s) is None for s in ids):
                self._recall(plan, ids, plan.source(i), out, count_miss=False)
        for sentence in sentences(plan):
            if sentence[0] in out.found or any(plan.aligned(s) for s in sentence):
                continue
            text = " ".join(plan.segments[s] for s in sentence)
            self._recall(plan, sentence, text, out, count_miss=True)

    def _recall(self, plan, ids: list[int], text: str, out: Recollection, count_miss: bool):
        """Segments ``ids``, whose text is ``text``, answered by its correction where there is
        one: the whole correction with the first, nothing with the others."""
        stored = self.memory.recall(self.source, self.target, memory_key(text))
        if stored is None and not count_miss:
            return
        out.remembering += len(ids)
        if stored is None:
            return
        for k, s in enumerate(ids):
            out.found[s] = memory_translation(plan.segments[s], stored if k == 0 else "")
            out.memory.add(s)


def sentences(plan: DocumentPlan) -> list[list[int]]:
    """``plan``'s segments grouped by sentence: a sentence cut into clauses at the model's
    source limit is one group."""
    out: list[list[int]] = []
    for s in range(len(plan.segments)):
        if out and plan.continues(s):
            out[-1].append(s)
        else:
            out.append([s])
    return out
