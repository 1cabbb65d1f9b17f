"""Which of the model's own signals ranks translations by quality: each confidence feature of
nmt_cli/translation/confidence.py, and simple combinations, against sentence chrF on a held-out
split.

    python bench/confidence.py -m runs/en-fr [--split valid] [--beam-size 5] [--threads 1]

Decodes the split with the run's recipe (beam 5 by default), keeping two hypotheses and the
attention, and prints a Markdown table: per feature, Spearman's and Pearson's correlation with
sentence chrF, and the mean chrF of the more and of the less confident half.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np


def ranks(x: np.ndarray) -> np.ndarray:
    order = x.argsort(kind="stable")
    out = np.empty(len(x))
    out[order] = np.arange(len(x))
    return out


def print_table(signals: dict[str, np.ndarray], quality: np.ndarray, first: str) -> None:
    """A Markdown table: per signal, Spearman's and Pearson's correlation with ``quality``
    (sentence chrF) and the mean quality of the more and of the less confident half."""
    print(f"| {first} | Spearman | Pearson | chrF, more confident half | less confident half |")
    print("|---|---|---|---|---|")
    for name, value in signals.items():
        spearman = np.corrcoef(ranks(value), ranks(quality))[0, 1]
        pearson = np.corrcoef(value, quality)[0, 1]
        order = value.argsort(kind="stable")
        half = len(order) // 2
        low, high = quality[order[:half]].mean(), quality[order[half:]].mean()
        print(f"| {name} | {spearman:.3f} | {pearson:.3f} | {high:.2f} | {low:.2f} |")


def zscore(x: np.ndarray) -> np.ndarray:
    return (x - x.mean()) / (x.std() or 1.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", type=Path, required=True, help="run dir")
    ap.add_argument("--split", default="valid", help="stored split (valid, test, test1, ...)")
    ap.add_argument("--beam-size", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    from sacrebleu.metrics import CHRF

    from nmt_cli.translation.confidence import confidence_of, features
    from nmt_cli.translation.translator import Translator

    data = args.model / "data"
    sources = (data / f"{args.split}.src.txt").read_text(encoding="utf-8").split("\n")[:-1]
    refs = (data / f"{args.split}.tgt.txt").read_text(encoding="utf-8").split("\n")[:-1]
    translator = Translator.load(args.model, threads=args.threads, beam_size=args.beam_size)
    out = translator.translate(sources, nbest=2, weights=True)
    chrf = CHRF()
    quality = np.array([chrf.sentence_score(t.text, [r]).score for t, r in zip(out, refs)])
    rows = [features(t.hypotheses, len(t.src_ids)) for t in out]
    names = sorted({k for r in rows for k in r})
    table = {n: np.array([r.get(n, 0.0) for r in rows]) for n in names}
    table["confidence"] = np.array([confidence_of(t.hypotheses, len(t.src_ids)) for t in out])
    table["mean_logp+margin"] = zscore(table["mean_logp"]) + zscore(table["margin"])
    table["mean_logp+coverage"] = zscore(table["mean_logp"]) + zscore(table["coverage"])
    table["mean_logp+margin+coverage"] = table["mean_logp+margin"] + zscore(table["coverage"])
    table["mean_logp-entropy"] = zscore(table["mean_logp"]) - zscore(table["entropy"])
    print(
        f"{args.model} {args.split}: {len(out)} sentences, beam {args.beam_size}, "
        f"mean sentence chrF {quality.mean():.2f}"
    )
    print_table(table, quality, "signal")


def run(main, label: str) -> None:
    """``main()``, a missing file or run dir ending in one line rather than a traceback."""
    from nmt_cli.runtime.errors import UserError

    try:
        main()
    except (OSError, UserError) as exc:
        sys.exit(f"{label}: {exc}")


if __name__ == "__main__":
    run(main, "confidence")
