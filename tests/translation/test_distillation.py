"""Sequence-level distillation: the distilled targets are the teacher's translations, made in
resumable, shardable chunks, and the data pipeline trains on them."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nmt_cli.config.recipes import recipe_from_dict
from nmt_cli.data.distilled import distilled_file, teacher_dir
from nmt_cli.data.preprocess import preprocess
from nmt_cli.runtime.errors import ConfigError, DataError
from nmt_cli.translation.distillation import distil
from nmt_cli.translation.translator import Translator
from tests.conftest import tiny_recipe_dict, trained_copy, write_slice

ROOT = Path(__file__).resolve().parents[2]
CHUNK = 50  # the student's 120 training lines make chunks of 50, 50 and 20


@pytest.fixture(scope="module")
def teacher(tiny_run, tmp_path_factory):
    run = trained_copy(tiny_run, tmp_path_factory, "teacher", max_steps=30, checkpoint_every=30)
    return run, Translator.load(run, device="cpu")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_slice(tmp_path_factory.mktemp("student-corpus"), n_train=120, n_valid=20)


def student(corpus, teacher_runs, **data):
    return recipe_from_dict(
        tiny_recipe_dict({**corpus, "teacher": [str(r) for r in teacher_runs], **data})
    )


def texts(translations) -> list[str]:
    """Translations as a distilled corpus stores them: normalised, as training reads them."""
    return [" ".join(t.text.split()) for t in translations]


def pairs_of(path: Path) -> list[tuple[str, str]]:
    return [tuple(line.split("\t")) for line in path.read_text(encoding="utf-8").splitlines()]


class Counting:
    """The teacher's translator, counting the chunks it translates; it stops the process (as a
    signal would) when asked to translate chunk number ``stop_at``."""

    def __init__(self, translator: Translator, stop_at: int | None = None):
        self.translator, self.stop_at, self.calls = translator, stop_at, 0

    def translate(self, lines, options=None):
        self.calls += 1
        if self.calls == self.stop_at:
            raise KeyboardInterrupt
        return self.translator.translate(lines, options)


def test_distilled_targets_are_the_teachers_translations(teacher, corpus, tmp_path):
    run, translator = teacher
    recipe = student(corpus, [run])
    progress = distil(recipe, tmp_path / "run", lambda m: None, chunk_lines=CHUNK)
    assert (progress.translated, progress.found, progress.lines) == (3, 0, 120)
    assert progress.complete
    pairs = pairs_of(distilled_file(tmp_path / "run", 0))
    sources = Path(corpus["train"].format(lang="en")).read_text(encoding="utf-8").splitlines()
    assert [s for s, _ in pairs] == [" ".join(s.split()) for s in sources]
    expected = texts(translator.translate(sources))
    assert [t for _, t in pairs] == expected
    assert [t for _, t in pairs] != Path(corpus["train"].format(lang="fr")).read_text(
        encoding="utf-8"
    ).splitlines()
    assert not (teacher_dir(tmp_path / "run") / "chunks").exists()
    again = distil(recipe, tmp_path / "run", lambda m: None, chunk_lines=CHUNK)
    assert again.complete and again.translated == 0


def test_preprocess_trains_on_the_distilled_pairs_and_keeps_references_when_asked(
    teacher, corpus, tmp_path
):
    run, _ = teacher
    references = Path(corpus["train"].format(lang="fr")).read_text(encoding="utf-8").splitlines()
    for keep in (False, True):
        # filters wide open, so that every pair is kept and the stored text reads line for line
        recipe = student(
            corpus, [run], teacher_keep_references=keep, max_len=1000, max_ratio=1000.0
        )
        run_dir = tmp_path / f"keep-{keep}"
        distil(recipe, run_dir, lambda m: None, chunk_lines=CHUNK)
        meta = preprocess(recipe, run_dir, log=lambda m: None)
        distilled = [t for _, t in pairs_of(distilled_file(run_dir, 0))]
        stored = (run_dir / "data" / "train.tgt.txt").read_text(encoding="utf-8").splitlines()
        counts = [(c["corpus"], c["read"], c["kept"]) for c in meta["corpora"]]
        if keep:
            assert counts == [
                (f"teacher({corpus['train']})", 120, 120),
                (corpus["train"], 120, 120),
            ]
            assert stored == distilled + [" ".join(r.split()) for r in references]
        else:
            assert counts == [(f"teacher({corpus['train']})", 120, 120)]
            assert stored == distilled
        assert meta["files"]["train"][0] == str(distilled_file(run_dir, 0))


def test_an_interrupted_distillation_resumes_at_the_chunks_not_written(teacher, corpus, tmp_path):
    run, translator = teacher
    recipe = student(corpus, [run])
    stopping = Counting(translator, stop_at=2)
    with pytest.raises(KeyboardInterrupt):
        distil(recipe, tmp_path / "run", lambda m: None, chunk_lines=CHUNK, translator=stopping)
    chunks = sorted(p.name for p in (teacher_dir(tmp_path / "run") / "chunks").iterdir())
    assert chunks == ["0-000000.tsv"]  # the stopped chunk left no file, not even a partial one
    assert not distilled_file(tmp_path / "run", 0).exists()
    resumed = Counting(translator)
    progress = distil(
        recipe, tmp_path / "run", lambda m: None, chunk_lines=CHUNK, translator=resumed
    )
    assert resumed.calls == 2 and (progress.found, progress.translated) == (1, 2)
    whole = tmp_path / "whole"
    distil(recipe, whole, lambda m: None, chunk_lines=CHUNK)
    assert distilled_file(tmp_path / "run", 0).read_bytes() == distilled_file(whole, 0).read_bytes()


def test_shards_translate_their_own_chunks_and_a_last_call_joins_them(teacher, corpus, tmp_path):
    run, translator = teacher
    recipe = student(corpus, [run])
    counts = []
    for shard in ((0, 2), (1, 2)):
        counting = Counting(translator)
        progress = distil(
            recipe,
            tmp_path / "run",
            lambda m: None,
            shard=shard,
            chunk_lines=CHUNK,
            translator=counting,
        )
        assert not progress.complete and not distilled_file(tmp_path / "run", 0).exists()
        counts.append((counting.calls, progress.others))
    assert counts == [(2, 1), (1, 0)]  # chunks 0 and 2, then chunk 1 (the first's is found)
    joining = Counting(translator)
    progress = distil(
        recipe, tmp_path / "run", lambda m: None, chunk_lines=CHUNK, translator=joining
    )
    assert joining.calls == 0 and progress.found == 3 and progress.complete
    sources = [s for s, _ in pairs_of(distilled_file(tmp_path / "run", 0))]
    assert [t for _, t in pairs_of(distilled_file(tmp_path / "run", 0))] == texts(
        translator.translate(sources)
    )


def test_chunks_made_for_another_plan_are_not_mixed_in(teacher, corpus, tmp_path):
    run, translator = teacher
    said = []
    distil(student(corpus, [run]), tmp_path / "run", said.append, chunk_lines=CHUNK)
    counting = Counting(translator)
    progress = distil(
        student(corpus, [run]), tmp_path / "run", said.append, chunk_lines=40, translator=counting
    )
    assert counting.calls == 3 and progress.translated == 3
    assert any("another teacher or corpus" in m for m in said)
    assert (
        json.loads((teacher_dir(tmp_path / "run") / "plan.json").read_text())["chunk_lines"] == 40
    )


def test_an_ensemble_teacher_translates_as_the_ensemble(teacher, corpus, tmp_path):
    run, _ = teacher
    recipe = student(corpus, [run, run])
    distil(recipe, tmp_path / "run", lambda m: None, chunk_lines=200)
    ensemble = Translator.load([run, run], device="cpu")
    pairs = pairs_of(distilled_file(tmp_path / "run", 0))
    assert [t for _, t in pairs] == texts(ensemble.translate([s for s, _ in pairs]))


def test_a_teacher_that_is_not_a_run_or_of_other_languages_is_refused(teacher, corpus, tmp_path):
    run, _ = teacher
    with pytest.raises(DataError, match=r"^data.teacher: .*no such run dir or checkpoint"):
        distil(student(corpus, [tmp_path / "nowhere"]), tmp_path / "run", lambda m: None)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"^data.teacher: .*no checkpoint yet"):
        distil(student(corpus, [tmp_path / "empty"]), tmp_path / "run", lambda m: None)
    raw = tiny_recipe_dict({**corpus, "teacher": [str(run)]})
    raw["tgt"] = "de"
    with pytest.raises(DataError, match=r"translates en-fr, not the recipe's en-de"):
        distil(recipe_from_dict(raw), tmp_path / "run", lambda m: None)
    assert not (tmp_path / "run").exists()


def test_teacher_keys_are_checked_with_the_recipe(corpus):
    with pytest.raises(
        ConfigError, match="teacher_keep_references: needs data.teacher .* set it false to train"
    ):
        recipe_from_dict(tiny_recipe_dict({**corpus, "teacher_keep_references": True}))
    with pytest.raises(ConfigError, match="leave data.directions out"):
        recipe_from_dict(
            tiny_recipe_dict({**corpus, "teacher": ["runs/x"], "directions": ["en-fr", "fr-en"]})
        )
    assert student(corpus, ["runs/x"]).data.teacher == ["runs/x"]
    one = recipe_from_dict(tiny_recipe_dict({**corpus, "teacher": "runs/x"}))
    assert one.data.teacher == ["runs/x"]


def test_preprocess_command_refuses_a_teacher_of_other_languages_in_one_line(
    teacher, corpus, tmp_path
):
    run, _ = teacher
    raw = tiny_recipe_dict({**corpus, "teacher": [str(run)]})
    raw["src"], raw["tgt"] = "fr", "en"
    path = tmp_path / "student.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "nmt_cli", "preprocess", str(path), "--run-dir", tmp_path / "out"],
        capture_output=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    err = result.stderr.decode().strip().splitlines()
    assert result.returncode == 2 and len(err) == 1, err
    assert err[0] == f"nmt: error: data.teacher: {run} translates en-fr, not the recipe's fr-en"
    assert not (tmp_path / "out").exists()


def test_a_tsv_corpus_is_distilled_line_for_line_and_a_line_without_tab_still_counted(
    teacher, corpus, tmp_path
):
    run, translator = teacher
    english = Path(corpus["train"].format(lang="en")).read_text(encoding="utf-8").splitlines()
    french = Path(corpus["train"].format(lang="fr")).read_text(encoding="utf-8").splitlines()
    rows = [f"{e}\t{f}" for e, f in zip(english[:30], french[:30])]
    rows[4] = "a line without its translation"
    (tmp_path / "train.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    recipe = student(
        {**corpus, "train": str(tmp_path / "train.tsv")}, [run], format="tsv", max_ratio=1000.0
    )
    distil(recipe, tmp_path / "run", lambda m: None)
    lines = distilled_file(tmp_path / "run", 0).read_text(encoding="utf-8").splitlines()
    assert lines[4] == "a line without its translation"
    pairs = [line.split("\t") for i, line in enumerate(lines) if i != 4]
    wanted = [e for i, e in enumerate(english[:30]) if i != 4]
    assert [s for s, _ in pairs] == wanted
    assert [t for _, t in pairs] == texts(translator.translate(wanted))
    meta = preprocess(recipe, tmp_path / "run", log=lambda m: None)
    assert meta["corpora"][0]["read"] == 30
    assert meta["corpora"][0]["dropped"] == {"no tab (not source<TAB>target)": 1}


def test_shard_without_a_teacher_is_refused_in_one_line(corpus, tmp_path):
    path = tmp_path / "plain.yaml"
    path.write_text(yaml.safe_dump(tiny_recipe_dict(corpus)), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "nmt_cli", "preprocess", str(path), "--shard", "0/2"],
        capture_output=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    err = result.stderr.decode().strip().splitlines()
    assert result.returncode == 2 and len(err) == 1, err
    assert "--shard: shares a teacher's translations" in err[0]
    assert not (tmp_path / "runs").exists()


def test_train_on_a_run_dir_without_data_distils_first(teacher, corpus, tmp_path):
    run, _ = teacher
    path = tmp_path / "student.yaml"
    path.write_text(
        yaml.safe_dump(tiny_recipe_dict({**corpus, "teacher": [str(run)]})), encoding="utf-8"
    )
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "nmt_cli", "train", str(path), "--run-dir", str(out)]
        + ["--max-steps", "1", "--threads", "1", "--device", "cpu"],
        capture_output=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=600,
    )
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    meta = json.loads((out / "data" / "meta.json").read_text())
    assert meta["corpora"][0]["corpus"] == f"teacher({corpus['train']})"
    assert distilled_file(out, 0).is_file() and (out / "checkpoints" / "last.pt").is_file()
