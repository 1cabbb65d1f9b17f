"""`nmt serve` over the installed models in bounded memory: each loaded on its first request,
the least recently used unloaded past --max-loaded, translations as from the package itself."""

import json
import os
import signal
import subprocess
import sys
import threading
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("fastapi")

from conftest import multi30k_lines, trained_copy  # noqa: E402

from nmt_cli.packages.export import ExportOptions, export_package  # noqa: E402
from nmt_cli.packages.store import install_file  # noqa: E402
from nmt_cli.serving.model_pool import ModelPool, translator_loader  # noqa: E402
from nmt_cli.serving.models import pooled_models, serving_models  # noqa: E402
from nmt_cli.translation.translator import Translator  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def packages(tiny_run, tmp_path_factory):
    run = trained_copy(tiny_run, tmp_path_factory, "pooled", max_steps=20, checkpoint_every=20)
    folder = tmp_path_factory.mktemp("pool")
    return [export_package(run, folder / f"{n}.nmt", ExportOptions(n)) for n in ("a", "b", "c")]


@pytest.fixture
def home(packages, tmp_path, monkeypatch):
    monkeypatch.setenv("NMT_HOME", str(tmp_path / "home"))
    for path in packages:
        install_file(path)
    return tmp_path / "home"


def test_installed_models_load_on_first_use_and_the_least_recent_unloads(home, packages):
    models, pool = serving_models([], 2, device="cpu")
    assert [m.id for m in models] == ["a", "b", "c"]
    assert [m.describe()["loaded"] for m in models] == [False, False, False]
    assert models[0].describe()["card"]["name"] == "a"
    lines = multi30k_lines("test_2016_flickr", "en", 8)
    direct = [t.text for t in Translator.load(packages[0], device="cpu").translate(lines)]
    for m in (models[0], models[1], models[0], models[2]):
        assert [t.text for t in m.translator.translate(lines)] == direct
    state = pool.snapshot()
    assert {n: s["loaded"] for n, s in state.items()} == {"a": True, "b": False, "c": True}
    assert {n: (s["loads"], s["unloads"]) for n, s in state.items()} == {
        "a": (1, 0),
        "b": (1, 1),
        "c": (1, 0),
    }
    assert state["a"]["resident_bytes"] > 0 and state["b"]["resident_bytes"] == 0


def test_requests_waiting_for_one_model_share_its_single_load(packages):
    calls = []
    load = translator_loader("cpu")
    pool = ModelPool(1, lambda *a: calls.append(a[0]) or load(*a))
    (model,) = pooled_models([packages[1]], pool)
    lines = multi30k_lines("test_2016_flickr", "en", 3)
    with ThreadPoolExecutor(4) as threads:
        done = list(threads.map(lambda _: model.translator.translate(lines), range(4)))
    assert calls == ["b"] and len({tuple(t.text for t in d) for d in done}) == 1


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=120) as response:
        return response.read()


def test_serve_without_m_serves_every_installed_model_within_max_loaded(home):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NMT_HOME": str(home), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "nmt_cli", "serve", "--port", "0", "--max-loaded", "1"]
    proc = subprocess.Popen(
        [*command, "--metrics", "--device", "cpu"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env=env,
        text=True,
    )
    try:
        line = proc.stderr.readline()
        assert "http://" in line, line + proc.stderr.read()
        threading.Thread(target=proc.stderr.read, daemon=True).start()
        url = line[line.index("http://") :].split()[0].rstrip("/")
        listed = json.loads(_get(url + "/v1/models"))["models"]
        assert [(m["id"], m["loaded"], m["card"]["version"]) for m in listed] == [
            ("a", False, "1.0"),
            ("b", False, "1.0"),
            ("c", False, "1.0"),
        ]
        for name in ("a", "b"):
            body = json.dumps({"src": ["A dog runs."], "model": name}).encode()
            request = urllib.request.Request(
                url + "/v1/translate", body, {"Content-Type": "application/json"}
            )
            answer = json.loads(urllib.request.urlopen(request, timeout=120).read())
            assert answer["model"] == name and answer["translations"][0]["text"]
        listed = json.loads(_get(url + "/v1/models"))["models"]
        assert [m["loaded"] for m in listed] == [False, True, False]
        metrics = _get(url + "/metrics").decode()
        assert 'nmt_model_loads_total{model="a"} 1.0' in metrics
        assert 'nmt_model_unloads_total{model="a"} 1.0' in metrics
        assert 'nmt_model_loaded{model="b"} 1.0' in metrics
        resident = [x for x in metrics.splitlines() if x.startswith("nmt_model_resident_bytes")]
        assert any('model="b"' in x and float(x.split()[-1]) > 0 for x in resident)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
