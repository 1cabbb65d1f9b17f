"""When each batch of a translation starts and ends, and on which worker: how evenly the worker
threads share a file, and how long the cores wait at its start and end.

    python bench/decode_timeline.py -m RUN --src RUN/data/test.src.txt --beam-size 1 [--workers 2]

Loads a Translator (``--cold``: the first translation of the process, input table included;
default: after a warm-up on 32 lines), translates the file ``--repeat`` times, and prints the
last round's batches (worker, rows x source width, start and end seconds from the call), then
for each round the wall seconds, each worker's busy seconds, the idle core-seconds (workers x
wall - busy, the time a core had no batch to decode), and the process's minor page faults and
system seconds in the round.
"""

from __future__ import annotations

import argparse
import resource
import threading
import time
from pathlib import Path

from decode_profile import translator_and_lines  # bench/, the folder this script runs from

import nmt_cli.translate as translate_module


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True, help="run dir or checkpoint")
    ap.add_argument("--src", type=Path, required=True, help="one sentence per line")
    ap.add_argument("--beam-size", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--batch-size", type=int, default=None, help="sentences per batch (default: the recipe's)"
    )
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--cold", action="store_true", help="no warm-up: time the process's first translation"
    )
    args = ap.parse_args()
    translator, lines = translator_and_lines(
        args.model, args.src, args.beam_size, args.workers, args.batch_size, warm=not args.cold
    )

    spans: list[tuple[int, tuple[int, int], float, float]] = []
    plain = translate_module.search

    def timed(model, src, *rest, **options):
        start = time.perf_counter()
        try:
            return plain(model, src, *rest, **options)
        finally:
            spans.append((threading.get_ident(), tuple(src.shape), start, time.perf_counter()))

    translate_module.search = timed
    try:
        for round_ in range(args.repeat):
            spans.clear()
            usage = resource.getrusage(resource.RUSAGE_SELF)
            began = time.perf_counter()
            translator.translate(lines)
            wall = time.perf_counter() - began
            after = resource.getrusage(resource.RUSAGE_SELF)
            workers = {tid: i for i, tid in enumerate(dict.fromkeys(s[0] for s in spans))}
            busy = [0.0] * max(len(workers), 1)
            for tid, _, start, end in spans:
                busy[workers[tid]] += end - start
            idle = args.workers * wall - sum(busy)
            if round_ == args.repeat - 1:
                for tid, shape, start, end in sorted(spans, key=lambda s: s[2]):
                    print(
                        f"worker {workers[tid]}  batch {shape[0]:4d} x {shape[1]:3d}  "
                        f"{start - began:6.3f} - {end - began:6.3f} s"
                    )
            print(
                f"round {round_ + 1}: {wall:.3f} s wall; busy per worker "
                f"{', '.join(f'{b:.3f}' for b in busy)} s; idle {idle:.3f} core-s "
                f"({idle / (args.workers * wall):.0%}); {after.ru_minflt - usage.ru_minflt} minor faults, "
                f"{after.ru_stime - usage.ru_stime:.2f} s system"
            )
    finally:
        translate_module.search = plain


if __name__ == "__main__":
    main()
