"""Ctrl-C and SIGTERM against real `nmt` processes: exit 130 / 143, one line saying what was left
incomplete, no traceback, and no partial file that looks finished."""

import shutil
import signal
import subprocess
import sys
import time

import pytest
import yaml

from nmt_cli.runtime.interrupts import Interrupted, task, unfinished
from nmt_cli.training import checkpoint as ckpt
from tests.cli.test_cli import ROOT
from tests.conftest import multi30k_lines, tiny_recipe_dict, trained_copy, write_slice


@pytest.fixture(scope="module")
def model_run(tiny_run, tmp_path_factory):
    return trained_copy(tiny_run, tmp_path_factory, "interrupts", progress_bar=False, max_steps=2)


@pytest.fixture(scope="module")
def many_lines(tmp_path_factory):
    """Enough captions that translating or scoring them takes far longer than the test waits."""
    path = tmp_path_factory.mktemp("lines") / "src.en"
    path.write_text("\n".join(multi30k_lines("train", "en", 2000) * 10) + "\n", encoding="utf-8")
    return path


def start(*args, stdout=subprocess.DEVNULL):
    return subprocess.Popen(
        [sys.executable, "-m", "nmt_cli", *map(str, args)],
        stdout=stdout,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={**__import__("os").environ, "NMT_THREADS": "1"},
    )


def handlers_installed(proc, timeout=120) -> None:
    """Wait until the process catches SIGTERM, i.e. nmt's handlers are in place (Python catches
    SIGINT from its start, SIGTERM only once nmt asks)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            status = open(f"/proc/{proc.pid}/status").read()
        except FileNotFoundError:
            break
        caught = int(
            next(line for line in status.splitlines() if line.startswith("SigCgt:")).split()[1], 16
        )
        if caught & (1 << (signal.SIGTERM - 1)):
            return
        time.sleep(0.05)
    pytest.fail("nmt never installed its signal handlers")


def stopped(proc, sig, code, *needles) -> str:
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    err = err.decode()
    assert proc.returncode == code, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"nmt: {signal.Signals(sig).name} received: "), err
    for needle in needles:
        assert needle in last, last
    return last


pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")


def test_translate_to_a_file_leaves_no_file_on_sigint(model_run, many_lines, tmp_path):
    out = tmp_path / "out.fr"
    proc = start("translate", "-m", model_run, "-i", many_lines, "-o", out, "--beam-size", 5)
    deadline = time.time() + 120
    while not list(tmp_path.glob(".out.fr.*.part")) and time.time() < deadline:
        time.sleep(0.05)  # the temporary file exists once translating starts
    stopped(proc, signal.SIGINT, 130, "translation stopped after", f"{out} was not written")
    assert list(tmp_path.iterdir()) == []


def test_translate_to_stdout_says_how_many_lines_are_there_on_sigterm(model_run, many_lines):
    proc = start(
        "translate", "-m", model_run, "-i", many_lines, "--beam-size", 5, stdout=subprocess.PIPE
    )
    first = proc.stdout.readline()  # the first chunk is written
    assert first
    proc.send_signal(signal.SIGTERM)
    rest = proc.stdout.read()  # through the reader that holds what readline read ahead
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert proc.returncode == 143 and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    written = 1 + rest.count(b"\n")
    assert last == (
        f"nmt: SIGTERM received: translation stopped after {written} lines; "
        "the lines before it are on stdout"
    ), last


def test_translate_to_a_file_completes_by_rename(model_run, tmp_path):
    src = tmp_path / "src.en"
    src.write_text("A dog.\nTwo men talk.\n")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "nmt_cli",
            "translate",
            "-m",
            str(model_run),
            "-i",
            str(src),
            "-o",
            str(tmp_path / "out.fr"),
            "--threads",
            "1",
        ],
        capture_output=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr.decode()
    assert (tmp_path / "out.fr").read_text().count("\n") == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.fr", "src.en"]


def test_eval_and_score_on_sigterm_and_sigint(model_run, many_lines, tmp_path):
    proc = start(
        "eval", "-m", model_run, "--src", many_lines, "--ref", many_lines, "--beam-size", 5
    )
    handlers_installed(proc)
    time.sleep(3)  # into the translation (model loading takes well under that)
    stopped(proc, signal.SIGTERM, 143, "nothing was scored")
    proc = start("score", "-m", model_run, "--src", many_lines, "--tgt", many_lines)
    handlers_installed(proc)
    time.sleep(3)
    stopped(proc, signal.SIGINT, 130, "scoring stopped")


def test_preprocess_on_sigint_leaves_no_run_dir(tmp_path):
    data = write_slice(tmp_path / "corpus", n_train=29000, n_valid=50)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        yaml.safe_dump(
            tiny_recipe_dict(data, tokenizer={"vocab_size": 2000, "sample_sentences": 29000})
        )
    )
    run = tmp_path / "run"
    proc = start("preprocess", recipe, "--run-dir", run)
    # The run dir exists from the start; the signal goes once the sample is drawn, with
    # SentencePiece's training and the whole pass still to come (seconds), rather than at a
    # moment a loaded machine could push past the end of so small a preprocess
    for line in proc.stderr:
        if line.startswith(b"sample drawn"):
            break
    assert run.exists()
    stopped(proc, signal.SIGINT, 130, "preprocessing into", "run nmt preprocess again")
    assert not run.exists()


def test_training_stopped_twice_keeps_a_loadable_last_checkpoint(tiny_run, tmp_path):
    _, run_dir = tiny_run
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    recipe = tmp_path / "r.yaml"
    recipe.write_text((run / "recipe.yaml").read_text())
    proc = start(
        "train",
        recipe,
        "--run-dir",
        run,
        "--max-steps",
        100000,
        "--set",
        "train.checkpoint_every=7",
    )
    for line in proc.stderr:  # progress lines come within seconds
        if line.startswith(b"step "):
            break
    proc.send_signal(signal.SIGINT)
    for line in proc.stderr:
        if b"received: finishing this step" in line:
            break
    proc.send_signal(signal.SIGINT)  # while the step ends or the checkpoint is written
    _, err = proc.communicate(timeout=120)
    err = err.decode()
    assert proc.returncode == 130 and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("nmt: ") and "run the same command to resume" in last, last
    payload = ckpt.load(run / "checkpoints" / "last.pt")
    assert payload["progress"]["step"] >= 0
    # an interruption between the recipe's checkpoints never enters averaging
    assert all(p.name.startswith("step-") for p in ckpt.step_checkpoints(run))
    for p in (run / "checkpoints").glob("interrupted-*.pt"):
        assert ckpt.step_of(p.with_name(p.name.replace("interrupted", "step"))) % 7 != 0


def test_serve_stops_on_sigint_and_exits_0(model_run):
    """uvicorn finishes what is in flight and hands the signal back; nmt serve exits 0."""
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    proc = start("serve", "-m", model_run, "--port", 0)
    line = proc.stderr.readline().decode()
    assert "http://" in line, line + proc.stderr.read().decode()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    err = err.decode()
    assert proc.returncode == 0 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == "nmt serve: stopped", err


def test_the_innermost_task_names_what_is_unfinished():
    assert unfinished() == "stopped before it finished"
    with task("outer"):
        with task(lambda: "inner, computed when asked"):
            assert (
                str(Interrupted(signal.SIGTERM)) == "SIGTERM received: inner, computed when asked"
            )
        assert Interrupted(signal.SIGINT).exit_code == 130
        assert unfinished() == "outer"
