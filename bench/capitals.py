"""ALL CAPS and Title Case against normal case: Multi30k test sets (test_2016_flickr and
test_2017_flickr by default) written in capitals and in title case on both sides (source and
reference alike, nmt_cli/data/casing.py), translated by each model with the translation-time
remedy on and off (``TranslateOptions.restore_case``), scored with cased sacreBLEU (the case
must come back too) and, in brackets, case-insensitive sacreBLEU (the words alone). Prints a
Markdown table: per model and remedy, BLEU in normal case, upper case and title case and the
largest cased loss against normal case.

    python bench/capitals.py -m /tmp/runs/enfr -m runs/ft-case --threads 1 [--lines 500]

Two models trained alike but for ``data.augment_case`` measure the training-time remedy;
docs/results.md#numbers-and-capitals records the figures.
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
from pathlib import Path

import sacrebleu

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nmt_cli.data.casing import title_cased  # noqa: E402
from nmt_cli.translation.translator import Translator  # noqa: E402

CASES = {"normal": lambda s: s, "upper": str.upper, "title": title_cased}


def test_lines(split: str, lang: str, n: int) -> list[str]:
    mirror = Path(os.environ.get("NMT_DATA_MIRROR", "../shared/data"))
    with gzip.open(mirror / "multi30k" / f"{split}.{lang}.gz", "rt", encoding="utf-8") as fh:
        lines = fh.read().rstrip("\n").split("\n")
    return lines[:n] if n else lines


def label(model: str) -> str:
    """A run dir's name, or a checkpoint's with its run dir's."""
    path = Path(model)
    return path.name if path.is_dir() else f"{path.parent.parent.name}/{path.name}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "-m", "--model", action="append", required=True, help="run dir or checkpoint (repeatable)"
    )
    ap.add_argument("--splits", default="test_2016_flickr,test_2017_flickr")
    ap.add_argument("--src", default="en")
    ap.add_argument("--tgt", default="fr")
    ap.add_argument("--lines", type=int, default=0, help="first N lines of each split (0: all)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    splits = args.splits.split(",")
    sources = sum((test_lines(s, args.src, args.lines) for s in splits), [])
    refs = sum((test_lines(s, args.tgt, args.lines) for s in splits), [])
    print(f"{len(sources)} sentences of {', '.join(splits)}; cased (case-insensitive) BLEU\n")
    print("| model | restore_case | normal | UPPER | Title | largest loss |")
    print("|---|---|---|---|---|---|")
    for model in args.model:
        translator = Translator.load(model, threads=args.threads)
        for restore in (True, False):
            scores = {}
            for name, change in CASES.items():
                out = translator.translate([change(s) for s in sources], restore_case=restore)
                hyps, wanted = [t.text for t in out], [[change(r) for r in refs]]
                cased = sacrebleu.corpus_bleu(hyps, wanted).score
                words = sacrebleu.corpus_bleu(hyps, wanted, lowercase=True).score
                scores[name] = (cased, words)
            loss = scores["normal"][0] - min(scores["upper"][0], scores["title"][0])
            shown = " | ".join(f"{c:.1f} ({w:.1f})" for c, w in scores.values())
            print(
                f"| {label(model)} | {'on' if restore else 'off'} | {shown} | {loss:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
