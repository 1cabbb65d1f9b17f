"""Leaving torch's tracing modules out of a translating process: which kernels stay, and when."""

import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from nmt_cli import torch_import
from nmt_cli.torch_import import (
    CHECKED_RELEASES,
    OFF_SWITCH,
    TRACING_MODULES,
    _Placeholder,
    _PlaceholderFinder,
    installed_cpu_torch_release,
    skip_tracing_modules,
)

ROOT = Path(__file__).resolve().parent.parent
KEYS = (
    "CPU",
    "QuantizedCPU",
    "AutogradCPU",
    "CompositeImplicitAutograd",
    "CompositeExplicitAutograd",
    "Autograd",
    "Meta",
)
RELEASE = ".".join(torch.__version__.split(".")[:2])
# what the gate should read here: a GPU build of torch reads as no release, and imports it whole
CPU_RELEASE = (
    RELEASE if torch.version.cuda is None and getattr(torch.version, "hip", None) is None else None
)


def _fresh_process(probe: str, full_import: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != OFF_SWITCH}
    if full_import:
        env[OFF_SWITCH] = "1"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, cwd=ROOT, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr.decode()
    return json.loads(result.stdout.decode().strip().splitlines()[-1])


def test_the_release_is_read_without_importing_torch():
    """The gate costs no torch import: it reads torch/version.py."""
    probe = (
        "import json, sys\nfrom nmt_cli.torch_import import installed_cpu_torch_release\n"
        "print(json.dumps([installed_cpu_torch_release(), 'torch' in sys.modules]))"
    )
    assert _fresh_process(probe, full_import=False) == [CPU_RELEASE, False]


def test_every_aten_kernel_but_the_meta_ones_stays_registered():
    """The dispatcher's tables with the placeholders differ from torch's whole import only in Meta
    kernels and in the prims, rngprims and export namespaces: what eager decoding runs (int8's
    quantized kernels included) is all there."""
    probe = (
        "import json, sys\nfrom nmt_cli.torch_import import skip_tracing_modules, _Placeholder\n"
        "skipped = skip_tracing_modules()\nimport torch\n"
        f"tables = {{k: torch._C._dispatch_get_registrations_for_dispatch_key(k) for k in {KEYS!r}}}\n"
        "print(json.dumps({'skipped': skipped, 'tables': tables, 'placeholders': "
        f"[isinstance(sys.modules[m], _Placeholder) for m in {TRACING_MODULES!r}]}}))"
    )
    lean = _fresh_process(probe, full_import=False)
    whole = _fresh_process(probe, full_import=True)
    assert whole["skipped"] is False and whole["placeholders"] == [False, False]
    if CPU_RELEASE not in CHECKED_RELEASES:
        assert lean["skipped"] is False and lean["tables"] == whole["tables"]
        return
    assert lean["skipped"] is True and lean["placeholders"] == [True, True]
    for key in ("CPU", "QuantizedCPU", "AutogradCPU", "CompositeImplicitAutograd"):
        assert sorted(lean["tables"][key]) == sorted(whole["tables"][key]), key
    for key in ("CompositeExplicitAutograd", "Autograd"):
        lean_ops, whole_ops = set(lean["tables"][key]), set(whole["tables"][key])
        assert lean_ops <= whole_ops, key
        assert {op.split("::")[0] for op in whole_ops - lean_ops} <= {
            "prims",
            "rngprims",
            "export",
        }, key
        assert any(op.startswith("aten::") for op in lean_ops), key
    assert len(lean["tables"]["Meta"]) < len(whole["tables"]["Meta"])


def test_a_placeholder_names_what_is_missing_and_the_switch():
    """Code that reaches for a left-out module after all learns why and how to load it; dunder
    probes (copy, pickle, inspect) get a plain AttributeError."""
    placeholder = _Placeholder("torch.export")
    with pytest.raises(
        AttributeError,
        match=f"torch.export.export: nmt translate does not load it .*{OFF_SWITCH}=1",
    ):
        placeholder.export
    with pytest.raises(AttributeError) as dunder:
        placeholder.__wrapped__
    assert str(dunder.value) == "__wrapped__"


