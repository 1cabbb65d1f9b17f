"""Recipe tuning on the valid split: one recipe, several sets of overrides, the same number of
target tokens each, and the valid loss and greedy valid BLEU they end with.

    python bench/tune.py recipes/en-fr.yaml --base runs/en-fr --tokens 1000000 \
        --config base= --config drop0.1=model.dropout=0.1 \
        --config ls0=train.label_smoothing=0 [--set KEY=VALUE ...] [--jobs 2] [--out runs/tune]

Each config is NAME=KEY=VALUE[,KEY=VALUE...] (NAME= alone keeps the recipe). Runs stop after
--tokens target tokens (converted to steps from the recipe's batch size, so configs with other
batch sizes see the same data), validate once at the end and never look at a test split. With
--jobs 2 two configs train at a time, one thread each: comparisons are by tokens seen, not by
wall clock, so sharing the CPU does not bias them. Results go to OUT/tune.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rundirs import fresh_run_dir


def parse_config(text: str) -> tuple[str, list[str]]:
    name, _, sets = text.partition("=")
    return name, [s for s in sets.split(",") if s]


def batch_tokens(recipe: str, sets: list[str]) -> int:
    from nmt_cli.config.recipes import load_recipe

    return load_recipe(Path(recipe), overrides=sets).train.batch_tokens


def run_config(name: str, sets: list[str], args) -> dict:
    run_dir = fresh_run_dir(Path(args.base), Path(args.out) / name)
    sets = args.common + sets  # a config's own overrides come last and win
    steps = max(1, round(args.tokens / batch_tokens(args.recipe, sets)))
    budget = [f"train.valid_every={steps}", "train.checkpoint_every=1000000", "train.patience=0"]
    cmd = [
        sys.executable,
        "-m",
        "nmt_cli",
        "train",
        args.recipe,
        "--run-dir",
        str(run_dir),
        "--max-steps",
        str(steps),
    ] + [x for s in sets + budget for x in ("--set", s)]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
    summary = json.loads((run_dir / "summary.json").read_text())
    last = summary["validations"][-1]
    result = {
        "config": name,
        "sets": sets,
        "steps": steps,
        "tgt_tokens": summary["tgt_tokens"],
        "valid_loss": last["valid_loss"],
        "valid_bleu": last["valid_bleu"],
        "tgt_tokens_per_s": summary["tgt_tokens_per_s"],
        "threads": args.threads,
        "command": " ".join(cmd[2:]),
    }
    print(
        f"{name:<24} {steps:>6} {summary['tgt_tokens']:>10,} {last['valid_loss']:>8.3f} "
        f"{last['valid_bleu']:>8.2f}",
        flush=True,
    )
    return result


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("recipe")
    ap.add_argument("--base", required=True, help="a preprocessed run dir of the recipe")
    ap.add_argument(
        "--config", action="append", required=True, help="NAME=KEY=VALUE[,KEY=VALUE...]"
    )
    ap.add_argument(
        "--set",
        dest="common",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an override applied to every config before its own (repeatable)",
    )
    ap.add_argument("--tokens", type=int, default=1_000_000, help="target tokens per config")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0, help="threads per job (default: 2 // jobs)")
    ap.add_argument("--out", default="runs/tune")
    args = ap.parse_args()
    args.threads = args.threads or max(1, 2 // args.jobs)
    configs = [parse_config(c) for c in args.config]
    print(f"{'config':<24} {'steps':>6} {'tgt tok':>10} {'v.loss':>8} {'v.BLEU':>8}", flush=True)
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda c: run_config(*c, args), configs))
    out = Path(args.out) / "tune.json"
    previous = json.loads(out.read_text()) if out.exists() else []
    done = {r["config"] for r in results}
    out.write_text(
        json.dumps([r for r in previous if r["config"] not in done] + results, indent=1) + "\n"
    )


if __name__ == "__main__":
    main()
