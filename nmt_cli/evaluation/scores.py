"""Scores: sacreBLEU's BLEU, chrF and TER (with their signatures), per length bucket, and the
literature's lowercased-tokenized condition.

Standard condition: cased, detokenized hypotheses against raw references, sacreBLEU's own 13a
tokenization. ``lc_tok`` gives the condition most Multi30k papers report: the hypothesis goes
through Moses ``lowercase | normalize-punctuation -l L | tokenizer -l L`` (sacremoses, XML
escaping on) and is scored against references in the same condition with no further
tokenization: the official tokenized references are used as given, and any other reference (the
raw, cased one) is made so the same way, which reproduces the official ones from the raw.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import sacrebleu
from sacrebleu.metrics import BLEU, CHRF, TER

from nmt_cli.runtime.errors import UserError

METRICS = ("bleu", "chrf", "ter")
LENGTH_BUCKETS = ((0, 10), (10, 20), (20, 30), (30, None))
# A character that Moses tokenization writes as an XML entity, left raw: the text is untokenized
_RAW_CHARACTER = re.compile(r"['\"<>\[\]|]|&(?!(?:amp|apos|quot|lt|gt|#124|#91|#93);)")
# Tokenization splits a sentence's final stop off its last word
_GLUED_STOP = re.compile(r"\w[.!?]$")


@dataclass
class Score:
    metric: str
    score: float
    signature: str
    text: str  # sacreBLEU's one-line rendering

    def as_dict(self) -> dict:
        return {
            "metric": self.metric,
            "score": round(self.score, 2),
            "signature": self.signature,
            "text": self.text,
        }


def parse_metrics(spec: str) -> list[str]:
    names = [m.strip().lower() for m in spec.split(",") if m.strip()]
    bad = [m for m in names if m not in METRICS]
    if bad or not names:
        raise UserError(
            f"--metrics: unknown metric '{(bad or [spec])[0]}' (choose from {', '.join(METRICS)})"
        )
    return names


def moses_lc_tok(lines: Sequence[str], lang: str) -> list[str]:
    """lowercase | normalize-punctuation.perl -l L | tokenizer.perl -l L, as the references were
    made."""
    try:  # sacremoses is an optional dependency (the dev extra)
        from sacremoses import MosesPunctNormalizer, MosesTokenizer
        from sacremoses.corpus import NonbreakingPrefixes
    except ImportError:
        raise UserError("--lc-tok needs sacremoses: pip install sacremoses") from None
    # An unknown code would silently get English rules and scores that compare with nothing.
    known = sorted(code for code in NonbreakingPrefixes().available_langs if len(code) <= 3)
    if lang not in known:
        raise UserError(
            f"--lc-tok {lang}: sacremoses has no Moses rules for '{lang}' "
            f"(it has: {', '.join(known)})"
        )
    norm, tok = MosesPunctNormalizer(lang=lang), MosesTokenizer(lang=lang)
    return [
        tok.tokenize(norm.normalize(line.lower()), escape=True, return_str=True) for line in lines
    ]


def is_lc_tok(lines: Sequence[str]) -> bool:
    """Whether ``lines`` are already lowercased and Moses-tokenized, as the official tokenized
    references are: no uppercase letter, no character that tokenization escapes left raw, and a
    final stop glued to its word in at most one line in ten (tokenization splits it off; the
    official references keep a few, after a word Moses takes for an abbreviation)."""
    if any(line != line.lower() or _RAW_CHARACTER.search(line) for line in lines):
        return False
    glued = sum(1 for line in lines if _GLUED_STOP.search(line.rstrip()))
    return glued * 10 <= len(lines)


def lc_tok_references(refs: Sequence[str], lang: str) -> list[str]:
    """The references in the lowercased-tokenized condition: as given when they already are
    (:func:`is_lc_tok`), else made so as the hypotheses are (:func:`moses_lc_tok`)."""
    return list(refs) if is_lc_tok(refs) else moses_lc_tok(refs, lang)


def score(
    hyps: Sequence[str],
    refs: Sequence[str],
    metrics: Sequence[str] = METRICS,
    lc_tok: str | None = None,
) -> list[Score]:
    if len(hyps) != len(refs):
        raise UserError(
            f"hypotheses and references differ in length: {len(hyps)} vs {len(refs)} lines"
        )
    if not refs:
        raise UserError("nothing to score: the references are empty (0 lines)")
    hyps = list(hyps)
    if lc_tok:
        hyps, refs = moses_lc_tok(hyps, lc_tok), lc_tok_references(refs, lc_tok)
    out = []
    for name in metrics:
        if name == "bleu":
            metric = BLEU(tokenize="none", force=True) if lc_tok else BLEU()
        elif name == "chrf":
            metric = CHRF()
        else:
            metric = TER()
        result = metric.corpus_score(hyps, [list(refs)])
        sig = str(metric.get_signature())
        out.append(
            Score(
                name, float(result.score), sig, f"{result} {sig}" if name != "bleu" else str(result)
            )
        )
    return out


def bleu_by_length(
    sources: Sequence[str], hyps: Sequence[str], refs: Sequence[str], lc_tok: str | None = None
) -> list[dict]:
    """BLEU per source-length bucket (words): 0-10, 10-20, 20-30, 30+ (Bahdanau et al. 2015,
    Fig. 2)."""
    if not (len(sources) == len(hyps) == len(refs)):
        raise UserError(
            f"sources, hypotheses and references differ in length: "
            f"{len(sources)}, {len(hyps)}, {len(refs)} lines"
        )
    if lc_tok:
        hyps, refs = moses_lc_tok(hyps, lc_tok), lc_tok_references(refs, lc_tok)
    rows = []
    for lo, hi in LENGTH_BUCKETS:
        idx = [
            i
            for i, s in enumerate(sources)
            if lo <= len(s.split()) and (hi is None or len(s.split()) < hi)
        ]
        label = f"{lo}-{hi}" if hi is not None else f"{lo}+"
        if not idx:
            rows.append({"bucket": label, "sentences": 0, "bleu": None})
            continue
        metric = BLEU(tokenize="none", force=True) if lc_tok else BLEU()
        bleu = metric.corpus_score([hyps[i] for i in idx], [[refs[i] for i in idx]]).score
        rows.append({"bucket": label, "sentences": len(idx), "bleu": round(bleu, 2)})
    return rows


def sacrebleu_version() -> str:
    return sacrebleu.__version__
