"""Installed models: `nmt models install|list|remove|index` into NMT_HOME, from a path, a
file:// URL and an index served by a real `python -m http.server` on 127.0.0.1."""

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import multi30k_lines, trained_copy

from nmt_cli.packages.export import ExportOptions, export_package
from nmt_cli.packages.index import install, read_index, write_index
from nmt_cli.packages.store import installed, models_dir, nmt_home, remove
from nmt_cli.runtime.errors import UserError
from nmt_cli.translation.translator import Translator

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def shelf(tiny_run, tmp_path_factory):
    """A folder of packages: tiny 1.0 and 1.1 (the same weights), and other 1.0."""
    run = trained_copy(tiny_run, tmp_path_factory, "stored", max_steps=10, checkpoint_every=10)
    folder = tmp_path_factory.mktemp("shelf")
    for name, version in (("tiny", "1.0"), ("tiny", "1.1"), ("other", "1.0")):
        export_package(run, folder / f"{name}-{version}.nmt", ExportOptions(name, version))
    return folder


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("NMT_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_nmt_home_defaults_to_the_user_data_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("NMT_HOME", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    if sys.platform.startswith("linux"):
        assert nmt_home() == tmp_path / "data" / "nmt"
    monkeypatch.setenv("NMT_HOME", str(tmp_path / "elsewhere"))
    assert models_dir() == tmp_path / "elsewhere" / "models"


def test_install_replaces_an_older_version_in_place_and_refuses_going_back(shelf, home):
    model, replaced = install(str(shelf / "tiny-1.0.nmt"))
    assert (model.name, model.version, replaced) == ("tiny", "1.0", None)
    model, replaced = install((shelf / "tiny-1.1.nmt").as_uri())  # file:// URL
    assert (model.version, replaced) == ("1.1", "1.0")
    assert [(m.name, m.version) for m in installed()] == [("tiny", "1.1")]
    with pytest.raises(UserError, match="tiny 1.1 is installed, newer than 1.0"):
        install(str(shelf / "tiny-1.0.nmt"))
    assert [p.name for p in (home / "models").iterdir()] == ["tiny.nmt"]  # no leftovers
    lines = multi30k_lines("test_2016_flickr", "en", 5)
    by_name = Translator.load("tiny", device="cpu").translate(lines)
    by_path = Translator.load(shelf / "tiny-1.1.nmt", device="cpu").translate(lines)
    assert [t.text for t in by_name] == [t.text for t in by_path]
    remove("tiny")
    assert installed() == []
    with pytest.raises(UserError, match="no installed model 'tiny'"):
        remove("tiny")


def test_a_url_that_is_no_package_is_refused_by_its_url(home, tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a package\n", encoding="utf-8")
    with pytest.raises(UserError) as caught:
        install(text.as_uri())
    assert str(caught.value).startswith(f"{text.as_uri()}: refused: not a model package")
    assert list((home / "models").iterdir()) == []  # the download is gone


@pytest.fixture(scope="module")
def http_index(shelf):
    """``shelf`` indexed and served by `python -m http.server` on 127.0.0.1."""
    write_index(shelf)
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", "0", "--bind", "127.0.0.1"],
        cwd=shelf,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = proc.stdout.readline()  # "Serving HTTP on 127.0.0.1 port N (http://...) ..."
        port = int(line.split(" port ")[1].split()[0])
        url = f"http://127.0.0.1:{port}/index.json"
        for _ in range(50):
            try:
                urllib.request.urlopen(url, timeout=5).close()
                break
            except OSError:
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_index_lists_each_package_with_its_sha256(shelf, http_index):
    entries = read_index(http_index)
    assert sorted((e["name"], e["version"]) for e in entries) == [
        ("other", "1.0"),
        ("tiny", "1.0"),
        ("tiny", "1.1"),
    ]
    first = next(e for e in entries if e["version"] == "1.1")
    assert first["url"] == http_index.replace("index.json", "tiny-1.1.nmt")
    assert first["size"] == (shelf / "tiny-1.1.nmt").stat().st_size
    assert first["languages"] == ["en", "fr"] and first["licences"] == ["not stated"]


def test_install_from_an_index_over_http_takes_the_newest_and_checks_its_sha256(
    shelf, http_index, home, tmp_path
):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NMT_HOME": str(home)}
    nmt = lambda *a: subprocess.run(
        [sys.executable, "-m", "nmt_cli", *a], capture_output=True, text=True, env=env
    )
    done = nmt("models", "install", "tiny", "--index", http_index)
    assert done.returncode == 0, done.stderr
    assert "installed tiny 1.1" in done.stderr
    listed = nmt("models", "list")
    assert listed.stdout.split("\t")[:3] == ["tiny", "1.1", "en-fr"]
    cards = json.loads(nmt("models", "list", "--json").stdout)
    assert cards[0]["card"]["members"]["model.safetensors"]["sha256"]
    # an index whose sha256 is not the package's: refused, nothing installed
    index = json.loads((shelf / "index.json").read_text())
    for entry in index["models"]:
        entry["sha256"] = "0" * 64
        entry["url"] = urllib.request.urljoin(http_index, entry["url"])
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(index))
    done = nmt("models", "install", "other", "--index", str(forged))
    assert done.returncode == 2 and "refused: its sha256 is not the index's" in done.stderr
    assert [m.name for m in installed()] == ["tiny"]
    missing = nmt("models", "install", "nope", "--index", http_index)
    assert missing.returncode == 2 and "no model 'nope' in the index" in missing.stderr
