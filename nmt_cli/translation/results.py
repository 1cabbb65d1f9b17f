"""What a translation call gives back: one :class:`Translation` per input line, its n best as
:class:`Alternative`, and :func:`combined`, the Translation of consecutive segments translated
apart as one text's (the document layer's join, nmt_cli/documents/layer.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from nmt_cli.decoding.search import Hypothesis
from nmt_cli.translation.confidence import joined_confidence, mean_probability
from nmt_cli.translation.words import WordAttention


@dataclass
class Alternative:
    """One of the n best translations of a sentence."""

    text: str
    score: float  # total log-probability, EOS included
    norm_score: float  # the length-penalised score the search ranked by
    # (source word, target word) pairs over the words of ``text``, as Translation.alignment;
    # filled when alignments are asked for.
    alignment: list[tuple[int, int]] | None = None
    coverage: list[tuple[int, int]] | None = None  # as Translation.coverage
    confidence: float | None = None  # in [0, 1], nmt_cli/translation/confidence.py
    length: int = 0  # target tokens, EOS left out, for joining confidences


@dataclass
class Translation:
    """The result for one input line; ``alignment`` and ``attention`` are filled when asked for."""

    source: str
    text: str
    hypotheses: list[Hypothesis]
    src_ids: list[int]
    truncated: bool = False
    alternatives: list[Alternative] = field(default_factory=list)  # the n best, best first
    alignment: list[tuple[int, int]] | None = None  # (source word, target word), as --alignments
    # Each source word the alignment leaves out with the target word attending to it most, over
    # the words of the text as decoded (nmt_cli/translation/words.py source_coverage); filled when
    # coverage is asked for, read by the document layer before it puts tags back.
    coverage: list[tuple[int, int]] | None = None
    attention: WordAttention | None = None
    # The direction asked of a multilingual model (nmt_cli/translation/routing.py): the languages,
    # and whether the model was trained on it (None where the source was not named); None alike for
    # a one-pair model.
    source_lang: str | None = None
    target_lang: str | None = None
    zero_shot: bool | None = None
    # In [0, 1], nmt_cli/translation/confidence.py; None for an empty line.
    confidence: float | None = None
    # A stored correction answered it, not the model (nmt_cli/documents/recall.py).
    from_memory: bool = False

    @property
    def score(self) -> float:
        """The best translation's log-probability (0 for an empty line)."""
        return self.hypotheses[0].score if self.hypotheses else 0.0


def empty_translation(source: str = "") -> Translation:
    """The Translation of a blank line: nothing was decoded."""
    return Translation(source, "", [], [])


def kth(tr: Translation, k: int) -> Alternative | None:
    """A segment's k-th alternative, its best where it has fewer; None where it has none."""
    if not tr.alternatives:
        return None
    return tr.alternatives[k] if k < len(tr.alternatives) else tr.alternatives[0]


def combined(
    source: str,
    sources: Sequence[str],
    parts: Sequence[Translation],
    texts: Sequence[str],
) -> Translation:
    """One Translation of the consecutive segments ``sources`` of the text ``source``, translated
    apart as ``parts``; ``texts``: the whole text's translation, best first, one per alternative.

    The segments are independent parts of one output, so the log-probabilities add,
    log p(y | x) = Σ_s log p(y_s | x_s), for the best and for each k-th alternative (a segment
    with fewer gives its best); the confidence is that of the joined hypothesis
    (:func:`nmt_cli.translation.confidence.joined_confidence`), for each alternative of its
    segments' k-th joined alike; the alignment (the best's and each alternative's) and the
    attention are each segment's, shifted past the words before it (a target word attends to its
    own segment's source words only)."""
    best = [tr.hypotheses[0] for tr in parts if tr.hypotheses]
    depth = max((len(tr.alternatives) for tr in parts), default=0)
    aligned = any(tr.alignment is not None for tr in parts)
    alternatives = []
    for k in range(depth):
        ks = [kth(tr, k) for tr in parts]
        present = [a for a in ks if a is not None]
        score, norm_score = _sums(present, "score", "norm_score")
        alternatives.append(
            Alternative(
                texts[min(k, len(texts) - 1)],
                score,
                norm_score,
                alignment=_shifted(sources, [_aligned(a) for a in ks]) if aligned else None,
                confidence=mean_probability(score, sum(a.length + 1 for a in present)),
                length=sum(a.length for a in present),
            )
        )
    # The joined hypothesis has no attention matrix: each segment's has its own EOS row.
    hypotheses = (
        [Hypothesis([t for h in best for t in h.tokens], *_sums(best, "score", "norm_score"))]
        if best
        else []
    )
    first = parts[0] if parts else empty_translation()
    return Translation(
        source,
        texts[0],
        hypotheses,
        [t for tr in parts for t in tr.src_ids],
        any(tr.truncated for tr in parts),
        alternatives,
        alignment=side_by_side(sources, parts) if aligned else None,
        attention=joined_attention([tr.attention for tr in parts]),
        source_lang=first.source_lang,
        target_lang=first.target_lang,
        zero_shot=first.zero_shot,
        confidence=joined_confidence(best),
    )


def _sums(items: Sequence, *names: str) -> list[float]:
    return [sum(getattr(x, name) for x in items) for name in names]


def side_by_side(sources: Sequence[str], parts: Sequence[Translation]) -> list[tuple[int, int]]:
    """The word alignment of consecutive segments ``sources`` translated apart as ``parts``, as
    one text's: each segment's pairs shifted past the source and target words before it."""
    return _shifted(sources, [(tr.alignment, tr.text) for tr in parts])


def _aligned(alternative: Alternative | None) -> tuple[list[tuple[int, int]] | None, str]:
    return (None, "") if alternative is None else (alternative.alignment, alternative.text)


def _shifted(
    sources: Sequence[str], parts: Sequence[tuple[list[tuple[int, int]] | None, str]]
) -> list[tuple[int, int]]:
    """(alignment, translation) of each segment in ``sources`` as one text's pairs."""
    pairs, src_at, tgt_at = [], 0, 0
    for segment, (alignment, text) in zip(sources, parts):
        pairs += [(a + src_at, b + tgt_at) for a, b in alignment or []]
        src_at += len(segment.split())
        tgt_at += len(text.split())
    return pairs


def _block(matrices: Sequence[list[list[float]]]) -> list[list[float]]:
    """Matrices side by side on the diagonal, zeros elsewhere."""
    width = sum(len(m[0]) if m else 0 for m in matrices)
    out, at = [], 0
    for m in matrices:
        w = len(m[0]) if m else 0
        out += [[0.0] * at + list(row) + [0.0] * (width - at - w) for row in m]
        at += w
    return out


def joined_attention(parts: Sequence[WordAttention | None]) -> WordAttention | None:
    """The word and piece attention of segments translated apart, as one block-diagonal whole;
    None where a segment has none."""
    if not parts or any(p is None for p in parts):
        return None
    if len(parts) == 1:
        return parts[0]
    return WordAttention(
        [w for p in parts for w in p.source_pieces],
        [w for p in parts for w in p.target_pieces],
        _block([p.piece_weights for p in parts]),
        [w for p in parts for w in p.source_words],
        [w for p in parts for w in p.target_words],
        _block([p.weights for p in parts]),
    )
