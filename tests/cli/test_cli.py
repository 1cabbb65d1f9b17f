"""The `nmt` command line, run as users run it: a subprocess with real files."""

import gzip
import importlib.util
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from tests.conftest import MIRROR, multi30k_lines, tiny_recipe_dict, write_slice

ROOT = Path(__file__).resolve().parents[2]


def nmt(*args, input: bytes | None = None, cwd=None, timeout=300, env=None):
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "nmt_cli", *map(str, args)],
        input=input,
        capture_output=True,
        cwd=cwd or ROOT,
        timeout=timeout,
        env=full_env,
    )


def one_line_error(result, *needles):
    err = result.stderr.decode()
    assert result.returncode == 2, err
    assert "Traceback" not in err
    lines = [line for line in err.strip().splitlines() if line]
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_version_and_help():
    assert nmt("--version").stdout.decode().startswith("nmt ")
    for cmd in ("preprocess", "train", "translate", "eval", "score", "average", "serve"):
        out = nmt(cmd, "--help")
        assert out.returncode == 0 and b"Usage" in out.stdout
        assert b"<list" not in out.stdout  # -m reads RUN, not the Python type
        if cmd in ("translate", "eval", "score", "serve"):
            assert b"-m, --model RUN" in out.stdout, cmd


@pytest.mark.parametrize(
    "text, needle",
    [
        (
            "model: {hiden_dim: 8}\n",
            "model.hiden_dim: unknown key (did you mean 'model.hidden_dim'?)",
        ),
        ("model: {rnn: transformer}\n", "model.rnn: 'transformer' is not one of gru, lstm, rnn"),
        ("model: {dropout: 2}\n", "model.dropout: 2 is out of range"),
        ("model: {layers: two}\n", "model.layers: expected an integer"),
        ("model:\n  rnn: [\n", "broken YAML"),
        ("", "the recipe is empty"),
    ],
)
def test_bad_recipes_end_in_one_line(tmp_path, text, needle):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    for cmd in ("preprocess", "train"):
        one_line_error(nmt(cmd, path, "--run-dir", tmp_path / "run"), str(path), needle)


def test_bad_set_and_missing_recipe(tmp_path):
    one_line_error(
        nmt(
            "train",
            ROOT / "recipes/en-fr.yaml",
            "--set",
            "model.hidden_dim=wide",
            "--run-dir",
            tmp_path,
        ),
        "model.hidden_dim: expected an integer, got 'wide'",
    )
    one_line_error(nmt("train", tmp_path / "nope.yaml"), "recipe file not found")


def test_fp16_on_a_cpu_is_refused_before_preprocessing(tmp_path):
    result = nmt(
        "train",
        "recipes/en-fr.yaml",
        "--run-dir",
        tmp_path / "run",
        "--device",
        "cpu",
        "--set",
        "train.precision=fp16",
        timeout=60,
    )
    one_line_error(result, "fp16 needs a CUDA device")
    assert not (tmp_path / "run" / "data").exists()


def test_bad_command_lines_are_one_line():
    one_line_error(nmt("translate", "--bogus"), "No such option: --bogus", "nmt translate --help")
    one_line_error(nmt("translate", "-m", "x", "--beam-size", 0, input=b"hi\n"), "--beam-size")
    one_line_error(
        nmt("translate", "-m", "x", "--length-penalty", -1, input=b"hi\n"), "--length-penalty"
    )
    one_line_error(nmt("train"), "Missing argument")
    one_line_error(nmt("bogus"), "No such command")


def test_translate_without_a_model_is_one_line(tmp_path):
    one_line_error(nmt("translate", "-m", tmp_path / "nothing", input=b"hi\n"), "no such run dir")
    (tmp_path / "junk.pt").write_bytes(random.Random(0).randbytes(1000))
    one_line_error(nmt("translate", "-m", tmp_path / "junk.pt", input=b"hi\n"), "junk.pt")
    one_line_error(nmt("average", tmp_path, "--last", 3), str(tmp_path), "no numbered checkpoints")
    one_line_error(nmt("translate", "-m", "x", "--workers", 0, input=b"hi\n"), "--workers")
    no_plot_extra = importlib.util.find_spec("matplotlib") is None
    one_line_error(
        nmt(
            "translate",
            "-m",
            tmp_path / "nothing",
            "--attention-plot",
            tmp_path / "junk.pt" / "pics",
            input=b"hi\n",
        ),
        "--attention-plot",
        "needs matplotlib" if no_plot_extra else "cannot create the folder",
    )
    pair = tmp_path / "one.txt"
    pair.write_text("hi\n")
    one_line_error(
        nmt("score", "-m", "a", "-m", "b", "--src", pair, "--tgt", pair), "-m", "one model"
    )


