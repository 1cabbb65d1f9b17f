"""One benchmark's figure as a JSON record, the input of `python bench/report.py`.

A record is one table: what it measures (`figure`, `about`), the command that made it, the machine,
the threads, the torch release and the date, then `columns` and `rows`. Each product benchmark
takes `--record FILE` and writes its own results there (docs/benchmarks.md is rendered from
`bench/records/NAME.json` by `python bench/report.py`).
"""

from __future__ import annotations

import datetime
import json
import os
import shlex
import sys
from importlib import metadata
from pathlib import Path

FIELDS = ("figure", "about", "command", "machine", "threads", "torch", "date", "columns", "rows")


def cpu_name() -> str:
    """The CPU's model name as /proc/cpuinfo gives it, with whether it multiplies bf16 natively."""
    try:
        info = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return f"{os.cpu_count()} CPUs"
    names = [line.split(":", 1)[1].strip() for line in info.splitlines() if "model name" in line]
    flags = next((line for line in info.splitlines() if line.startswith("flags")), "")
    bf16 = "native bf16" if ("avx512_bf16" in flags or "amx_bf16" in flags) else "no native bf16"
    return f"{os.cpu_count()} vCPUs of {names[0] if names else 'an unnamed CPU'} ({bf16})"


def torch_release() -> str:
    """The installed torch's version, read from its package metadata (torch is not imported)."""
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "-"


def this_command() -> str:
    """The command line that started this benchmark, as a user would type it."""
    return shlex.join(["python", *sys.argv])


def write(
    path: Path | str,
    *,
    figure: str,
    columns: list[str],
    rows: list[list],
    threads: int | str,
    about: str = "",
    machine: str | None = None,
) -> None:
    """Write one figure's record to `path` (a new file, or the previous record replaced)."""
    record = {
        "figure": figure,
        "about": about,
        "command": this_command(),
        "machine": machine or cpu_name(),
        "threads": threads,
        "torch": torch_release(),
        "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        "columns": columns,
        "rows": rows,
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"# record written to {path}", file=sys.stderr)


def read(path: Path) -> dict:
    """One record, checked to have every field."""
    record = json.loads(path.read_text(encoding="utf-8"))
    missing = [f for f in FIELDS if f not in record]
    if missing:
        raise ValueError(f"{path}: record lacks {', '.join(missing)}")
    if any(len(row) != len(record["columns"]) for row in record["rows"]):
        raise ValueError(f"{path}: a row's length differs from the columns'")
    return record
