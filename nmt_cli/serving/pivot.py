"""Language pairs the served models give, directly or through a shared language.

A pair no model translates is served through a pivot where one model translates the source into
some language and another translates that language into the target (en→fr and fr→de give en→de):
the first model's best translation is the second's input. A direct model always wins; among
pivots, the models given first on the command line do. A multilingual model's direction it was not
trained on (zero-shot) serves a pair only where no pivot through trained directions does: its
zero-shot translations are mostly in the wrong language, a pivot's are not
(docs/results.md#zero-shot-against-pivoting-through-english). A request that names the zero-shot
model still gets it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from nmt_cli.documents.plan import DocumentPlan
from nmt_cli.serving.models import ServedModel
from nmt_cli.translation.results import Translation


@dataclass(frozen=True)
class Route:
    """The models a pair goes through: one, or two chained through ``pivot``."""

    steps: tuple[ServedModel, ...]

    @property
    def source(self) -> str:
        return self.steps[0].source

    @property
    def target(self) -> str:
        return self.steps[-1].target

    @property
    def pivot(self) -> str | None:
        return self.steps[0].target if len(self.steps) > 1 else None

    @property
    def first(self) -> ServedModel:
        return self.steps[0]

    @property
    def last(self) -> ServedModel:
        return self.steps[-1]


def chained(first: Translation | None, second: Translation | None) -> Translation | None:
    """The Translation of a line through a pivot: the second model's, with the first's
    truncation, the product of the two legs' confidences (a poor first leg makes a poor
    translation however sure the second is: docs/results.md#confidence-through-a-pivot) and,
    where both have one, the alignment composed through the pivot's words (source word i and
    target word k are aligned where some pivot word j links them)."""
    if first is None or second is None:
        return second
    alignment = second.alignment
    if first.alignment is not None and second.alignment is not None:
        via: dict[int, list[int]] = {}
        for i, j in first.alignment:
            via.setdefault(j, []).append(i)
        alignment = sorted({(i, k) for j, k in second.alignment for i in via.get(j, ())})
    confidence = second.confidence
    if first.confidence is not None and second.confidence is not None:
        confidence = first.confidence * second.confidence
    truncated = first.truncated or second.truncated
    return replace(second, truncated=truncated, alignment=alignment, confidence=confidence)


def rejoined(plan: DocumentPlan, pieces: Sequence[Translation], texts: Sequence[str]) -> list:
    """The second leg's Translation of each pivot text of ``texts``, from ``pieces``, the
    Translations of ``plan``'s segments (the texts cut as `nmt translate` cuts its input; an
    empty Translation for a blank segment), joined as every text's segments are
    (:meth:`DocumentPlan.joined`); None for a blank text."""
    return [
        replace(plan.joined(i, pieces), source=text) if plan.segments_of(i) else None
        for i, text in enumerate(texts)
    ]


def routes(models: Sequence[ServedModel]) -> dict[tuple[str, str], Route]:
    """Every pair served, each with the route that serves it: a model trained on the pair, else
    two chained through a shared language, else a zero-shot direction."""
    trained = [m for m in models if not m.zero_shot]
    out: dict[tuple[str, str], Route] = {}
    for m in trained:
        out.setdefault((m.source, m.target), Route((m,)))
    for a in trained:
        for b in trained:
            if a.target == b.source and a.source != b.target:
                out.setdefault((a.source, b.target), Route((a, b)))
    for m in models:
        out.setdefault((m.source, m.target), Route((m,)))
    return out


def languages(models: Sequence[ServedModel]) -> dict[str, list[str]]:
    """Every language served as a source or a target, with the targets it translates into."""
    pairs = routes(models)
    out: dict[str, list[str]] = {}
    for m in models:
        out.setdefault(m.source, [])
        out.setdefault(m.target, [])
    for source, target in pairs:
        out[source].append(target)
    return out