def test_eval_with_files(tmp_path):
    hyp, ref = tmp_path / "h.txt", tmp_path / "r.txt"
    hyp.write_text("a man rides a bike .\ntwo dogs play\n")
    ref.write_text("a man rides a bike .\ntwo dogs play in snow\n")
    out = nmt("eval", "--hyp", hyp, "--ref", ref, "--json")
    report = json.loads(out.stdout)
    metrics = {s["metric"]: s["score"] for s in report["scores"]}
    assert set(metrics) == {"bleu", "chrf", "ter"} and 0 < metrics["bleu"] < 100
    one_line_error(nmt("eval", "--hyp", hyp, "--ref", tmp_path / "missing.txt"), "missing.txt")
    # -m with --src and --ref of different lengths fails before any model is loaded.
    three = tmp_path / "three.txt"
    three.write_text("a\nb\nc\n")
    one_line_error(
        nmt("eval", "-m", tmp_path / "no-run", "--src", hyp, "--ref", three),
        "differ in length",
        "2 vs 3",
    )
    one_line_error(nmt("eval", "--hyp", hyp, "--ref", ref, "--by-length"), "--by-length", "--src")
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    one_line_error(nmt("eval", "--hyp", empty, "--ref", empty), "empty")
    one_line_error(
        nmt(
            "eval",
            "--hyp",
            hyp,
            "--ref",
            ref,
            "--src",
            ref,
            "--by-length",
            "--plot",
            tmp_path / "no-such-folder" / "chart.png",
        ),
        "--plot",
        "does not exist",
    )
    one_line_error(
        nmt("eval", "--hyp", hyp, "--ref", ref, "--plot", tmp_path / "chart.png"),
        "--plot",
        "--by-length",
    )


def test_help_and_file_scoring_do_not_import_torch(tmp_path):
    """Torch takes seconds to import: `nmt --help` and `nmt eval --hyp --ref` must not wait for
    it."""
    ref = tmp_path / "r.txt"
    ref.write_text("a man rides a bike .\n")
    probe = (
        "import sys; from nmt_cli.cli import main; sys.argv = ['nmt'] + sys.argv[1:]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('torch' in sys.modules, file=sys.stderr)"
    )
    for args in (["--help"], ["eval", "--hyp", str(ref), "--ref", str(ref)]):
        result = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, cwd=ROOT)
        assert result.stderr.decode().strip().splitlines()[-1] == "False", (
            args,
            result.stderr.decode(),
        )


def test_out_of_tree_device_backends_are_not_scanned_unless_asked():
    """nmt runs on torch's built-in devices: the command line skips torch's scan for device
    backends of other packages (30-40 ms of each start), unless the user's environment says."""
    probe = (
        "import os, sys; import nmt_cli.cli as cli; sys.argv = ['nmt', '--version']\n"
        "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
        "print(os.environ.get('TORCH_DEVICE_BACKEND_AUTOLOAD'), file=sys.stderr)"
    )
    for given, want in ((None, "0"), ("1", "1")):
        env = {k: v for k, v in os.environ.items() if k != "TORCH_DEVICE_BACKEND_AUTOLOAD"}
        if given is not None:
            env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = given
        result = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, cwd=ROOT, env=env
        )
        assert result.stderr.decode().strip().splitlines()[-1] == want, result.stderr.decode()


def _trained_copy(tiny_run, tmp_path: Path) -> Path:
    """A copy of the tiny run dir with two training steps: a model translate can load."""
    import shutil

    from nmt_cli.config.recipes import recipe_from_dict
    from nmt_cli.training.loop import train

    recipe, run_dir = tiny_run
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    raw = recipe.to_dict()
    raw["train"].update(max_steps=2, checkpoint_every=2)
    train(recipe_from_dict(raw), run, device="cpu")
    return run


