"""Where the start-up of `nmt translate` goes: each phase of loading a model and translating one
line, timed in fresh processes (wall and CPU seconds, min and median over --repeat).

    python bench/startup.py -m runs/en-fr [--repeat 5] [--threads 2]

Phases, in the order `nmt translate` meets them: the interpreter alone; `import torch` (without
its tracing modules, as `nmt translate` imports it; `NMT_FULL_TORCH_IMPORT=1` for the whole
import); the CLI (typer, with pydantic where typer is 0.29 or later); the translation modules; the
checkpoint file (mapped, as decoding loads it, and read whole, the plain path); building the model;
loading its weights; the tokenizer and shortlist; the first line. Then the whole `nmt translate`
process on one line, with --threads' count and without it (the default, which measures the cores'
load). CPU seconds are the steadier figure on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

PHASES = r"""
import sys, time, json
marks = []
def mark(name, _last=[time.perf_counter(), time.process_time()]):
    wall, cpu = time.perf_counter(), time.process_time()
    marks.append((name, wall - _last[0], cpu - _last[1]))
    _last[0], _last[1] = wall, cpu
from nmt_cli.torch_import import skip_tracing_modules
skip_tracing_modules()  # as nmt translate does; NMT_FULL_TORCH_IMPORT=1 times torch's whole import
import torch; mark("import torch")
import nmt_cli.cli
try:
    import typer._adapters  # typer 0.29 and later: pydantic, imported when the first option is parsed
except ImportError:
    pass
mark("CLI: typer")
import nmt_cli.translate, nmt_cli.model, nmt_cli.checkpoint as ckpt; mark("nmt_cli modules")
path = ckpt.resolve(sys.argv[1])
payload = ckpt.load(path, mmap=True); mark("checkpoint, mapped")
plain = ckpt.load(path, mmap=False); mark("checkpoint, read whole (plain path)")
del plain
recipe, tok = ckpt.recipe_of(payload, path), ckpt.tokenizer_of(payload, path); mark("recipe + tokenizer")
model = nmt_cli.model.build_model(recipe.model, tok.src_vocab_size, tok.tgt_vocab_size); mark("build model (random init)")
model.load_state_dict(payload["model"]); mark("load weights")
del payload, model
translator = nmt_cli.translate.load_translator([sys.argv[1]]); mark("load_translator (all of the above once)")
translator.translate(["A man is walking."]); mark("first line")
translator.translate(["A woman is walking."]); mark("second line")
print(json.dumps(marks))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    runs = []
    for _ in range(args.repeat):
        out = subprocess.run(
            [sys.executable, "-c", PHASES, args.model],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
    names = [m[0] for m in runs[0]]
    translate = [sys.executable, "-m", "nmt_cli", "translate", "-m", args.model]
    whole = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "nmt translate, one line": translate,
        "  the same, default threads": translate,
    }
    # Without OMP_NUM_THREADS the command measures the cores' load to choose its threads
    no_threads_env = {k: v for k, v in env.items() if k not in ("OMP_NUM_THREADS", "NMT_THREADS")}
    totals = {}
    for label, cmd in whole.items():
        walls, cpus = [], []
        for _ in range(args.repeat):
            before = os.times()
            start = time.perf_counter()
            subprocess.run(
                cmd,
                input=b"A man.\n",
                env=no_threads_env if "default threads" in label else env,
                check=True,
                capture_output=True,
            )
            walls.append(time.perf_counter() - start)
            after = os.times()
            cpus.append(
                after.children_user
                + after.children_system
                - before.children_user
                - before.children_system
            )
        totals[label] = (walls, cpus)
    print(
        f"# {args.model}, {args.threads} threads, {args.repeat} fresh processes; seconds min / median"
    )
    print(f"{'phase':<42} {'wall':>15} {'cpu':>15}")
    for label, (walls, cpus) in totals.items():
        print(
            f"{label:<42} {min(walls):6.3f} / {statistics.median(walls):6.3f} "
            f"{min(cpus):6.3f} / {statistics.median(cpus):6.3f}"
        )
    for k, name in enumerate(names):
        walls = [r[k][1] for r in runs]
        cpus = [r[k][2] for r in runs]
        print(
            f"{name:<42} {min(walls):6.3f} / {statistics.median(walls):6.3f} "
            f"{min(cpus):6.3f} / {statistics.median(cpus):6.3f}"
        )


if __name__ == "__main__":
    main()
