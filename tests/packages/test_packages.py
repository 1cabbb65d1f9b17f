"""Model packages: exported from a tiny trained run, they translate exactly as the run dir does,
carry their card, and are refused in one line when altered, truncated, oversized or not what they
say; nothing in them is unpickled."""

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from conftest import multi30k_lines, tiny_recipe_dict, trained_copy

from nmt_cli.config.recipes import recipe_from_dict
from nmt_cli.packages import archive
from nmt_cli.packages.archive import read_package
from nmt_cli.packages.card import corpora_of
from nmt_cli.packages.export import ExportOptions, export_package
from nmt_cli.packages.loading import load_package
from nmt_cli.packages.scores_record import record_model_scores, scores_of
from nmt_cli.packages.weights import read_weights, weights_bytes
from nmt_cli.runtime.errors import UserError
from nmt_cli.training.checkpoint import resolve
from nmt_cli.translation.translator import Translator

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run_dir(tiny_run, tmp_path_factory):
    return trained_copy(tiny_run, tmp_path_factory, "packaged", max_steps=30, checkpoint_every=30)


@pytest.fixture(scope="module")
def package(run_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("pkg") / "tiny.nmt"
    return export_package(run_dir, out, ExportOptions(version="1.2"))


def nmt(*args: str, stdin: str | None = None, env: dict | None = None):
    full = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "nmt_cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=full,
        cwd=ROOT,
    )


def test_a_package_translates_as_its_run_dir(run_dir, package):
    lines = multi30k_lines("test_2016_flickr", "en", 40)
    from_run = Translator.load(run_dir, device="cpu").translate(lines, nbest=2)
    from_package = Translator.load(package, device="cpu").translate(lines, nbest=2)
    assert [t.text for t in from_package] == [t.text for t in from_run]
    assert [[a.score for a in t.alternatives] for t in from_package] == [
        [a.score for a in t.alternatives] for t in from_run
    ]


def test_nmt_translate_writes_the_same_bytes_from_a_package(run_dir, package, tmp_path):
    text = "\n".join(multi30k_lines("test_2016_flickr", "en", 30)) + "\n"
    runs = [
        nmt("translate", "-m", str(m), "--threads", "1", stdin=text) for m in (run_dir, package)
    ]
    assert [r.returncode for r in runs] == [0, 0], runs[1].stderr
    assert runs[0].stdout == runs[1].stdout and runs[0].stdout.count("\n") == 30


def test_eval_and_score_take_a_package_as_they_take_its_run_dir(run_dir, package, tmp_path):
    src, ref = tmp_path / "src.en", tmp_path / "ref.fr"
    src.write_text("\n".join(multi30k_lines("test_2016_flickr", "en", 15)) + "\n")
    ref.write_text("\n".join(multi30k_lines("test_2016_flickr", "fr", 15)) + "\n")
    both = ("-m", str(run_dir), "-m", str(package), "--src", str(src), "--ref", str(ref))
    done = nmt("eval", *both, "--json", "--threads", "1")
    assert done.returncode == 0, done.stderr
    first, second = json.loads(done.stdout).values()
    assert first["scores"] == second["scores"]
    scores = [nmt("score", "-m", str(m), "--src", str(src), "--tgt", str(ref)) for m in both[1:4:2]]
    assert scores[0].returncode == 0 and scores[0].stdout == scores[1].stdout
    assert len(scores[0].stdout.split()) == 15


def test_the_card_says_what_the_model_is(run_dir, package):
    files = read_package(package)
    card = files.card
    model = load_package(package).model
    assert card["name"] == "tiny" and card["version"] == "1.2"
    assert card["directions"] == ["en-fr"] and card["languages"] == ["en", "fr"]
    assert card["parameters"] == sum(p.numel() for p in model.parameters())
    assert card["training"]["checkpoint"] == resolve(run_dir).name
    assert card["corpora"][0]["licence"] == "not stated"
    assert set(card["members"]) == set(files.members)
    readable = files.members["CARD.md"].decode()
    assert "# tiny 1.2" in readable and card["members"]["model.safetensors"]["sha256"] in readable


