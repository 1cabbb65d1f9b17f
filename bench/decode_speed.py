"""Decoding speed as users see it: whole `nmt translate` processes (start-up and model load
included) on a test file, greedy and beam 5, optionally int8 and fp32 beside the default.

    python bench/decode_speed.py -m runs/en-fr --src runs/en-fr/data/test.src.txt \
        --ref runs/en-fr/data/test.tgt.txt [--quantize] [--fp32] [--threads N]

The default precision is `auto` (bf16 on a CPU with bf16 hardware); --fp32 adds greedy and beam 5
with `--precision fp32`.

Prints one line per configuration: seconds, sentences/s, output subword tokens/s and BLEU, then
the same as JSON; `--record FILE` also writes them as a record for bench/report.py.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import record


def run(model: str, src: Path, beam: int, extra: list[str], env: dict) -> tuple[float, list[str]]:
    cmd = [
        sys.executable,
        "-m",
        "nmt_cli",
        "translate",
        "-m",
        model,
        "-i",
        str(src),
        "--beam-size",
        str(beam),
        *extra,
    ]
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, env=env, check=True)
    return time.perf_counter() - start, out.stdout.decode().split("\n")[:-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--src", type=Path, required=True)
    ap.add_argument("--ref", type=Path)
    ap.add_argument("--quantize", action="store_true", help="also measure --quantize int8")
    ap.add_argument("--fp32", action="store_true", help="also measure --precision fp32")
    ap.add_argument("--threads", type=int, default=0, help="OMP/torch threads (0 = default)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--record", type=Path, help="write the figure here (bench/records/NAME.json)")
    ap.add_argument(
        "--translate-option",
        action="append",
        default=[],
        help="passed to every nmt translate, e.g. --translate-option=--target "
        "--translate-option=fr for a multilingual model (repeatable)",
    )
    args = ap.parse_args()

    import sacrebleu

    from nmt_cli.training.checkpoint import load_model

    loaded = load_model(args.model)
    tokenizer, path = loaded.tokenizer, loaded.path
    env = dict(os.environ)
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    refs = args.ref.read_text(encoding="utf-8").split("\n")[:-1] if args.ref else None
    n = len(args.src.read_text(encoding="utf-8").split("\n")) - 1
    print(
        f"# {path} on {n} sentences; {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, python {platform.python_version()}"
    )
    configs = [("greedy", 1, []), ("beam 5", 5, []), ("beam 5 full vocab", 5, ["--no-shortlist"])]
    if args.fp32:
        configs += [
            ("greedy fp32", 1, ["--precision", "fp32"]),
            ("beam 5 fp32", 5, ["--precision", "fp32"]),
        ]
    if args.quantize:
        configs += [
            ("greedy int8", 1, ["--quantize", "int8"]),
            ("beam 5 int8", 5, ["--quantize", "int8"]),
        ]
    results = []
    for name, beam, extra in configs:
        best = None
        for _ in range(args.repeat):
            seconds, hyps = run(args.model, args.src, beam, extra + args.translate_option, env)
            best = seconds if best is None else min(best, seconds)
        tokens = sum(len(x) + 1 for x in tokenizer.encode_tgt(hyps))
        bleu = f"{sacrebleu.corpus_bleu(hyps, [refs]).score:.2f}" if refs else "-"
        print(
            f"{name:<18} {best:7.2f} s  {n / best:8.1f} sent/s  {tokens / best:9.0f} tok/s  "
            f"BLEU {bleu}",
            flush=True,
        )
        results.append(
            {
                "config": name,
                "seconds": round(best, 2),
                "sentences_per_s": round(n / best, 1),
                "tokens_per_s": round(tokens / best),
                "bleu": bleu,
            }
        )
    print(json.dumps(results))
    if args.record:
        record.write(
            args.record,
            figure="Translation speed",
            about=f"Whole `nmt translate` processes (start-up and model load included) on {n} "
            f"sentences, model {path}, the fastest of {args.repeat}; tokens are output subwords.",
            columns=["configuration", "seconds", "sentences/s", "tokens/s", "BLEU"],
            rows=[list(r.values()) for r in results],
            threads=args.threads or "default",
        )


if __name__ == "__main__":
    main()
