"""Render docs/benchmarks.md from the benchmarks' records (bench/records/*.json).

    python bench/report.py            # rewrite docs/benchmarks.md
    python bench/report.py --check    # exit 1 if the page differs from what the records give

Each record is one table (bench/record.py says what it holds); the page lists them in the order of
ORDER, then any others by name. Run a benchmark with `--record bench/records/NAME.json` to replace
its figure, then this script to put it on the page.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

from record import read

ROOT = Path(__file__).resolve().parent.parent
RECORDS = ROOT / "bench" / "records"
PAGE = ROOT / "docs" / "benchmarks.md"

# the page's order: training, translation, the peer side by side, service, preprocessing, quality
ORDER = [
    "train-speed",
    "train-speed-bf16",
    "train-speed-gpu",
    "train-memory",
    "decode-speed",
    "onmt-side-by-side",
    "onmt-side-by-side-bf16",
    "onmt-side-by-side-zen4",
    "serve-load",
    "serve-latency",
    "preprocess-speed",
    "shortlist",
    "test-bleu",
]

HEADER = """# Benchmarks

The current figure of each product benchmark, with the command that measured it, the machine and
the date. This page is generated: `python bench/report.py` renders it from `bench/records/*.json`,
which each benchmark writes when run with `--record FILE` (what each one measures and how to run
it: [bench/README.md](../bench/README.md)). Test scores, training experiments and how each figure
was arrived at: [results.md](results.md).
"""


def cell(value) -> str:
    """A table cell: numbers with thousands separators, text as given, nothing as a dash."""
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value).replace("|", "\\|")


def section(record: dict) -> str:
    """One record as a section: the heading, what it is, the command, the table."""
    lines = [f"## {record['figure']}", ""]
    if record["about"]:
        lines += [textwrap.fill(record["about"], 100, break_on_hyphens=False), ""]
    lines += [f"    {record['command']}", ""]
    where = (
        f"Machine: {record['machine']}; {cell(record['threads'])} threads; "
        f"torch {record['torch']}; {record['date']}."
    )
    lines += [textwrap.fill(where, 100, break_on_hyphens=False), ""]
    lines.append("| " + " | ".join(record["columns"]) + " |")
    lines.append("|" + "---|" * len(record["columns"]))
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in record["rows"]]
    return "\n".join(lines) + "\n"


def ordered(paths: list[Path]) -> list[Path]:
    """The records in the page's order: those ORDER names first, then the rest by name."""
    rank = {name: i for i, name in enumerate(ORDER)}
    return sorted(paths, key=lambda p: (rank.get(p.stem, len(ORDER)), p.stem))


def render(records_dir: Path = RECORDS) -> str:
    """The whole page from every record in `records_dir`."""
    parts = [HEADER] + [section(read(p)) for p in ordered(list(records_dir.glob("*.json")))]
    return "\n".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=Path, default=RECORDS)
    ap.add_argument("--out", type=Path, default=PAGE)
    ap.add_argument("--check", action="store_true", help="compare, do not write")
    args = ap.parse_args()
    page = render(args.records)
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != page:
            sys.exit(f"{args.out} is not what {args.records} give: run python bench/report.py")
        return
    args.out.write_text(page, encoding="utf-8")
    print(f"{args.out}: {len(page):,} characters from {args.records}")


if __name__ == "__main__":
    main()
