"""Where decoding spends its time: torch's profiler over one in-process translation of a file,
after a warm-up.

    python bench/decode_profile.py -m RUN --src RUN/data/test.src.txt --beam-size 5 --threads 1

Prints the operators by self CPU time (top ``--rows``), then the seconds of one plain (unprofiled)
translation of the same lines with the same settings.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from nmt_cli.translate import Translator


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True, help="run dir or checkpoint")
    ap.add_argument("--src", type=Path, required=True, help="one sentence per line")
    ap.add_argument("--beam-size", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="torch threads, and decoding workers")
    ap.add_argument("--rows", type=int, default=15, help="operators to list")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    lines = args.src.read_text(encoding="utf-8").split("\n")
    lines = lines[:-1] if lines and lines[-1] == "" else lines
    translator = Translator.load(args.model, beam_size=args.beam_size, workers=args.threads)
    translator.translate(lines[:32])  # warm-up: the input-projection table, the allocator
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        translator.translate(lines)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))
    start = time.perf_counter()
    translator.translate(lines)
    seconds = time.perf_counter() - start
    print(f"{len(lines)} lines, beam {args.beam_size}, {args.threads} thread(s): {seconds:.2f} s unprofiled, "
          f"{len(lines) / seconds:.1f} sentences/s")


if __name__ == "__main__":
    main()
