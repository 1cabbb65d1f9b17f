"""Memory of a training process over time: does it grow with the run, or stay flat?

    python bench/train_memory.py RECIPE --run-dir runs/mem [--set KEY=VALUE ...] [--every 2]
        [--env MALLOC_ARENA_MAX=2] [--label default] [--minutes 1,5,10] [--record FILE]

Runs `nmt train RECIPE --restart` as a child process and samples its resident memory (VmRSS from
/proc, and its anonymous and file-backed parts: pages of memory-mapped arrays the run has read
count in RSS) every --every seconds alongside the step the log has reached. Prints one JSON line:
RSS after the first tenth of the run, at the given minutes, at the end, the peak (VmHWM) and the
peaks of the two parts, in MB, and writes the whole series next to the run dir
(<run-dir>.memory.jsonl); the line also gives the run's target tokens/s. `--record FILE` writes
RSS at each of those minutes, and the peak, as a record for bench/report.py. Linux only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import record


def status_kb(pid: int, key: str) -> int:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    match = re.search(rf"^{key}:\s+(\d+) kB", text, re.M)
    return int(match.group(1)) if match else 0


def last_step(log: Path) -> int:
    try:
        steps = re.findall(r"^\S+ \S+ step (\d+)", log.read_text(encoding="utf-8"), re.M)
    except OSError:
        return 0
    return int(steps[-1]) if steps else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("recipe", type=Path)
    ap.add_argument("--run-dir", type=Path, required=True)
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for the training process")
    ap.add_argument("--every", type=float, default=2.0)
    ap.add_argument("--label", default="")
    ap.add_argument(
        "--minutes", default="1,5,10", help="also print RSS at these minutes of the run"
    )
    ap.add_argument("--record", type=Path, help="write the figure here (bench/records/NAME.json)")
    args = ap.parse_args()
    env = {**os.environ, **dict(item.split("=", 1) for item in args.env)}
    cmd = [
        sys.executable,
        "-m",
        "nmt_cli",
        "train",
        str(args.recipe),
        "--run-dir",
        str(args.run_dir),
        "--restart",
        "--device",
        "cpu",
    ] + [x for kv in args.overrides for x in ("--set", kv)]
    series_path = args.run_dir.with_name(args.run_dir.name + ".memory.jsonl")
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    series = []
    while proc.poll() is None:
        rss = status_kb(proc.pid, "VmRSS") / 1024
        if rss:
            series.append(
                {
                    "s": round(time.perf_counter() - start, 1),
                    "step": last_step(args.run_dir / "train.log"),
                    "rss_mb": round(rss, 1),
                    "hwm_mb": round(status_kb(proc.pid, "VmHWM") / 1024, 1),
                    # file pages of the memory-mapped arrays count in RSS; the kernel can drop them
                    "anon_mb": round(status_kb(proc.pid, "RssAnon") / 1024, 1),
                    "file_mb": round(status_kb(proc.pid, "RssFile") / 1024, 1),
                }
            )
        time.sleep(args.every)
    if proc.returncode != 0 or not series:
        sys.exit(f"nmt train failed (exit {proc.returncode}); see {args.run_dir / 'train.log'}")
    series_path.write_text("".join(json.dumps(r) + "\n" for r in series))
    summary = json.loads((args.run_dir / "summary.json").read_text())
    tenth = next(r for r in series if r["s"] >= series[-1]["s"] / 10)
    at = {
        m: next((r for r in series if r["s"] >= 60 * float(m)), None)
        for m in args.minutes.split(",")
    }
    print(
        json.dumps(
            {
                "label": args.label,
                "env": args.env,
                "steps": summary["steps"],
                "seconds": round(series[-1]["s"]),
                "rss_mb_first_tenth": tenth["rss_mb"],
                "rss_mb_end": series[-1]["rss_mb"],
                "peak_anon_mb": max(r["anon_mb"] for r in series),
                "peak_file_mb": max(r["file_mb"] for r in series),
                "rss_mb_at_minute": {m: r["rss_mb"] for m, r in at.items() if r},
                "step_at_minute": {m: r["step"] for m, r in at.items() if r},
                "peak_rss_mb": summary["peak_rss_mb"],
                "tgt_tokens_per_s": summary["tgt_tokens_per_s"],
            }
        )
    )
    if args.record:
        rows = [[f"minute {m}", r["step"], r["rss_mb"]] for m, r in at.items() if r]
        rows.append(["end", summary["steps"], series[-1]["rss_mb"]])
        rows.append(["peak (VmHWM)", None, summary["peak_rss_mb"]])
        settings = " ".join([*args.env, *args.overrides]) or "the recipe as it is"
        record.write(
            args.record,
            figure="Training memory over time",
            about=f"Resident memory of `nmt train {args.recipe}` ({settings}), sampled every "
            f"{args.every:g} s; {summary['steps']:,} steps at {summary['tgt_tokens_per_s']:,.0f} "
            "target tokens/s.",
            columns=["when", "step", "RSS (MB)"],
            rows=rows,
            threads=env.get("OMP_NUM_THREADS", "default"),
        )


if __name__ == "__main__":
    main()
