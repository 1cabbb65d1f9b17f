"""What the side-by-side benchmarks against other toolkits share: whole-process timing that takes
turns between the toolkits (so drifts in the host's speed hit both alike), trainers run side by
side or one after another, and byte-compiled nmt modules before timing."""

from __future__ import annotations

import compileall
import os
import subprocess
import sys
import time
from pathlib import Path


def torch_version() -> str:
    import torch

    return torch.__version__.split("+")[0]


def compile_nmt() -> None:
    """Byte-compile nmt_cli as pip leaves an installed package, so that a checkout installed in
    editable mode under PYTHONDONTWRITEBYTECODE does not compile it at every start."""
    import nmt_cli

    compileall.compile_dir(str(Path(nmt_cli.__file__).parent), quiet=1)


def timed(cmd: list[str], env: dict) -> tuple[float, float]:
    """Wall and CPU seconds of one whole process."""
    before = os.times()
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = os.times()
    return (
        wall,
        after.children_user + after.children_system - before.children_user - before.children_system,
    )


def alternate(
    commands: dict[str, list[str]], envs: dict[str, dict], repeat: int, label: str
) -> dict[str, tuple[list[float], list[float]]]:
    """Wall and CPU seconds of ``repeat`` whole processes per toolkit, taking turns."""
    runs: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in commands}
    for _ in range(repeat):
        for name, cmd in commands.items():
            wall, cpu = timed(cmd, envs[name])
            runs[name][0].append(wall)
            runs[name][1].append(cpu)
            print(
                f"{label} {name}: {wall:.2f} s wall, {cpu:.2f} s CPU", file=sys.stderr, flush=True
            )
    return runs


def train_all(
    commands: dict[str, list[str]], logs: dict[str, Path], env: dict, together: bool = True
) -> dict[str, tuple[int, float, float]]:
    """Each trainer's exit code, CPU seconds and wall seconds: all at once (one core each, the
    fair comparison on a quiet machine) or one after another (on a machine with one free core).
    wait4 gives each process's own CPU time: the check that each had a fair share."""
    done: dict[str, tuple[int, float, float]] = {}
    names = list(commands)
    batches = [names] if together else [[name] for name in names]
    for batch in batches:
        start = time.time()
        files = {name: open(logs[name], "w") for name in batch}  # noqa: SIM115 - closed below
        try:
            procs = {
                subprocess.Popen(
                    commands[name], stdout=files[name], stderr=subprocess.STDOUT, env=env
                ).pid: name
                for name in batch
            }
            for _ in batch:
                pid, status, usage = os.wait4(-1, 0)
                done[procs[pid]] = (
                    os.waitstatus_to_exitcode(status),
                    usage.ru_utime + usage.ru_stime,
                    time.time() - start,
                )
        finally:
            for f in files.values():
                f.close()
    return done