def test_commands_collect_garbage_again_once_started(tiny_run, tmp_path):
    """A command that needs torch imports it with the garbage collector off and then turns it back
    on, with what the import built frozen, before its work, which may run for hours; one that
    needs no torch, or a command line that never reaches a command, leaves the collector alone."""
    run = _trained_copy(tiny_run, tmp_path)
    ref = tmp_path / "r.txt"
    ref.write_text("a man rides a bike .\n")
    probe = (
        "import gc, sys; import nmt_cli.cli as cli; sys.argv = ['nmt'] + sys.argv[1:]\n"
        "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
        "print(gc.isenabled(), gc.get_freeze_count() > 0, 'torch' in sys.modules, file=sys.stderr)"
    )
    for args, want in (
        (["eval", "--hyp", str(ref), "--ref", str(ref)], "True False False"),
        (["translate", "-m", str(run), "-i", str(ref)], "True True True"),
        (["translate", "-m", str(tmp_path / "no-such-run")], "True True True"),
        (["--version"], "True False False"),
    ):
        result = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, cwd=ROOT)
        assert result.returncode == 0, result.stderr.decode()
        assert result.stderr.decode().strip().splitlines()[-1] == want, (
            args,
            result.stderr.decode(),
        )


def test_translate_writes_every_line_to_stdout_and_to_its_output_file(tiny_run, tmp_path):
    """`nmt translate` closes -o (renamed into place) and flushes stdout before it exits 0."""
    run = _trained_copy(tiny_run, tmp_path)
    lines = (run / "data" / "valid.src.txt").read_text(encoding="utf-8").split("\n")[:30]
    source = ("\n".join(lines) + "\n").encode()
    to_stdout = nmt("translate", "-m", run, "--beam-size", 2, input=source)
    assert to_stdout.returncode == 0 and to_stdout.stderr == b"", to_stdout.stderr.decode()
    assert to_stdout.stdout.decode().count("\n") == 30
    out = tmp_path / "out.txt"
    to_file = nmt("translate", "-m", run, "--beam-size", 2, "-o", out, input=source)
    assert to_file.returncode == 0 and to_file.stdout == b"", to_file.stderr.decode()
    assert out.read_text(encoding="utf-8") == to_stdout.stdout.decode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt", "run"]


def test_bad_decode_options_are_one_line_naming_the_option(tiny_run, tmp_path):
    run = _trained_copy(tiny_run, tmp_path)
    one_line_error(
        nmt("translate", "-m", run, "--beam-size", 2, "--nbest", 9, input=b"A dog.\n"),
        "--nbest 9 exceeds the beam size 2",
    )
    one_line_error(
        nmt("translate", "-m", run, "--precision", "fp8", input=b"A dog.\n"),
        "--precision: 'fp8' is not one of auto, fp32, bf16",
    )
    one_line_error(
        nmt("translate", "-m", run, "--beam-size", 101, input=b"A dog.\n"),
        "--beam-size: 101 is out of range (must be <= 100)",
    )


def test_places_the_system_refuses_are_one_line_naming_them(tiny_run, tmp_path):
    run = _trained_copy(tiny_run, tmp_path)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n", encoding="utf-8")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(tiny_run[0].to_dict()), encoding="utf-8")

    def refused(result, *needles):
        err = result.stderr.decode()
        assert result.returncode == 2 and "Traceback" not in err, err
        last = err.strip().splitlines()[-1]  # after average's note on how many it found
        assert last.startswith("nmt: error: ") and all(n in last for n in needles), err

    # a run dir, a package and an average under a file: each names the path, none a traceback
    refused(nmt("preprocess", recipe, "--run-dir", blocker / "run"), str(blocker))
    refused(nmt("export", run, "-o", blocker / "model.nmt"), str(blocker))
    refused(nmt("average", run, "-o", blocker / "avg.pt"), str(blocker))
    assert blocker.read_text(encoding="utf-8") == "not a folder\n"
    if os.geteuid() != 0:  # root writes where the mode says it may not
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        refused(nmt("average", run, "-o", locked / "avg.pt"), str(locked / "avg.pt"))
        assert list(locked.iterdir()) == []  # no temporary file left behind


