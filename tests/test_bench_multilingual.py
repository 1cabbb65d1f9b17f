"""bench/multilingual.py pool: compare's rounds read together, each side averaged per direction
on every test set all rounds were scored on, and the equal-time aim judged on the averages."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench" / "multilingual.py"
SIX = ["en-fr", "fr-en", "en-de", "de-en", "fr-de", "de-fr"]


def pool(work: Path, *rounds: Path) -> subprocess.CompletedProcess:
    args = [a for r in rounds for a in ("--round", str(r))]
    return subprocess.run(
        [sys.executable, str(BENCH), "pool", "--work", str(work), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )


def side(bleus: list[float]) -> dict:
    out = {d: {"bleu": b, "in_language": 1.0} for d, b in zip(SIX, bleus)}
    out["mean"] = {"bleu": round(sum(bleus) / len(bleus), 2)}
    return out


def a_round(folder: Path, one_model: list[float], one_pair: list[float], mscoco=None) -> Path:
    folder.mkdir(parents=True)
    both = {"multilingual": side(one_model), "bilingual": side(one_pair)}
    (folder / "results.json").write_text(json.dumps({"args": {}, **both}))
    if mscoco is not None:
        rescored = {
            "test_2017_mscoco": {"multilingual": side(mscoco[0]), "bilingual": side(mscoco[1])}
        }
        (folder / "rescore.json").write_text(json.dumps({"args": {}, "rescore": rescored}))
    return folder


def test_rounds_are_averaged_and_the_aim_judged_on_the_averages(tmp_path):
    # en-fr is 1.4 behind in the first round and 0.4 in the second: 0.9 behind on average
    first = a_round(
        tmp_path / "a",
        [50.0, 48.0, 34.0, 37.0, 31.0, 36.0],
        [51.4, 48.0, 33.0, 37.0, 31.0, 35.0],
        mscoco=([35.0] * 6, [36.5] * 6),
    )
    second = a_round(
        tmp_path / "b",
        [51.0, 48.0, 34.0, 37.0, 31.0, 36.0],
        [51.4, 48.0, 33.0, 37.0, 31.0, 35.0],
        mscoco=([35.0] * 6, [35.0] * 6),
    )
    done = pool(tmp_path / "pooled", first, second)
    assert done.returncode == 0, done.stderr
    assert "| en-fr | 50.50 | 51.40 | -0.90 | -1.40 / -0.40 |" in done.stdout
    pooled = json.loads((tmp_path / "pooled" / "results.json").read_text())["pool"]
    test_2016 = pooled["test_2016_flickr"]
    assert test_2016["aim_met"] and test_2016["behind"] == []
    assert test_2016["multilingual"]["en-fr"]["bleu"] == 50.5
    # every direction 0.75 behind on mscoco: none past 1 BLEU, but the mean is not ahead
    assert not pooled["test_2017_mscoco"]["aim_met"]
    assert pooled["test_2017_mscoco"]["behind"] == []


def test_a_test_set_one_round_lacks_is_left_out(tmp_path):
    first = a_round(tmp_path / "a", [40.0] * 6, [39.0] * 6, mscoco=([30.0] * 6, [29.0] * 6))
    second = a_round(tmp_path / "b", [40.0] * 6, [41.5] * 6)
    done = pool(tmp_path / "pooled", first, second)
    pooled = json.loads((tmp_path / "pooled" / "results.json").read_text())["pool"]
    assert list(pooled) == ["test_2016_flickr"]
    assert pooled["test_2016_flickr"]["behind"] == []  # 0.25 behind on average
    assert "aim not met: mean not ahead" in done.stdout


def test_a_folder_without_compare_results_is_one_line(tmp_path):
    first = a_round(tmp_path / "a", [40.0] * 6, [39.0] * 6)
    done = pool(tmp_path / "pooled", first, tmp_path / "missing")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"pool: {tmp_path / 'missing'} has no results.json of both sides: run compare first"
    ]
    one = pool(tmp_path / "pooled", first)
    assert one.returncode == 1 and "give two --round folders or more" in one.stderr
