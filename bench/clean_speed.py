"""CPU time of one preprocessing block: cleaning on the bytes path and on the str path, and
SentencePiece's encoding of the result, on the first 20,000 Multi30k en-fr training pairs.

    python bench/clean_speed.py RUN_DIR [--repeat 10]

RUN_DIR is a preprocessed en-fr run (its SentencePiece model encodes the block). CPU time of this
process (time.process_time), so other load on the machine changes the figures less than wall
time would; min and median over the repeats.
"""

from __future__ import annotations

import argparse
import gzip
import time
from pathlib import Path

import numpy as np

import nmt_cli.pairs as pairs
from nmt_cli.corpora import fetch
from nmt_cli.data import BlockEncoder
from nmt_cli.tokenizer import Tokenizer


def first_lines(raw: bytes, n: int) -> bytes:
    ends = np.flatnonzero(np.frombuffer(raw, dtype=np.uint8) == 10)
    return raw[: ends[n - 1] + 1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--pairs", type=int, default=20_000)
    args = ap.parse_args()
    tok = Tokenizer.load(args.run_dir)
    encoders = BlockEncoder(tok.src_proto, np.uint16), BlockEncoder(tok.tgt_proto, np.uint16)
    block = tuple(
        first_lines(gzip.open(fetch("multi30k", f"train.{lang}.gz")).read(), args.pairs)
        for lang in ("en", "fr")
    )
    cleaning = pairs.Cleaning(False, 80, 3.0)
    bytes_path = pairs._normal_side
    times: dict[str, list[float]] = {
        "clean, bytes path": [],
        "clean, str path": [],
        "encode both sides": [],
    }
    try:
        for _ in range(args.repeat):
            for name, side in (
                ("clean, bytes path", bytes_path),
                ("clean, str path", lambda raw: None),
            ):
                pairs._normal_side = side
                start = time.process_time()
                chunk = cleaning(block)
                times[name].append(time.process_time() - start)
            start = time.process_time()
            for encode, text in zip(encoders, (chunk.src, chunk.tgt)):
                encode(text)
            times["encode both sides"].append(time.process_time() - start)
    finally:
        pairs._normal_side = bytes_path
    for name, values in times.items():
        values.sort()
        print(
            f"{name:20s} min {1000 * values[0]:6.1f} ms  median {1000 * values[len(values) // 2]:6.1f} ms "
            f"CPU per {args.pairs} pairs"
        )


if __name__ == "__main__":
    main()