def test_translate_imports_torch_whole():
    """The command line runs the same torch as the library: no import hook, no module stubbed."""
    probe = (
        "import sys; hooks = list(sys.meta_path); import nmt_cli.cli as cli\n"
        "sys.argv = ['nmt', 'translate', '-m', sys.argv[1]]\n"
        "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
        "print('torch' in sys.modules, sys.meta_path == hooks, file=sys.stderr)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, str(ROOT / "no-such-run")], capture_output=True, cwd=ROOT
    )
    last = result.stderr.decode().strip().splitlines()[-1]
    assert last == "True True", result.stderr.decode()


def test_a_bare_nmt_shows_the_help_on_stderr_and_exits_2():
    result = nmt()
    err = result.stderr.decode()
    assert result.returncode == 2 and result.stdout == b"", err
    assert err.startswith("Usage: nmt [OPTIONS] COMMAND") and "translate" in err, err
    assert "Traceback" not in err


@pytest.mark.slow
def test_end_to_end_on_real_multi30k(tmp_path):
    """preprocess -> train -> translate -> eval through the CLI on a slice of real data."""
    data = write_slice(tmp_path / "corpus", n_train=1500, n_valid=100)
    recipe = tiny_recipe_dict(
        data,
        train={"valid_every": 50, "valid_max_sentences": 50, "lr": 0.003},
        model={"embed_dim": 64, "hidden_dim": 64},
    )
    recipe_path = tmp_path / "tiny.yaml"
    recipe_path.write_text(yaml.safe_dump(recipe))
    run = tmp_path / "run"
    pre = nmt("preprocess", recipe_path, "--run-dir", run)
    assert pre.returncode == 0, pre.stderr.decode()
    assert b"1500 kept" in pre.stderr
    tr = nmt("train", recipe_path, "--run-dir", run, "--max-steps", 100)
    assert tr.returncode == 0, tr.stderr.decode()
    assert json.loads(tr.stdout)["final_step"] == 100
    assert (run / "checkpoints" / "best.pt").exists()
    # Resume is announced and continues from the checkpoint.
    more = nmt("train", recipe_path, "--run-dir", run, "--max-steps", 110)
    assert b"resuming from step 100" in more.stderr, more.stderr.decode()
    src_lines = multi30k_lines("test_2016_flickr", "en", 50)
    ref_lines = multi30k_lines("test_2016_flickr", "fr", 50)
    source = tmp_path / "src.en"
    source.write_text("\n".join(src_lines) + "\n")
    out = nmt("translate", "-m", run, "--beam-size", 3, input=source.read_bytes())
    assert out.returncode == 0, out.stderr.decode()
    hyps = out.stdout.decode().split("\n")[:-1]
    assert len(hyps) == 50 and sum(bool(h) for h in hyps) > 40
    # 110 steps on 1,500 captions is enough to learn how French captions begin.
    first_words = Counter(h.split()[0] for h in hyps if h)
    assert first_words.most_common(1)[0][0] in {"Un", "Une", "Deux", "Des", "Le", "La"}, first_words
    hyp_file, ref_file = tmp_path / "hyp.fr", tmp_path / "ref.fr"
    hyp_file.write_text(out.stdout.decode())
    ref_file.write_text("\n".join(ref_lines) + "\n")
    ev = nmt("eval", "--hyp", hyp_file, "--ref", ref_file, "--json")
    bleu = {s["metric"]: s for s in json.loads(ev.stdout)["scores"]}["bleu"]
    assert bleu["score"] > 0 and bleu["signature"].startswith("nrefs:1")
    ev2 = nmt(
        "eval", "-m", run, "--src", source, "--ref", ref_file, "--by-length", "--beam-size", 1
    )
    assert ev2.returncode == 0 and b"BLEU by source length" in ev2.stdout
    avg = nmt("average", run, "--last", 2, "-o", tmp_path / "avg.pt")
    assert avg.returncode == 0, avg.stderr.decode()
    assert nmt("translate", "-m", tmp_path / "avg.pt", input=b"A dog.\n").stdout.count(b"\n") == 1
    # The CPU speed options, through the CLI: int8 weights, the full vocabulary instead of the
    # shortlist, and a shortlist of the specials and each source piece's two best candidates only.
    for extra in (
        ["--quantize", "int8"],
        ["--no-shortlist"],
        ["--quantize", "int8", "--shortlist"],
        ["--shortlist-frequent", "4", "--shortlist-per-source", "2"],
    ):
        fast = nmt("translate", "-m", run, "--beam-size", 3, *extra, input=source.read_bytes())
        assert fast.returncode == 0 and fast.stderr == b"", fast.stderr.decode()
        assert fast.stdout.count(b"\n") == 50


