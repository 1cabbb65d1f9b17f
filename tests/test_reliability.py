"""Faults a long-running toolkit meets: kills, broken run dirs, odd input files."""

import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nmt_cli.config.recipes import recipe_from_dict
from nmt_cli.data.preprocess import preprocess
from nmt_cli.data.store import load_split
from nmt_cli.training import checkpoint as ckpt
from tests.cli.test_cli import nmt, one_line_error
from tests.conftest import tiny_recipe_dict, write_slice

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_sigkill_at_random_moments_never_breaks_the_run_dir(tmp_path):
    data = write_slice(tmp_path / "corpus", n_train=400, n_valid=20)
    recipe_path = tmp_path / "tiny.yaml"
    recipe_path.write_text(
        yaml.safe_dump(
            tiny_recipe_dict(
                data, train={"checkpoint_every": 3, "valid_every": 7, "valid_max_sentences": 10}
            )
        )
    )
    run = tmp_path / "run"
    assert nmt("preprocess", recipe_path, "--run-dir", run).returncode == 0
    rng = random.Random(0)
    cmd = [
        sys.executable,
        "-m",
        "nmt_cli",
        "train",
        str(recipe_path),
        "--run-dir",
        str(run),
        "--max-steps",
        "100000",
    ]
    last = run / "checkpoints" / "last.pt"
    last_step = 0
    for attempt in range(10):
        log = tmp_path / f"train-{attempt}.log"
        with log.open("wb") as log_file:
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log_file, cwd=ROOT)
        if attempt == 0:
            # A slow machine may need longer than any fixed delay to reach the first checkpoint;
            # the first kill waits for it (bounded), so the resume below always has a step to
            # resume.
            deadline = time.monotonic() + 180
            while not last.exists() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(rng.uniform(0.0, 1.0))
        else:
            time.sleep(rng.uniform(2.0, 6.0))
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        if last.exists():
            payload = ckpt.load(last)  # loads after every kill
            assert payload["progress"]["step"] >= last_step
            last_step = payload["progress"]["step"]
        leftovers = (
            [p.name for p in (run / "checkpoints").glob(".*.part")]
            if (run / "checkpoints").exists()
            else []
        )
        # A half-written temp file may stay after SIGKILL; it never replaces a checkpoint.
        assert all(name.endswith(".part") for name in leftovers)
    assert last_step > 0, (tmp_path / "train-0.log").read_text()
    resumed = nmt("train", recipe_path, "--run-dir", run, "--max-steps", last_step + 2)
    assert resumed.returncode == 0, resumed.stderr.decode()
    assert f"resuming from step {last_step}".encode() in resumed.stderr


def test_run_dir_missing_pieces(tiny_run, tmp_path):
    _, run_dir = tiny_run
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    (copy / "data" / "valid.src.offsets.npy").unlink()
    recipe_yaml = tmp_path / "r.yaml"
    recipe_yaml.write_text((copy / "recipe.yaml").read_text())
    result = nmt("train", recipe_yaml, "--run-dir", copy, "--max-steps", 1)
    one_line_error(result, "valid.src.offsets.npy", "re-run nmt preprocess")


def test_broken_tokenizer_model(tiny_run, tmp_path):
    _, run_dir = tiny_run
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    (copy / "spm.model").write_bytes(random.Random(0).randbytes(300))
    recipe_yaml = tmp_path / "r.yaml"
    recipe_yaml.write_text((copy / "recipe.yaml").read_text())
    one_line_error(nmt("train", recipe_yaml, "--run-dir", copy, "--max-steps", 1), "spm.model")


def test_recipe_with_vanished_data_files(tmp_path):
    data = write_slice(tmp_path / "corpus", n_train=30, n_valid=5)
    recipe_yaml = tmp_path / "r.yaml"
    recipe_yaml.write_text(yaml.safe_dump(tiny_recipe_dict(data)))
    shutil.rmtree(tmp_path / "corpus")
    one_line_error(
        nmt("preprocess", recipe_yaml, "--run-dir", tmp_path / "run"), "train.en", "not found"
    )


def test_checkpoint_write_error_keeps_previous_and_training_goes_on(
    tiny_run, tmp_path, monkeypatch
):
    from nmt_cli.training.loop import train

    recipe, run_dir = tiny_run
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    raw = recipe.to_dict()
    raw["train"].update(max_steps=4, checkpoint_every=2)
    r = recipe_from_dict(raw)
    original = ckpt.save_atomic
    calls = {"n": 0}

    def flaky(payload, path):
        calls["n"] += 1
        if calls["n"] >= 2:
            raise OSError(28, "No space left on device")
        return original(payload, path)

    monkeypatch.setattr(ckpt, "save_atomic", flaky)
    summary = train(r, copy, device="cpu")
    assert summary["final_step"] == 4
    assert ckpt.load(copy / "checkpoints" / "last.pt")["progress"]["step"] == 2
    assert "No space left on device" in (copy / "train.log").read_text()


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    extra=st.lists(
        st.tuples(st.binary(max_size=80), st.binary(max_size=80)), min_size=1, max_size=20
    )
)
def test_preprocess_survives_random_bytes(tmp_path_factory, extra):
    base = tmp_path_factory.mktemp("prop")
    data = write_slice(base / "corpus", n_train=120, n_valid=5)
    for lang, idx in (("en", 0), ("fr", 1)):
        path = base / "corpus" / f"train.{lang}"
        noise = (
            b"\n".join(pair[idx].replace(b"\n", b" ").replace(b"\r", b" ") for pair in extra)
            + b"\n"
        )
        path.write_bytes(path.read_bytes() + noise)
    recipe = recipe_from_dict(
        tiny_recipe_dict(data, tokenizer={"vocab_size": 200, "sample_sentences": 1000})
    )
    meta = preprocess(recipe, base / "run", log=lambda m: None)
    kept = meta["splits"]["train"]["src"]["sentences"]
    assert kept + sum(meta["dropped"].values()) == 120 + len(extra)
    assert len(load_split(base / "run", "train")) == kept


def test_huge_line_and_many_empty_lines(tiny_run, tmp_path):
    _, run_dir = tiny_run
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    from nmt_cli.config.recipes import load_recipe
    from nmt_cli.training.loop import train as run_train

    recipe = load_recipe(copy / "recipe.yaml", ["train.max_steps=2"])
    run_train(recipe, copy, device="cpu")
    # a 1 MB line of one word (no space or clause to cut it at) is cut at the model's source
    # limit, with one warning, and 100,000 empty lines give as many empty lines
    data = b"wordy" * 200_000 + b"\n" + b"\n" * 100_000
    cut = nmt("translate", "-m", copy, "--beam-size", 1, "--scores", input=data, timeout=600)
    assert cut.returncode == 0, cut.stderr.decode()[-500:]
    assert cut.stdout.count(b"\n") == 100_001
    assert cut.stderr.decode().count("longer than") == 1
    # as paragraphs (the default), a 100 kB line is translated in parts the model reads whole:
    # nothing is cut
    data = b"word " * 20_000 + b"\n" + b"\n" * 100_000
    result = nmt("translate", "-m", copy, "--beam-size", 1, input=data, timeout=600)
    assert result.returncode == 0, result.stderr.decode()[-500:]
    assert result.stdout.count(b"\n") == 100_001
    assert "longer than" not in result.stderr.decode()
    assert len(result.stdout.split(b"\n")[0].split()) > 1000
