"""A paragraph translates as its sentences do; what the document layer costs.

1. Paragraphs: Multi30k test_2017_flickr lines joined ``--join`` at a time with a space. Each
   paragraph goes through the document layer (translate_texts); its words should be
   those of its lines translated one by one, joined (each line a text of its own, and through
   the sentence path, Translator.translate, too). Two joins: the lines
   as they are (a quarter of them have no final full stop, so that no segmenter can tell where
   they end), and the lines with a full stop added where they have none, as a writer would end
   a sentence in a paragraph. "Lost" counts paragraphs some of whose text reached no segment
   or whose translation has fewer than half the words of the lines' translations.
2. Speed: test_2016_flickr through translate_texts (sentence split, protected spans) and through
   the sentence path, each run ``--repeats`` times in turn; the least CPU time of each.

    OMP_NUM_THREADS=1 python bench/paragraphs.py -m RUN [--join 3] [--repeats 5]
"""

from __future__ import annotations

import argparse
import gzip
import os
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

from nmt_cli.documents.layer import translate_texts
from nmt_cli.translation.translator import Translator


def read(data: Path, name: str) -> list[str]:
    with gzip.open(data / "multi30k" / f"{name}.en.gz", "rt", encoding="utf-8") as fh:
        return [line.strip() for line in fh.read().split("\n")[:-1]]


def punctuated(line: str) -> str:
    return line if line.endswith((".", "!", "?", '"')) else line + "."


def compare(translator, lines: list[str], join: int) -> tuple[int, int, int, int]:
    """(paragraphs, same words as their lines translated one by one through the document layer,
    the same through the sentence path, paragraphs with lost text)."""
    alone = [t.text for t in translate_texts(translator, lines)]
    plain = [t.text for t in translator.translate(lines)]
    groups = [list(range(i, min(i + join, len(lines)))) for i in range(0, len(lines), join)]
    paragraphs = [" ".join(lines[j] for j in g) for g in groups]
    results = translate_texts(translator, paragraphs)
    same = same_plain = lost = 0
    for group, paragraph, result in zip(groups, paragraphs, results):
        expected = " ".join(alone[j] for j in group).split()
        same += result.text.split() == expected
        same_plain += result.text.split() == " ".join(plain[j] for j in group).split()
        covered = " ".join(t.source for t in result.segments).split()
        lost += covered != paragraph.split() or len(result.text.split()) < len(expected) / 2
    return len(groups), same, same_plain, lost


def best_times(runs, repeats: int) -> list[float]:
    """The least CPU time of ``repeats`` runs of each of ``runs``, run in turn. CPU time, not
    wall time: decoding runs on one thread, and a machine shared with other work stretches the
    wall time of a run by whatever else runs beside it."""
    best = [float("inf")] * len(runs)
    for _ in range(repeats):
        for k, run in enumerate(runs):
            began = time.process_time()
            run()
            best[k] = min(best[k], time.process_time() - began)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--data", default=os.environ.get("NMT_DATA_MIRROR", "../shared/data"))
    ap.add_argument("--join", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--speed-only", action="store_true", help="skip the paragraphs")
    args = ap.parse_args()
    data = Path(args.data)
    translator = Translator.load(args.model, threads=1)
    print(
        f"# {platform.node()}, {torch.get_num_threads()} thread(s), "
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {args.model}, beam "
        f"{translator.config.beam_size}"
    )
    lines = [] if args.speed_only else read(data, "test_2017_flickr")
    joins = [("as they are", lines), ("full stops added", [punctuated(x) for x in lines])]
    for name, given in joins if lines else []:
        n, same, same_plain, lost = compare(translator, given, args.join)
        print(
            f"test_2017_flickr, {args.join} lines a paragraph, {name}: {same}/{n} paragraphs "
            f"({100 * same / n:.1f}%) give the words of their lines translated one by one "
            f"({same_plain}, {100 * same_plain / n:.1f}%, of the sentence path's, which does not "
            f"cut long sentences into clauses); lost text in {lost}",
            flush=True,
        )
    sentences = read(data, "test_2016_flickr")
    outputs = translate_texts(translator, sentences)
    assert len(outputs) == len(sentences)  # N lines in, N out
    uncut = Translator.load(args.model, threads=1, max_segment_tokens=0)
    runs = {
        "sentence path": lambda: translator.translate(sentences),
        "document layer": lambda: translate_texts(translator, sentences),
        "layer, no clause cuts": lambda: translate_texts(uncut, sentences),
        "layer, nothing protected": lambda: translate_texts(translator, sentences, protect=None),
    }
    times = dict(zip(runs, best_times(list(runs.values()), args.repeats)))
    print(f"test_2016_flickr ({len(sentences)} lines), least CPU time of {args.repeats} runs:")
    for name, seconds in times.items():
        change = 100 * (seconds / times["sentence path"] - 1)
        print(f"  {name:<26} {seconds:6.2f} s ({change:+.1f}%)")


if __name__ == "__main__":
    main()