@pytest.mark.slow
def test_lowercase_recipe_end_to_end(tmp_path):
    """data.lowercase: preprocess, train, translate and eval through the CLI on real captions."""
    data = write_slice(tmp_path / "corpus", n_train=400, n_valid=40)
    recipe_path = tmp_path / "tiny.yaml"
    recipe_path.write_text(yaml.safe_dump(tiny_recipe_dict(data)))
    run = tmp_path / "run"
    tr = nmt(
        "train", recipe_path, "--run-dir", run, "--max-steps", 20, "--set", "data.lowercase=true"
    )
    assert tr.returncode == 0, tr.stderr.decode()
    stored = (run / "data" / "train.tgt.txt").read_text(encoding="utf-8")
    assert stored == stored.lower()
    lines = [line.upper() for line in multi30k_lines("test_2016_flickr", "en", 20)]
    out = nmt("translate", "-m", run, "--beam-size", 2, input=("\n".join(lines) + "\n").encode())
    assert out.returncode == 0, out.stderr.decode()
    hyps = out.stdout.decode().split("\n")[:-1]
    assert len(hyps) == 20 and any(hyps) and all(h == h.lower() for h in hyps)
    source, ref = tmp_path / "src.en", tmp_path / "ref.fr"
    source.write_text("\n".join(lines) + "\n")
    ref.write_text("\n".join(multi30k_lines("test_2016_flickr", "fr", 20)) + "\n")
    ev = nmt("eval", "-m", run, "--src", source, "--ref", ref, "--beam-size", 1)
    assert ev.returncode == 0 and b"trained with data.lowercase" in ev.stderr, ev.stderr.decode()
    tok_ref = tmp_path / "ref.tok.fr"
    with gzip.open(
        MIRROR / "multi30k" / "tok" / "test_2016_flickr.lc.norm.tok.fr.gz", "rt", encoding="utf-8"
    ) as fh:
        tok_ref.write_text("".join(fh.readlines()[:20]), encoding="utf-8")
    tok = nmt(
        "eval", "-m", run, "--src", source, "--ref", tok_ref, "--lc-tok", "fr", "--beam-size", 1
    )
    assert tok.returncode == 0 and b"data.lowercase" not in tok.stderr, tok.stderr.decode()
    # Preprocessed data remembers it: training the same run dir cased is refused with the key named.
    again = nmt("train", recipe_path, "--run-dir", run, "--max-steps", 30)
    assert again.returncode == 2 and b"data.lowercase" in again.stderr, again.stderr.decode()


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signals_checkpoint_and_exit_cleanly(tmp_path, sig, code):
    data = write_slice(tmp_path / "corpus", n_train=400, n_valid=20)
    recipe_path = tmp_path / "tiny.yaml"
    recipe_path.write_text(yaml.safe_dump(tiny_recipe_dict(data)))
    run = tmp_path / "run"
    assert nmt("preprocess", recipe_path, "--run-dir", run).returncode == 0
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nmt_cli",
            "train",
            str(recipe_path),
            "--run-dir",
            str(run),
            "--max-steps",
            "100000",
        ],
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    log = run / "metrics.jsonl"
    deadline = time.time() + 120
    while not log.exists() and time.time() < deadline:  # wait until training really runs
        time.sleep(0.2)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err.decode()
    assert b"Traceback" not in err
    assert (run / "checkpoints" / "last.pt").exists()
    again = nmt("train", recipe_path, "--run-dir", run, "--max-steps", 1)
    assert b"resuming from step" in again.stderr


