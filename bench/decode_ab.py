"""Module constants of the decoder compared in one process: the settings take turns chunk by
chunk, so that a shared machine's swings fall on all of them alike.

    python bench/decode_ab.py -m RUN --src RUN/data/test.src.txt --beam-size 1 \
        --set nmt_cli.search.GROUP_ROWS=8,4,16,40 --seconds 120

Each round translates the file in chunks of ``--chunk`` lines, every setting in turn on each chunk;
rounds repeat until ``--seconds`` have passed. Prints, per setting, the seconds in all and the
median over chunks of its time divided by the first setting's on the same chunk (below 1: faster),
and how many translations equal the first setting's.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import time
from pathlib import Path

from decode_profile import translator_and_lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True, help="run dir or checkpoint")
    ap.add_argument("--src", type=Path, required=True, help="one sentence per line")
    ap.add_argument(
        "--set",
        required=True,
        metavar="MODULE.NAME=V1,V2,...",
        help="an integer or float constant and the values to compare, the first the baseline",
    )
    ap.add_argument("--beam-size", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2, help="torch threads, and decoding workers")
    ap.add_argument("--chunk", type=int, default=250, help="lines per turn")
    ap.add_argument("--seconds", type=float, default=120.0, help="keep taking turns this long")
    args = ap.parse_args()
    target, values = args.set.split("=", 1)
    module_name, name = target.rsplit(".", 1)
    module = importlib.import_module(module_name)
    kind = type(getattr(module, name))
    settings = [kind(v) for v in values.split(",")]
    translator, lines = translator_and_lines(
        args.model, args.src, args.beam_size, args.threads, None
    )
    chunks = [lines[i : i + args.chunk] for i in range(0, len(lines), args.chunk)]
    seconds: dict = {s: [] for s in settings}
    texts: dict = {s: [] for s in settings}
    deadline = time.monotonic() + args.seconds
    first_round = True
    while first_round or time.monotonic() < deadline:
        for chunk in chunks:
            for setting in settings:
                setattr(module, name, setting)
                start = time.perf_counter()
                out = translator.translate(chunk)
                seconds[setting].append(time.perf_counter() - start)
                if first_round:
                    texts[setting].extend(t.text for t in out)
        first_round = False
    base = settings[0]
    print(
        f"# {target}, beam {args.beam_size}, {args.threads} thread(s), {len(lines)} lines in chunks of "
        f"{args.chunk}, {len(seconds[base]) // len(chunks)} rounds"
    )
    for setting in settings:
        ratio = statistics.median(b / a for a, b in zip(seconds[base], seconds[setting]))
        same = sum(a == b for a, b in zip(texts[base], texts[setting]))
        print(
            f"{name}={setting}: {sum(seconds[setting]):.2f} s in all, median ratio to {name}={base} "
            f"{ratio:.3f}, {same}/{len(lines)} translations the same"
        )


if __name__ == "__main__":
    main()