def test_the_finder_answers_its_names_with_placeholders_and_refuses_their_submodules(monkeypatch):
    """The finder's import protocol, on any torch release: a stand-in name instead of torch's."""
    monkeypatch.setattr(torch_import, "TRACING_MODULES", ("nmt_placeholder_probe",))
    monkeypatch.setattr(sys, "meta_path", [_PlaceholderFinder(), *sys.meta_path])
    monkeypatch.delitem(sys.modules, "nmt_placeholder_probe", raising=False)
    import nmt_placeholder_probe

    assert isinstance(nmt_placeholder_probe, _Placeholder)
    assert nmt_placeholder_probe.__path__ == []
    with pytest.raises(ModuleNotFoundError, match=f"nmt_placeholder_probe.graph: .*{OFF_SWITCH}=1"):
        import nmt_placeholder_probe.graph  # noqa: F401
    with pytest.raises(ImportError):  # Python words this one itself ("cannot import name")
        from nmt_placeholder_probe import export  # noqa: F401
    assert _PlaceholderFinder().find_spec("torch.nn", None) is None


@pytest.mark.parametrize(
    "text, release",
    [
        (
            "__version__ = '2.13.0+cpu'\ncuda: Optional[str] = None\nhip: Optional[str] = None\n",
            "2.13",
        ),
        ("__version__: str = '2.14.1'\ncuda = None\n", "2.14"),
        ("__version__ = '2.13.0'\ncuda: Optional[str] = '12.8'\n", None),
        ("__version__ = '2.13.0+rocm6.3'\nhip: Optional[str] = '6.3.1'\n", None),
        ("git_version = 'abc'\n", None),
    ],
)
def test_the_release_and_build_are_read_from_version_py(tmp_path, monkeypatch, text, release):
    """GPU builds were not checked, so they read as no release at all and import torch whole."""
    (tmp_path / "version.py").write_text(text, encoding="utf-8")
    spec = importlib.machinery.ModuleSpec("torch", None, is_package=True)
    spec.submodule_search_locations = [str(tmp_path)]
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: spec)
    assert installed_cpu_torch_release() == release


@pytest.fixture
def torch_not_yet_imported(monkeypatch):
    """skip_tracing_modules() as a fresh process meets it; sys.meta_path is restored afterwards."""
    monkeypatch.delitem(sys.modules, "torch")
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    monkeypatch.delenv(OFF_SWITCH, raising=False)


def _finders() -> int:
    return sum(isinstance(finder, _PlaceholderFinder) for finder in sys.meta_path)


@pytest.mark.skipif(CPU_RELEASE is None, reason="a GPU build of torch is imported whole")
def test_it_installs_one_finder_on_a_checked_release(torch_not_yet_imported, monkeypatch):
    """Asking twice (two commands in one process) leaves one finder."""
    monkeypatch.setattr(torch_import, "CHECKED_RELEASES", (CPU_RELEASE,))
    assert skip_tracing_modules() is True
    assert skip_tracing_modules() is True
    assert _finders() == 1


@pytest.mark.parametrize("case", ["unchecked release", "switched off", "torch already imported"])
def test_it_leaves_the_import_alone(torch_not_yet_imported, monkeypatch, case):
    """Unchecked releases, the switch, and a torch already imported all mean torch whole."""
    checked = ("0.1",) if case == "unchecked release" else (CPU_RELEASE,)
    monkeypatch.setattr(torch_import, "CHECKED_RELEASES", checked)
    if case == "switched off":
        monkeypatch.setenv(OFF_SWITCH, "1")
    elif case == "torch already imported":
        monkeypatch.setitem(sys.modules, "torch", torch)
    assert skip_tracing_modules() is False
    assert _finders() == 0
