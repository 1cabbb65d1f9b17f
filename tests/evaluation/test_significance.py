import json
import subprocess
import sys

import pytest

from nmt_cli.evaluation.significance import paired_tests, sentence_scores
from nmt_cli.runtime.errors import UserError

REFS = [
    "Un homme en chemise bleue joue de la guitare.",
    "Deux chiens courent dans la neige.",
    "Une femme marche dans la rue.",
    "Des enfants jouent au football dans un parc.",
    "Un chat dort sur le canapé.",
    "Un vieil homme lit un journal sur un banc.",
] * 5
GOOD = list(REFS)
BAD = [" ".join(r.split()[:2]) + " quelque chose." for r in REFS]


def test_a_clearly_better_system_gets_a_small_p_and_an_equal_one_a_large_p():
    for test in ("bs", "ar"):
        better = paired_tests([("bad", BAD), ("good", GOOD)], REFS, ["bleu", "chrf"], test)
        assert {r["metric"] for r in better} == {"BLEU", "chrF2"}
        assert all(r["p_value"] < 0.01 and r["score"] > r["baseline_score"] for r in better)
        mixed = [GOOD[i] if i % 2 else BAD[i] for i in range(len(REFS))]
        swapped = [BAD[i] if i % 2 else GOOD[i] for i in range(len(REFS))]
        near = paired_tests([("a", mixed), ("b", swapped)], REFS, ["chrf"], test)
        assert near[0]["p_value"] > 0.05  # as good as each other, sentence for sentence
    assert "mean" in better[0] or test == "ar"
    with pytest.raises(UserError, match="two systems"):
        paired_tests([("a", BAD)], REFS, ["bleu"], "bs")


def test_sentence_scores_are_sacrebleus_per_sentence():
    rows = sentence_scores(GOOD[:2], REFS[:2])
    assert rows == [{"bleu": 100.0, "chrf": 100.0}, {"bleu": 100.0, "chrf": 100.0}]
    assert sentence_scores(BAD[:1], REFS[:1])[0]["bleu"] < 50


def test_nmt_eval_compares_two_hyp_files_and_writes_sentence_scores(tmp_path):
    ref, a, b = tmp_path / "ref", tmp_path / "a", tmp_path / "b"
    for path, lines in ((ref, REFS), (a, BAD), (b, GOOD)):
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    per_sentence = tmp_path / "sent.jsonl"
    args = ["--hyp", str(a), "--hyp", str(b), "--ref", str(ref), "--metrics", "bleu,chrf"]
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "nmt_cli",
            "eval",
            *args,
            "--paired-bs",
            "--paired-ar",
            "--sentence",
            str(per_sentence),
            "--json",
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    tests = report["significance"]
    assert {(t["test"], t["metric"]) for t in tests} == {
        ("bs", "BLEU"),
        ("bs", "chrF2"),
        ("ar", "BLEU"),
        ("ar", "chrF2"),
    }
    assert all(t["p_value"] < 0.01 for t in tests)
    rows = [json.loads(line) for line in per_sentence.read_text().splitlines()]
    assert len(rows) == 2 * len(REFS) and rows[0]["system"] == str(a) and rows[0]["line"] == 1
    one = subprocess.run(
        [
            sys.executable,
            "-m",
            "nmt_cli",
            "eval",
            "--hyp",
            str(a),
            "--ref",
            str(ref),
            "--paired-ar",
        ],
        capture_output=True,
        text=True,
    )
    assert one.returncode == 2 and "compares two systems" in one.stderr
    assert one.stderr.strip().count("\n") == 0


def test_a_system_given_twice_is_still_two_systems():
    from nmt_cli.cli.evaluating import _unique

    systems: dict = {"out.fr": []}
    assert _unique(systems, "out.fr") == "out.fr (2)"
    systems["out.fr (2)"] = []
    assert _unique(systems, "out.fr") == "out.fr (3)" and _unique(systems, "b.fr") == "b.fr"
