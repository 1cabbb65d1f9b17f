"""Where decoding spends its time: torch's profiler over one in-process translation of a file,
after a warm-up.

    python bench/decode_profile.py -m RUN --src RUN/data/test.src.txt --beam-size 5 --threads 1

Prints the operators by self CPU time (top ``--rows``), with ``--shapes`` the matrix products
summed by their inner and output sizes (calls, GFLOP, GFLOP/s), the decoder rows that beam
reordering selected and how many distinct parent states they had, then the seconds of plain (unprofiled)
translations of the same lines with the same settings (each of ``--repeat`` rounds, and the
minimum). ``--skip-profile`` times only: run from two checkouts in turn (``PYTHONPATH=CHECKOUT``),
it compares revisions in process.
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
    ap.add_argument(
        "--batch-size", type=int, default=None, help="sentences per batch (default: the recipe's)"
    )
    ap.add_argument("--repeat", type=int, default=1, help="unprofiled rounds")
    ap.add_argument("--skip-profile", action="store_true", help="time only")
    ap.add_argument("--shapes", action="store_true", help="also the matrix products by shape")
    args = ap.parse_args()
    translator, lines = translator_and_lines(
        args.model, args.src, args.beam_size, args.threads, args.batch_size
    )
    if not args.skip_profile:
        selected, distinct = _count_parents(translator, lines)
        with profile(activities=[ProfilerActivity.CPU], record_shapes=args.shapes) as prof:
            translator.translate(lines)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))
        if args.shapes:
            _print_products(prof.events(), args.rows)
        print(
            f"decoder rows selected by search: {selected}, with {distinct} distinct parent states"
        )
    rounds = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        translator.translate(lines)
        rounds.append(time.perf_counter() - start)
    seconds = min(rounds)
    print(
        f"{len(lines)} lines, beam {args.beam_size}, {args.threads} thread(s): {seconds:.2f} s unprofiled "
        f"(min of {', '.join(f'{r:.2f}' for r in rounds)}), {len(lines) / seconds:.1f} sentences/s"
    )


def translator_and_lines(
    model: str, src: Path, beam_size: int, workers: int, batch_size: int | None, warm: bool = True
) -> tuple[Translator, list[str]]:
    """A Translator on ``workers`` threads (and as many decoding workers) and the lines of ``src``;
    ``warm``: after one translation of 32 lines (the input-projection table, the allocator)."""
    torch.set_num_threads(workers)
    lines = src.read_text(encoding="utf-8").split("\n")
    lines = lines[:-1] if lines and lines[-1] == "" else lines
    extra = {} if batch_size is None else {"batch_size": batch_size}
    translator = Translator.load(model, beam_size=beam_size, workers=workers, **extra)
    if warm:
        translator.translate(lines[:32])
    return translator, lines


def _print_products(events, rows: int) -> None:
    """addmm, mm and bmm summed by (operator, inner size, output columns), the most time first."""
    totals: dict = {}
    for e in events:
        shapes = e.input_shapes
        if e.name == "aten::addmm":
            (m, k), n = shapes[1], shapes[2][1]
        elif e.name == "aten::mm":
            (m, k), n = shapes[0], shapes[1][1]
        elif e.name == "aten::bmm":
            (batch, m, k), n = shapes[0], shapes[1][2]
            m *= batch
        else:
            continue
        entry = totals.setdefault((e.name, k, n), [0, 0.0, 0.0])
        entry[0] += 1
        entry[1] += e.self_cpu_time_total / 1e6
        entry[2] += 2 * m * k * n / 1e9
    # shapes with under 2% of the time each (the output layer's groups, whose widths vary) are
    # summed per operator and inner size
    floor = 0.02 * sum(seconds for _, seconds, _ in totals.values())
    merged: dict = {}
    for (name, k, n), (calls, seconds, gflop) in totals.items():
        key = (name, k, str(n) if seconds >= floor else "varied")
        entry = merged.setdefault(key, [0, 0.0, 0.0])
        for i, value in enumerate((calls, seconds, gflop)):
            entry[i] += value
    print(f"{'product (inner x columns)':<34}{'calls':>7}{'seconds':>9}{'GFLOP':>8}{'GFLOP/s':>9}")
    for (name, k, n), (calls, seconds, gflop) in sorted(merged.items(), key=lambda kv: -kv[1][1])[
        :rows
    ]:
        print(
            f"{name + f' {k} x {n}':<34}{calls:>7}{seconds:>9.3f}{gflop:>8.2f}{gflop / max(seconds, 1e-9):>9.1f}"
        )


def _count_parents(translator, lines: list[str]) -> tuple[int, int]:
    """Rows selected by DecoderState.select in one translation, and their distinct sources."""
    from nmt_cli.model.decoder import DecoderState

    counts = [0, 0]
    plain = DecoderState.select

    def counting(state, index):
        counts[0] += len(index)
        counts[1] += len(torch.unique(index))
        return plain(state, index)

    DecoderState.select = counting
    try:
        translator.translate(lines)
    finally:
        DecoderState.select = plain
    return counts[0], counts[1]


if __name__ == "__main__":
    main()
