"""docs/benchmarks.md is what bench/report.py renders from bench/records/*.json, and the renderer
puts every record's figure, command, machine, date and rows on the page."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "bench" / "report.py"
FIELDS = ("figure", "about", "command", "machine", "threads", "torch", "date", "columns", "rows")


def report(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPORT), *args], capture_output=True, text=True, cwd=ROOT
    )


def a_record(figure: str, rows: list[list]) -> dict:
    return {
        "figure": figure,
        "about": "What it measures.",
        "command": "python bench/decode_speed.py -m runs/en-fr --src test.en",
        "machine": "2 vCPUs of a test CPU",
        "threads": 2,
        "torch": "2.13.0+cpu",
        "date": "2026-12-01",
        "columns": ["configuration", "seconds", "sentences/s"],
        "rows": rows,
    }


def test_the_page_is_what_the_records_render():
    done = report("--check")
    assert done.returncode == 0, done.stderr


def test_every_stored_record_has_every_field_and_a_speed_or_score():
    records = sorted((ROOT / "bench" / "records").glob("*.json"))
    assert len(records) >= 8
    for path in records:
        record = json.loads(path.read_text(encoding="utf-8"))
        assert all(f in record for f in FIELDS), path.name
        assert record["rows"] and all(len(r) == len(record["columns"]) for r in record["rows"])


def test_records_render_in_order_with_their_commands(tmp_path):
    records = tmp_path / "records"
    records.mkdir()
    speed = a_record("Translation speed", [["greedy", 3.24, 308.8], ["beam 5", 6.1, 163.9]])
    (records / "decode-speed.json").write_text(json.dumps(speed))
    other = a_record("Something else", [["one", 1234567, None]])
    (records / "zz-other.json").write_text(json.dumps(other))
    (records / "train-speed.json").write_text(json.dumps(a_record("Training speed", [["x", 1, 2]])))
    page = tmp_path / "page.md"

    assert report("--records", str(records), "--out", str(page)).returncode == 0
    text = page.read_text(encoding="utf-8")
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == ["## Training speed", "## Translation speed", "## Something else"]
    assert "    python bench/decode_speed.py -m runs/en-fr --src test.en" in text
    assert "2 vCPUs of a test CPU; 2 threads; torch 2.13.0+cpu; 2026-12-01." in text
    assert "| greedy | 3.24 | 308.80 |" in text and "| one | 1,234,567 | - |" in text
    assert report("--records", str(records), "--out", str(page), "--check").returncode == 0

    speed["rows"][0][1] = 3.5
    (records / "decode-speed.json").write_text(json.dumps(speed))
    stale = report("--records", str(records), "--out", str(page), "--check")
    assert stale.returncode != 0 and "bench/report.py" in stale.stderr


def test_a_record_whose_rows_do_not_fit_its_columns_is_refused(tmp_path):
    (tmp_path / "bad.json").write_text(json.dumps(a_record("Bad", [["only one cell"]])))
    done = report("--records", str(tmp_path), "--out", str(tmp_path / "page.md"))
    assert done.returncode != 0 and "row" in done.stderr
