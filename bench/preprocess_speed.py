"""Preprocessing throughput and peak memory on a large corpus made by repeating Multi30k.

    python bench/preprocess_speed.py [--pairs 10000000] [--workdir /tmp/nmt-bench]

The corpus is written to a temporary folder (deleted afterwards), then `nmt preprocess` runs on
it as a separate process, so its peak memory (max RSS) is its own. Prints JSON and one line:
pairs/s, lines/s (both sides) and peak memory.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml


def multi30k(lang: str) -> list[str]:
    from nmt_cli.corpora import fetch
    with gzip.open(fetch("multi30k", f"train.{lang}.gz"), "rt", encoding="utf-8") as fh:
        return fh.read().split("\n")[:-1]


def write_repeated(lines: list[str], n: int, path: Path) -> None:
    block = "\n".join(lines) + "\n"
    full, rest = divmod(n, len(lines))
    with open(path, "w", encoding="utf-8") as fh:
        for _ in range(full):
            fh.write(block)
        fh.write("".join(line + "\n" for line in lines[:rest]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=10_000_000)
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="nmt-bench-", dir=args.workdir))
    try:
        en, fr = multi30k("en"), multi30k("fr")
        for lang, lines in (("en", en), ("fr", fr)):
            write_repeated(lines, args.pairs, work / f"train.{lang}")
        for split in ("val", "test"):
            for lang, lines in (("en", en), ("fr", fr)):
                write_repeated(lines[:500], 500, work / f"{split}.{lang}")
        recipe = {"name": "bench", "src": "en", "tgt": "fr",
                  "data": {"corpus": None, "train": str(work / "train.{lang}"),
                           "valid": str(work / "val.{lang}"), "test": [str(work / "test.{lang}")]}}
        (work / "bench.yaml").write_text(yaml.safe_dump(recipe))
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "nmt_cli", "preprocess", str(work / "bench.yaml"),
                               "--run-dir", str(work / "run")], capture_output=True, text=True)
        seconds = time.perf_counter() - start
        if proc.returncode != 0:
            sys.exit(proc.stderr.strip().splitlines()[-1])
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        result = {"pairs": args.pairs, "seconds": round(seconds, 1),
                  "pairs_per_s": round(args.pairs / seconds), "lines_per_s": round(2 * args.pairs / seconds),
                  "peak_rss_mb": round(peak_mb), "cpus": os.cpu_count()}
        print(json.dumps(result))
        print(f"{args.pairs} pairs in {seconds:.0f} s: {result['pairs_per_s']} pairs/s "
              f"({result['lines_per_s']} lines/s), peak memory {peak_mb / 1024:.1f} GiB")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