def test_corpora_come_with_the_registry_s_or_the_recipe_s_licence():
    registered = recipe_from_dict({"data": {"corpus": "multi30k"}})
    (entry,) = corpora_of(registered)
    assert entry["name"] == "multi30k" and "github.com/multi30k" in entry["source"]
    local = recipe_from_dict(
        tiny_recipe_dict(
            {"train": "/data/x.{lang}", "licence": {"/data/x.{lang}": "CC-BY-4.0 (example.org)"}}
        )
    )
    assert corpora_of(local) == [
        {"name": "/data/x.{lang}", "source": "/data/x.{lang}", "licence": "CC-BY-4.0 (example.org)"}
    ]


def test_recorded_scores_travel_with_their_checkpoint_only(run_dir, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    src = tmp_path / "src.en"
    ref = tmp_path / "ref.fr"
    src.write_text("\n".join(multi30k_lines("test_2016_flickr", "en", 20)) + "\n")
    ref.write_text("\n".join(multi30k_lines("test_2016_flickr", "fr", 20)) + "\n")
    args = ("-m", str(run), "--src", str(src), "--ref", str(ref), "--metrics", "bleu,chrf")
    done = nmt("eval", *args, "--record", "flickr2016", "--threads", "1")
    assert done.returncode == 0, done.stderr
    recorded = json.loads((run / "scores.json").read_text())["scores"]
    assert [(r["test_set"], r["metric"]) for r in recorded] == [
        ("flickr2016", "bleu"),
        ("flickr2016", "chrf"),
    ]
    assert recorded[0]["signature"].startswith("nrefs:1|") and recorded[0]["direction"] == "en-fr"
    files = read_package(export_package(run, tmp_path / "m.nmt", ExportOptions()))
    card = files.card
    assert [s["metric"] for s in card["test_scores"]] == ["bleu", "chrf"]
    signature = recorded[0]["signature"].replace("|", "\\|")  # a Markdown table cell's
    assert f"| flickr2016 | en-fr | bleu | {recorded[0]['score']:.2f} | `{signature}` |" in (
        files.members["CARD.md"].decode()
    )
    assert card["test_scores"][0]["score"] == recorded[0]["score"]
    # the same test set recorded again replaces its scores; another checkpoint's are not taken
    record_model_scores(str(run), "flickr2016", "en-fr", [{**recorded[0], "score": 1.0}])
    again = json.loads((run / "scores.json").read_text())["scores"]
    assert sorted((r["metric"], r["score"]) for r in again) == [
        ("bleu", 1.0),
        ("chrf", recorded[1]["score"]),
    ]
    assert scores_of(run, "0" * 64) == []


def test_int8_packs_a_quarter_of_the_weights_and_still_translates(run_dir, package, tmp_path):
    small = export_package(run_dir, tmp_path / "q.nmt", ExportOptions(quantize="int8"))
    weights = lambda p: read_package(p).card["weights_bytes"]
    assert weights(small) < 0.6 * weights(package)
    assert read_package(small).card["quantized"] == "int8"
    full, rounded = load_package(package).model, load_package(small).model
    for (name, a), (_, b) in zip(full.state_dict().items(), rounded.state_dict().items()):
        if a.is_floating_point() and a.dim() >= 2 and a.numel() >= 1024:
            step = a.abs().amax(dim=1, keepdim=True) / 127
            assert torch.all((a - b).abs() <= step / 2 + 1e-7), name
    lines = multi30k_lines("test_2016_flickr", "en", 10)
    assert all(t.text for t in Translator.load(small, device="cpu").translate(lines))


def test_tied_weights_are_stored_once_and_read_back_tied():
    shared = torch.randn(50, 8)
    data = weights_bytes({"embed.weight": shared, "out.weight": shared, "b": torch.zeros(3)})
    model = read_weights(data, "x")["model"]
    assert model["out.weight"] is model["embed.weight"] and torch.equal(model["out.weight"], shared)
    assert len(data) < 50 * 8 * 4 * 2


@pytest.mark.parametrize("quantize", ["none", "int8"])
def test_tied_weights_held_as_equal_copies_are_stored_once(quantize):
    """An averaged or moving-average checkpoint holds tied weights as separate, equal tensors:
    they are still stored once (and a merely similar tensor is not taken for them)."""
    shared = torch.randn(200, 8)
    near = shared.clone()
    near[0, 0] += 1.0
    state = {"embed.weight": shared, "out.weight": shared.clone(), "other.weight": near}
    data = weights_bytes(state, quantize=quantize)
    model = read_weights(data, "x")["model"]
    assert model["out.weight"] is model["embed.weight"]
    assert model["other.weight"] is not model["embed.weight"]
    width = 4 if quantize == "none" else 1
    assert len(data) < 200 * 8 * width * 2 + 4096


def _rewrite(src: Path, dst: Path, change) -> Path:
    """A copy of the package ``src`` with each member's bytes passed through ``change``."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = change(info.filename, zin.read(info))
            if data is not None:
                zout.writestr(info.filename, data)
    return dst


def _flip(name, data):
    if name != "model.safetensors":
        return data
    return data[:-10] + bytes([data[-10] ^ 1]) + data[-9:]


def test_an_altered_package_is_refused_in_one_line(package, tmp_path):
    altered = _rewrite(package, tmp_path / "altered.nmt", _flip)
    done = nmt("translate", "-m", str(altered), stdin="A dog.\n")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert "refused: model.safetensors does not match its sha256" in done.stderr


@pytest.mark.parametrize(
    "make, why",
    [
        (lambda p, d: d.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]), "truncated"),
        (lambda p, d: _rewrite(p, d, lambda n, b: b if n != "CARD.md" else None), "disagree"),
        (
            lambda p, d: (_rewrite(p, d, lambda n, b: b), _append(d, "run.py", b"import os")),
            "unexpected member 'run.py'",
        ),
        (lambda p, d: d.write_bytes(b"\x80\x04K\x01."), "not a model package"),
        (lambda p, d: _rewrite(p, d, _card_with(directions=None)), "directions is not a list"),
        (lambda p, d: _rewrite(p, d, _card_with(name=["x"])), "name is not a string"),
    ],
)
def test_a_package_that_is_not_what_it_says_is_refused(package, tmp_path, make, why):
    bad = tmp_path / "bad.nmt"
    make(package, bad)
    with pytest.raises(UserError, match=why):
        load_package(bad)


def _card_with(**fields):
    """A member change that sets ``fields`` on card.json (which lists the others' hashes)."""

    def change(name, data):
        if name != "card.json":
            return data
        return json.dumps({**json.loads(data), **fields}).encode()

    return change


def test_export_names_what_it_cannot_write_or_read(run_dir, package, tmp_path):
    folder = tmp_path / "folder.nmt"
    folder.mkdir()
    with pytest.raises(UserError, match="folder.nmt: is a folder"):
        export_package(run_dir, folder, ExportOptions())
    with pytest.raises(UserError, match="is a package already"):
        export_package(package, tmp_path / "again.nmt", ExportOptions())


def _append(path: Path, name: str, data: bytes) -> None:
    with zipfile.ZipFile(path, "a") as z:
        z.writestr(name, data)


def test_an_oversized_package_or_member_is_refused(package, monkeypatch):
    monkeypatch.setitem(archive.MEMBER_LIMITS, "spm.model", 1000)
    with pytest.raises(UserError, match="spm.model is .* bytes, more than 1000"):
        read_package(package)
    monkeypatch.setattr(archive, "MAX_PACKAGE_BYTES", 1000)
    with pytest.raises(UserError, match="more than a package may hold"):
        read_package(package)


def test_weights_that_are_a_pickle_are_refused_without_unpickling(package, tmp_path):
    """A torch checkpoint (a pickle) in the weights' place is never handed to pickle: the
    safetensors reader refuses it, and then the sha256 on a card that lists it must match."""
    import io

    buffer = io.BytesIO()
    torch.save({"model": {}}, buffer)
    pickled = buffer.getvalue()
    with pytest.raises(UserError, match="unreadable weights"):
        read_weights(pickled, "bad")
    # a card forged to list the pickle still reaches only the safetensors reader
    card = read_package(package).card
    card["members"]["model.safetensors"] = archive.member_entries({"x": pickled})["x"]

    def forge(name, data):
        if name == "card.json":
            return json.dumps(card).encode()
        return pickled if name == "model.safetensors" else data

    forged = _rewrite(package, tmp_path / "forged.nmt", forge)
    with pytest.raises(UserError, match="unreadable weights"):
        load_package(forged)
