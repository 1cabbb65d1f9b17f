"""Reading an aligned corpus in preprocessing's blocks: both files side by side (PairSource.blocks,
the target on a thread) against one after the other, wall and CPU time.

    python bench/read_speed.py SRC_FILE TGT_FILE [--rounds 2] [--lines 20000]

SRC_FILE and TGT_FILE are line-aligned, plain or compressed (e.g. the .gz corpus that
bench/preprocess_speed.py --keep-corpus leaves). Nothing is decoded or cleaned: this is the
decompression and line splitting that the sample pass and the clean-and-encode pass start from.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from nmt_cli import corpora
from nmt_cli.pairs import PairSource


def one_after_the_other(src: Path, tgt: Path, n: int):
    with corpora.LineBlocks(src) as s, corpora.LineBlocks(tgt) as t:
        while True:
            (a, count), (b, _) = s.take(n), t.take(n)
            if not count:
                return
            yield a, b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("tgt", type=Path)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument(
        "--lines", type=int, default=20_000, help="lines a block (preprocessing's TEXT_CHUNK)"
    )
    args = ap.parse_args()
    readers = {
        "side by side": lambda: PairSource("c", (args.src, args.tgt)).blocks(args.lines),
        "one after the other": lambda: one_after_the_other(args.src, args.tgt, args.lines),
    }
    for _ in range(args.rounds):
        for name, blocks in readers.items():
            wall, cpu, lines = time.perf_counter(), time.process_time(), 0
            for block in blocks():
                lines += block[0].count(b"\n")
            print(
                f"{name:20s} {time.perf_counter() - wall:5.1f} s wall, {time.process_time() - cpu:5.1f} s CPU, "
                f"{lines} lines a side",
                flush=True,
            )


if __name__ == "__main__":
    main()
