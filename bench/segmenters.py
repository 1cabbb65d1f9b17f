"""Sentence segmenters on real paragraphs whose true boundaries are known.

Lines of Multi30k (test_2016_flickr + val), Tatoeba (test) and newstest2013 (English, French,
German), each one sentence (or one caption, one headline), are joined ``--join`` at a time with a
space into paragraphs; a segmenter should cut each paragraph back into its lines. Scores per
candidate, corpus and language: the share of paragraphs cut exactly into their lines, the
precision and recall of the boundaries it puts, and sentences per second (one thread).

    OMP_NUM_THREADS=1 python bench/segmenters.py [--data DIR] [--lines 1000] [--join 3]

Candidates: sentencex, pysbd, sentence-splitter (pip install them; a missing one is skipped).
The project's nmt_cli/documents/segment.py uses the winner; docs/translate.md records the results.
"""

from __future__ import annotations

import argparse
import gzip
import os
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

from nmt_cli.documents.segment import spans_of

CORPORA = {
    "multi30k": {
        "en": ["multi30k/test_2016_flickr.en.gz", "multi30k/val.en.gz"],
        "fr": ["multi30k/test_2016_flickr.fr.gz", "multi30k/val.fr.gz"],
        "de": ["multi30k/test_2016_flickr.de.gz", "multi30k/val.de.gz"],
    },
    "tatoeba": {
        "en": ["tatoeba-en-fr/test.en.gz"],
        "fr": ["tatoeba-en-fr/test.fr.gz"],
        "de": ["tatoeba-en-de/test.de.gz"],
    },
    "newstest2013": {
        "en": ["wmt-news/newstest2013-enfr.en.gz"],
        "fr": ["wmt-news/newstest2013-enfr.fr.gz"],
        "de": ["wmt-news/newstest2013-ende.de.gz"],
    },
}


def candidates() -> dict:
    """name -> (language -> function(text) -> sentences), for the installed candidates."""
    found = {}
    try:
        import sentencex

        found["sentencex"] = lambda lang: lambda text: list(sentencex.segment(lang, text))
    except ImportError:
        pass
    try:
        import pysbd

        def pysbd_for(lang):
            seg = pysbd.Segmenter(language=lang, clean=False)
            return seg.segment

        found["pysbd"] = pysbd_for
    except ImportError:
        pass
    try:
        from sentence_splitter import SentenceSplitter

        found["sentence-splitter"] = lambda lang: SentenceSplitter(language=lang).split
    except ImportError:
        pass
    return found


def read_lines(data: Path, files: list[str], limit: int) -> list[str]:
    lines: list[str] = []
    for name in files:
        with gzip.open(data / name, "rt", encoding="utf-8") as fh:
            lines += [line.strip() for line in fh if line.strip()]
    return lines[:limit]


def paragraphs(lines: list[str], join: int) -> list[tuple[str, set[int]]]:
    """Paragraphs of ``join`` lines and the character offsets where their 2nd, 3rd... begin."""
    out = []
    for i in range(0, len(lines) - join + 1, join):
        group = lines[i : i + join]
        text = " ".join(group)
        starts, at = set(), 0
        for line in group[:-1]:
            at += len(line) + 1
            starts.add(at)
        out.append((text, starts))
    return out


def score(split, paras: list[tuple[str, set[int]]]) -> dict:
    exact = tp = fp = fn = 0
    sentences = sum(len(starts) + 1 for _, starts in paras)
    began = time.perf_counter()
    predicted = [split(text) for text, _ in paras]
    seconds = time.perf_counter() - began
    for (text, truth), pieces in zip(paras, predicted):
        got = {a for a, _ in spans_of(text, pieces)} - {0}
        exact += got == truth
        tp += len(got & truth)
        fp += len(got - truth)
        fn += len(truth - got)
    return {
        "exact": 100 * exact / len(paras),
        "precision": 100 * tp / max(tp + fp, 1),
        "recall": 100 * tp / max(tp + fn, 1),
        "sent_per_s": sentences / seconds,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=os.environ.get("NMT_DATA_MIRROR", "../shared/data"))
    ap.add_argument("--lines", type=int, default=1000, help="lines per corpus and language")
    ap.add_argument("--join", type=int, default=3, help="lines per paragraph")
    args = ap.parse_args()
    print(
        f"# {platform.node()} {platform.processor() or platform.machine()}, one thread "
        f"(OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}), "
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {args.lines} lines per corpus and "
        f"language joined {args.join} at a time"
    )
    found = candidates()
    print(
        f"{'corpus':<13} {'lang':<4} {'segmenter':<18} {'exact%':>7} {'prec%':>6} "
        f"{'recall%':>7} {'sent/s':>9}"
    )
    totals: dict[str, list[dict]] = {name: [] for name in found}
    for corpus, languages in CORPORA.items():
        for lang, files in languages.items():
            paras = paragraphs(read_lines(Path(args.data), files, args.lines), args.join)
            for name, make in found.items():
                result = score(make(lang), paras)
                totals[name].append(result)
                print(
                    f"{corpus:<13} {lang:<4} {name:<18} {result['exact']:>7.1f} "
                    f"{result['precision']:>6.1f} {result['recall']:>7.1f} "
                    f"{result['sent_per_s']:>9.0f}"
                )
    for name, results in totals.items():
        mean = {k: sum(r[k] for r in results) / len(results) for k in results[0]}
        print(
            f"{'mean':<13} {'all':<4} {name:<18} {mean['exact']:>7.1f} {mean['precision']:>6.1f} "
            f"{mean['recall']:>7.1f} {mean['sent_per_s']:>9.0f}"
        )


if __name__ == "__main__":
    main()