@pytest.mark.slow
def test_translate_shows_progress_on_a_terminal_and_only_translations_on_stdout(tmp_path, tiny_run):
    import pty
    import shutil as sh

    from nmt_cli.config.recipes import recipe_from_dict
    from nmt_cli.training.loop import train as run_train

    recipe, run_dir = tiny_run
    run = tmp_path / "run"
    sh.copytree(run_dir, run)
    raw = recipe.to_dict()
    raw["train"].update(max_steps=2)
    run_train(recipe_from_dict(raw), run, device="cpu", progress_bar=False)
    src = tmp_path / "src.en"
    src.write_text("\n".join(multi30k_lines("val", "en", 300)) + "\n")
    import fcntl
    import struct
    import termios

    master, slave = pty.openpty()  # stderr is a terminal, stdout a pipe
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nmt_cli",
            "translate",
            "-m",
            str(run),
            "-i",
            str(src),
            "--beam-size",
            "1",
            "--threads",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=slave,
        cwd=ROOT,
    )
    os.close(slave)
    out, _ = proc.communicate(timeout=300)
    shown = b""
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        shown += data
    os.close(master)
    assert proc.returncode == 0, shown.decode(errors="replace")
    assert out.count(b"\n") == 300 and b"line/s" not in out
    assert b"300/300" in shown and b"line/s" in shown, shown.decode(errors="replace")


def test_translate_paragraphs_html_and_document_errors(tiny_run, tmp_path):
    """A pasted paragraph stays one line, an HTML page comes back as HTML with its markup, and
    the document options' mistakes are one line each."""
    run = _trained_copy(tiny_run, tmp_path)
    sentences = [x for x in multi30k_lines("test_2016_flickr", "en", 12) if x.endswith(".")][:3]
    text = " ".join(sentences) + "\n\n  A dog runs.\n"
    result = nmt("translate", "-m", run, "--threads", 1, input=text.encode())
    assert result.returncode == 0, result.stderr.decode()
    out = result.stdout.decode().split("\n")
    assert len(out) == 4 and out[1] == "" and out[2].startswith("  ") and out[3] == ""
    page = tmp_path / "page.html"
    page.write_text(
        "<!DOCTYPE html><html><head><title>Dogs</title></head><body>\n"
        f"<p class='x'>{sentences[0]} <b>{sentences[1]}</b></p>\n"
        "<pre>keep   this</pre><p>Run <code>nmt translate</code> &amp; see.</p></body></html>\n",
        encoding="utf-8",
    )
    target = tmp_path / "page.fr.html"
    result = nmt("translate", "-m", run, "--format", "html", "-i", page, "-o", target)
    assert result.returncode == 0, result.stderr.decode()
    got = target.read_text(encoding="utf-8")
    for kept in ("<!DOCTYPE html>", "<p class=", "<b>", "</b></p>", "<pre>keep   this</pre>"):
        assert kept in got
    assert "<code>nmt translate</code>" in got and got.endswith("</body></html>\n")
    one_line_error(nmt("translate", "-m", run, "--format", "pdf", input=b"x\n"), "--format")
    one_line_error(nmt("translate", "-m", run, "--protect", "(", input=b"x\n"), "'('")
    one_line_error(
        nmt("translate", "-m", run, "--prefix-tab", "--split-sentences", input=b"x\n"),
        "--split-sentences",
    )
    src, ref = tmp_path / "src.en", tmp_path / "ref.fr"
    src.write_text(" ".join(sentences[:2]) + "\n" + sentences[2] + "\n", encoding="utf-8")
    ref.write_text("Un chien.\nUn chat.\n", encoding="utf-8")
    scored = nmt(
        "eval", "-m", run, "--src", src, "--ref", ref, "--metrics", "bleu", "--split-sentences"
    )
    assert scored.returncode == 0 and scored.stdout.startswith(b"BLEU"), scored.stderr.decode()
    big = tmp_path / "big.html"
    big.write_bytes(b"<p>x</p>" * (3 << 20))
    one_line_error(nmt("translate", "-m", run, "--format", "html", "-i", big), "MiB")
