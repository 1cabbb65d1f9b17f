"""The document layer as `nmt serve` uses it: a request's texts become segments
(nmt_cli/documents/layer.py's plan_documents), the segments of all its texts are decoded together
through the service's batcher, and each text is put back whole by the layer's one join
(DocumentPlan.joined: its whitespace and markup in place, scores added, one confidence,
alignments and attention side by side)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import lru_cache

from nmt_cli.documents.layer import (
    DocumentPlan,
    Retry,
    build_protector,
    long_only,
    plan_documents,
    segment_calls,
    segment_counter,
    segment_options,
)
from nmt_cli.documents.markup import MarkupTooDeep
from nmt_cli.documents.numbers import number_writer
from nmt_cli.documents.recall import everything
from nmt_cli.serving.request_body import RequestError
from nmt_cli.translation.contract import TranslateOptions, Translating
from nmt_cli.translation.results import Translation, empty_translation


@lru_cache(maxsize=64)
def _protector(translator: Translating, numbers: str):
    """The built-in protected spans (numbers as ``numbers`` says) and the characters
    ``translator``'s vocabulary lacks: made once per served model, not per request."""
    return build_protector((), translator.tokenizer, translator.lowercase, numbers)


@lru_cache(maxsize=64)
def _counter(translator: Translating, restore_case: bool):
    return segment_counter(translator, restore_case)


def plan_texts(
    route,
    texts: Sequence[str],
    fmt: str = "text",
    *,
    split_sentences: bool = True,
    protect: bool = True,
    patterns: tuple[str, ...] = (),
    numbers: str = "keep",
    restore_case: bool = True,
) -> DocumentPlan:
    """The DocumentPlan of a request's texts for ``route``'s source language and first model:
    sentences cut as `nmt translate` cuts them, placeholders and URLs kept verbatim (``protect``
    False: nothing kept, for a pivot's translations, whose protected spans the first leg left
    out); ``split_sentences`` False: each line one segment, never cut (a forced prefix's
    sentence); ``patterns``: more spans to keep (a subtitle file's timestamp tags);
    ``numbers``, ``restore_case``: as TranslateOptions has them (how numbers are carried; whether
    a segment's length is counted in sentence case)."""
    translator = route.first.translator
    protector = _protector(translator, numbers) if protect else None
    if protect and patterns:
        protector = build_protector(patterns, translator.tokenizer, translator.lowercase, numbers)
    limit = translator.config.max_segment_tokens if split_sentences else 0
    try:
        return plan_documents(
            texts,
            fmt=fmt,
            language=route.source,
            split_sentences=split_sentences,
            protector=protector,
            max_tokens=limit,
            count_tokens=long_only(_counter(translator, restore_case), limit),
            write_number=number_writer(numbers, route.source, route.target) if protect else None,
        )
    except MarkupTooDeep as exc:
        raise RequestError(400, f"Invalid request: {exc}") from None


def filled(results: list) -> list[Translation]:
    """The batcher's results with an empty Translation for each blank segment (None)."""
    return [r if r is not None else empty_translation() for r in results]


async def _decoded(service, route, segments: list[str], options, most: int | None) -> list:
    """The batcher's Translations of ``segments``, asked ``most`` at a time (all at once: None)."""
    step = most or max(len(segments), 1)
    out: list = []
    for at in range(0, len(segments), step):
        out.extend(filled(await service.translate(route, segments[at : at + step], options)))
    return out


async def translate_plan(
    service, route, plan: DocumentPlan, options: TranslateOptions, most: int | None = None
) -> list[Translation]:
    """The Translations of ``plan``'s segments through ``route``, as `nmt translate` makes them:
    those the service's memory or cache has answered at once (nmt_cli/documents/recall.py), the
    rest decoded with every other request's, then (but under a prefix) a decoded segment whose
    translation dropped most of its words translated again in parts, the document layer's
    second pass. A request's segments are counted against the service's limit; a file's
    (``most`` given) are asked ``most`` at a time instead, so that a long document never holds
    more of the queue than that."""
    if most is None:
        service.check_count(len(plan.segments))
    asked = segment_options(plan, options)
    recall = service.recall.of(route)
    found = everything(plan) if recall is None else recall.split(plan, asked)
    service.recall.observe(found)
    decoded: dict[int, Translation] = {}
    for call, segments in segment_calls(plan, asked, found.todo):
        texts = [plan.segments[s] for s in segments]
        decoded.update(zip(segments, await _decoded(service, route, texts, call, most)))
    results = found.merged([decoded[s] for s in found.todo])
    if options.prefixes is None:
        retry = Retry(plan, results, kept=found.found)
        if retry.segments:
            again_options = replace(options, warn_cut=False)
            results = retry.replaced(
                await _decoded(service, route, retry.segments, again_options, most)
            )
    found.keep(results)
    return results


def texts_json(
    plan: DocumentPlan, results: list[Translation], one: Callable[[Translation], dict]
) -> list[dict]:
    """The native answer for each text: ``one`` of its whole translation (the layer's join of
    its segments), with how many segments it had, whether one was cut, and which (numbered
    from 0) came from the translation memory."""
    cut = plan.cut(results)
    out = []
    for i, was_cut in enumerate(cut):
        answer = one(plan.joined(i, results))
        ids = plan.segments_of(i)
        answer["segments"] = len(ids)
        answer["cut"] = was_cut
        answer["memory"] = [k for k, s in enumerate(ids) if results[s].from_memory]
        out.append(answer)
    return out
