"""A translation's confidence in [0, 1], from what the model knows about its own output.

The features (``features``): the mean log-probability per target token (EOS included), the
n-best margin (the best hypothesis's length-normalised score minus the second's, when the search
kept a second), and, where the attention weights were kept, the attention's coverage of the
source (GNMT's coverage penalty, Wu et al. 2016: Σ_j log min(Σ_i a_ij, 1), per source token) and
its mean entropy per target token. docs/translate.md ranks held-out sentences by each and by
their combinations against sentence chrF (bench/confidence.py); ``confidence_of`` uses the
mean log-probability per token that measure chose:

    confidence = exp(mean log p(y_i | y_<i, x)),

the geometric mean of the per-token probabilities, which is in [0, 1] by construction. A text
translated in several segments has the confidence of their hypotheses joined into one
(``joined_confidence``): exp(Σ_s log p(y_s | x_s) / Σ_s (|y_s| + 1)), the same mean over all of
its tokens (docs/translate.md#confidence says why not the product or the minimum).
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def features(hyps: Sequence, src_len: int) -> dict[str, float]:
    """The model's evidence about the best of ``hyps`` (search Hypotheses, best first)."""
    best = hyps[0]
    out = {
        "mean_logp": best.score / (len(best.tokens) + 1),
        "norm_score": best.norm_score,
        "length_ratio": (len(best.tokens) + 1) / max(src_len, 1),
    }
    if len(hyps) > 1:
        out["margin"] = best.norm_score - hyps[1].norm_score
    if best.attention is not None and best.attention.numel():
        a = best.attention.float()
        coverage = a.sum(dim=0).clamp(max=1.0).clamp(min=1e-6).log().mean()
        entropy = -(a.clamp(min=1e-9).log() * a).sum(dim=1).mean()
        out["coverage"] = float(coverage)
        out["entropy"] = float(entropy)
    return out


def confidence_of(hyps: Sequence, src_len: int) -> float | None:
    """confidence = exp(mean log-probability per token) of the best hypothesis (module doc);
    None when there is none (an empty line)."""
    if not hyps:
        return None
    best = hyps[0]
    return mean_probability(best.score, len(best.tokens) + 1)


def joined_confidence(best: Sequence) -> float | None:
    """The confidence of consecutive segments' best hypotheses joined into one translation:
    exp(Σ_s score_s / Σ_s (|y_s| + 1)), their tokens' geometric-mean probability (module doc);
    None when there is none. One segment gives its own :func:`confidence_of`."""
    if not best:
        return None
    tokens = sum(len(h.tokens) + 1 for h in best)
    return mean_probability(sum(h.score for h in best), tokens)


def mean_probability(score: float, terms: int) -> float:
    """exp(score / terms): the geometric-mean probability of ``terms`` tokens whose
    log-probabilities sum to ``score``, kept in [0, 1]."""
    return min(1.0, max(0.0, math.exp(score / terms)))
