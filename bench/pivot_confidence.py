"""Which confidence ranks translations made through a pivot by quality: the second leg's, the
first leg's, the lower of the two, or their product, against sentence chrF.

    python bench/pivot_confidence.py --first runs/multilingual --second runs/multilingual \
        --source fr --via en --target de --src test.fr --ref test.de [--lines 1000] [--threads 1]

The first model's best translation of each line, whole, is the second's input (the recipes'
beam); ``--source``, ``--via``, ``--target`` name the languages a
multilingual model is asked for (a one-pair model ignores them). Prints a Markdown table: per
rule, Spearman's and Pearson's correlation with sentence chrF and the mean chrF of the more
and of the less confident half.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from confidence import print_table, run  # bench/confidence.py


def read(path: Path, n: int) -> list[str]:
    import gzip

    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        lines = f.read().split("\n")
    return [line for line in lines[:-1] if line.strip()][: n or None]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--first", type=Path, required=True, help="run dir: source -> via")
    ap.add_argument("--second", type=Path, required=True, help="run dir: via -> target")
    ap.add_argument("--source", required=True)
    ap.add_argument("--via", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--src", type=Path, required=True, help="sources (.gz read as gzip)")
    ap.add_argument("--ref", type=Path, required=True, help="target references")
    ap.add_argument("--lines", type=int, default=1000, help="first N line pairs (0 = all)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    from sacrebleu.metrics import CHRF

    from nmt_cli.translation.translator import Translator

    sources, refs = read(args.src, args.lines), read(args.ref, args.lines)
    first = Translator.load(args.first, threads=args.threads)
    second = (
        first if args.second == args.first else Translator.load(args.second, threads=args.threads)
    )
    leg1 = first.translate(sources, source=args.source, target=args.via)
    leg2 = second.translate([t.text for t in leg1], source=args.via, target=args.target)
    chrf = CHRF()
    quality = np.array([chrf.sentence_score(t.text, [r]).score for t, r in zip(leg2, refs)])
    one = np.array([t.confidence or 0.0 for t in leg1])
    two = np.array([t.confidence or 0.0 for t in leg2])
    rules = {
        "second leg": two,
        "first leg": one,
        "lower of the two": np.minimum(one, two),
        "product": one * two,
    }
    print(
        f"{args.source}->{args.via}->{args.target}: {len(sources)} sentences, "
        f"mean sentence chrF {quality.mean():.2f}"
    )
    print_table(rules, quality, "rule")


if __name__ == "__main__":
    run(main, "pivot_confidence")
