"""What the vocabulary shortlist's number of frequent pieces costs in BLEU and buys in time: one
trained run, its shortlist learned again from its training split (so checkpoints whose shortlist
predates the ranked 2,000 can be measured too), decoding one split (val by default; choices are
made there) with the recipe's beam and each ``decode.shortlist_frequent``, then with the full
vocabulary for reference.

    python bench/shortlist.py -m runs/en-de-converge [--frequent 300,1000,2000] [--per-source 10]
        [--split valid]

Prints a Markdown table (BLEU and chrF, cased, against the run's stored references; in-process
decoding seconds; the mean number of pieces a batch decodes over) and writes RUN/shortlist.json.
The checkpoint itself is not changed.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import record


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", type=Path, required=True, help="run dir")
    ap.add_argument(
        "--frequent", default="300,1000,2000", help="comma-separated frequent-piece counts"
    )
    ap.add_argument("--per-source", type=int, default=10, help="candidates per source piece")
    ap.add_argument(
        "--split", default="valid", help="stored split to decode (valid, test, test1, ...)"
    )
    ap.add_argument("--record", type=Path, help="write the figure here (bench/records/NAME.json)")
    args = ap.parse_args()

    import torch

    from nmt_cli.decoding.shortlist import learn_shortlist
    from nmt_cli.evaluation.scores import score
    from nmt_cli.translation.translator import load_translator

    data = args.model / "data"
    sources = (data / f"{args.split}.src.txt").read_text(encoding="utf-8").split("\n")[:-1]
    refs = (data / f"{args.split}.tgt.txt").read_text(encoding="utf-8").split("\n")[:-1]
    train = [
        np.load(data / f"train.{side}.{part}.npy", mmap_mode="r")
        for side in ("src", "tgt")
        for part in ("ids", "offsets")
    ]
    translator = load_translator([str(args.model)], {"shortlist_per_source": args.per_source})
    counts = [int(x) for x in args.frequent.split(",")]
    shortlist = learn_shortlist(
        *train,
        translator.tokenizer.src_vocab_size,
        translator.tokenizer.tgt_vocab_size,
        frequent=max(counts),
    )
    vocab_sizes: list[int] = []
    vocabulary = shortlist.vocabulary

    def counting_vocabulary(
        src: torch.Tensor, per_source: int = 0, frequent: int = 0
    ) -> torch.Tensor:
        ids = vocabulary(src, per_source, frequent)
        vocab_sizes.append(len(ids))
        return ids

    shortlist.vocabulary = counting_vocabulary
    translator.shortlist = shortlist
    rows = []
    print("| shortlist | BLEU | chrF | seconds | sentences/s | pieces per batch |")
    print("|---|---|---|---|---|---|")
    for frequent in counts + [0]:
        vocab_sizes.clear()
        translator.config = replace(
            translator.config, shortlist=frequent > 0, shortlist_frequent=frequent
        )
        start = time.perf_counter()
        hyps = [t.text for t in translator.translate(sources)]
        seconds = time.perf_counter() - start
        bleu, chrf = (s.score for s in score(hyps, refs, ("bleu", "chrf")))
        name = (
            f"{frequent} frequent + {args.per_source} per source piece"
            if frequent
            else "full vocabulary"
        )
        pieces = (
            round(float(np.mean(vocab_sizes)))
            if vocab_sizes
            else translator.tokenizer.tgt_vocab_size
        )
        rows.append(
            {
                "frequent": frequent,
                "per_source": args.per_source,
                "bleu": round(bleu, 2),
                "chrf": round(chrf, 2),
                "seconds": round(seconds, 1),
                "sentences_per_s": round(len(sources) / seconds, 1),
                "pieces_per_batch": pieces,
                "name": name,
            }
        )
        print(
            f"| {name} | {bleu:.2f} | {chrf:.2f} | {seconds:.1f} | {len(sources) / seconds:.1f} "
            f"| {pieces:,} |",
            flush=True,
        )
    (args.model / "shortlist.json").write_text(json.dumps(rows, indent=1))
    if args.record:
        record.write(
            args.record,
            figure="The shortlist's frequent pieces against BLEU",
            about=f"`{args.model}` decoding its {args.split} split ({len(sources):,} sentences, "
            "in process) over each shortlist, learned again from its training split, then over "
            "the full vocabulary; cased sacreBLEU.",
            columns=["shortlist", "BLEU", "chrF", "seconds", "sentences/s", "pieces per batch"],
            rows=[
                [
                    r["name"],
                    r["bleu"],
                    r["chrf"],
                    r["seconds"],
                    r["sentences_per_s"],
                    r["pieces_per_batch"],
                ]
                for r in rows
            ],
            threads=torch.get_num_threads(),
        )


if __name__ == "__main__":
    main()
