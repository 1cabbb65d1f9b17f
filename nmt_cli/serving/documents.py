"""The document layer as `nmt serve` uses it: a request's texts become segments
(nmt_cli/documents/layer.py's plan_documents), the segments of all its texts are decoded together,
and each text is put back with its whitespace and markup; the native answer of a text of several
segments merges theirs (scores added, alignments and attention side by side)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from functools import lru_cache

from nmt_cli.documents.layer import (
    alignment_side_by_side,
    build_protector,
    plan_documents,
    retry_short,
    segment_counter,
)
from nmt_cli.serving.request_body import RequestError


@lru_cache(maxsize=64)
def _protector(translator):
    """The built-in protected spans and the characters ``translator``'s vocabulary lacks: made
    once per served model, not per request."""
    return build_protector((), translator.tokenizer, translator.lowercase)


@lru_cache(maxsize=64)
def _counter(translator):
    return segment_counter(translator)


def plan_texts(
    route,
    texts: Sequence[str],
    fmt: str = "text",
    *,
    split_sentences: bool = True,
    protect: bool = True,
):
    """The DocumentPlan of a request's texts for ``route``'s source language and first model:
    sentences cut as `nmt translate` cuts them, placeholders and URLs kept verbatim (``protect``
    False: nothing kept, for a pivot's translations, whose protected spans the first leg left
    out); ``split_sentences`` False: each line one segment, never cut (a forced prefix's
    sentence)."""
    translator = route.first.translator
    limit = translator.config.max_segment_tokens if split_sentences else 0
    count = _counter(translator)
    try:
        return plan_documents(
            texts,
            fmt=fmt,
            language=route.source,
            split_sentences=split_sentences,
            protector=_protector(translator) if protect else None,
            max_tokens=limit,
            # a subword has at least one character: shorter texts are never counted
            count_tokens=lambda text: count(text) if len(text) >= limit else 0,
        )
    except ImportError:  # the HTML reader is not in this installation
        raise RequestError(400, f"{fmt} format is not supported") from None


def filled(results: list) -> list:
    """The batcher's results with an empty Translation for each blank segment (None)."""
    from nmt_cli.translation.translator import Translation

    return [r if r is not None else Translation("", "", [], []) for r in results]


class _ThroughTheService:
    """A translator for the document layer's second pass (run in a worker thread): its
    sentences go through the service's batcher like any request's."""

    def __init__(self, service, route, loop):
        self.service, self.route, self.loop = service, route, loop

    def translate(self, lines, beam_size=None, **_options):
        beam = beam_size or self.route.last.translator.config.beam_size
        asked = self.service.translate(self.route, list(lines), beam_size=beam, nbest=1)
        return filled(asyncio.run_coroutine_threadsafe(asked, self.loop).result())


async def translate_plan(
    service, route, plan, *, beam_size: int, nbest: int, second_pass: bool = True, **options
) -> list:
    """The Translations of ``plan``'s segments through ``route``, as `nmt translate` makes them:
    decoded with every other request's, then (``second_pass``; `nmt translate --alignments`
    has none) a segment whose translation dropped most of its words translated again in parts,
    the document layer's second pass."""
    results = await service.translate(
        route, plan.segments, beam_size=beam_size, nbest=nbest, **options
    )
    results = filled(results)
    if not second_pass:
        return results
    helper = _ThroughTheService(service, route, asyncio.get_running_loop())
    return await asyncio.to_thread(retry_short, helper, plan, results, beam_size)


def _kth(tr, k: int):
    return tr.alternatives[min(k, len(tr.alternatives) - 1)] if tr.alternatives else None


def texts_json(plan, results: list, nbest: int, alignments: bool, attention: bool, one) -> list:
    """The native answer for each text: ``one(translation)`` where it is one segment (its texts
    then the assembled ones, whitespace kept), else its segments merged."""
    versions = [plan.assemble(results, alternative=k) for k in range(max(nbest, 1))]
    cut = plan.cut(results)
    return [
        _text_json(plan, i, results, [v[i] for v in versions], cut[i], alignments, attention, one)
        for i in range(len(versions[0]))
    ]


def _text_json(plan, i, results, texts, cut, alignments, attention, one) -> dict:
    nbest = len(texts)
    segments = [results[s] for s in plan.segments_of(i)]
    if len(segments) == 1:
        out = one(segments[0])
        out["text"] = texts[0]
        for k, entry in enumerate(out["nbest"]):
            entry["text"] = texts[k]
    else:
        out = {
            "text": texts[0],
            "score": round(sum(tr.score for tr in segments), 4),
            "nbest": [
                {
                    "text": texts[k],
                    "score": round(sum(a.score for tr in segments if (a := _kth(tr, k))), 4),
                    "norm_score": round(
                        sum(a.norm_score for tr in segments if (a := _kth(tr, k))), 4
                    ),
                }
                for k in range(nbest)
            ],
        }
        if alignments:
            sources = [plan.segments[s] for s in plan.segments_of(i)]
            pairs = alignment_side_by_side(sources, segments)
            out["alignment"] = " ".join(f"{a}-{b}" for a, b in pairs)
        if attention:
            out["attention"] = merged_attention([tr.attention for tr in segments])
    out["segments"] = len(segments)
    out["cut"] = cut
    return out


def _block(rows_of: list[list[list[float]]]) -> list[list[float]]:
    """Matrices side by side on the diagonal, zeros elsewhere."""
    width = sum(len(m[0]) if m else 0 for m in rows_of)
    out, at = [], 0
    for m in rows_of:
        w = len(m[0]) if m else 0
        out += [[0.0] * at + [round(x, 4) for x in row] + [0.0] * (width - at - w) for row in m]
        at += w
    return out


def merged_attention(parts: list) -> dict | None:
    """The word and piece attention of segments translated apart, as one block-diagonal whole:
    each target word attends to its own segment's source words only."""
    if any(p is None for p in parts):
        return None
    return {
        "source_words": [w for p in parts for w in p.source_words],
        "target_words": [w for p in parts for w in p.target_words],
        "weights": _block([p.weights for p in parts]),
        "source_pieces": [w for p in parts for w in p.source_pieces],
        "target_pieces": [w for p in parts for w in p.target_pieces],
        "piece_weights": _block([p.piece_weights for p in parts]),
    }
