"""Which of torch's own modules a translating process imports.

`import torch` executes two packages that eager decoding never calls: `torch._meta_registrations`
(the Python kernels of the Meta device, which tracing and torch.compile run shapes through) and
`torch.export` (graph export, and with it torch's primitive ops for tracers). Together they were
about 0.4 s of each `nmt translate` process's 1.2-2 s start-up on a 2-core Zen 3
(docs/lab/beam-step.md). `skip_tracing_modules()` has the import put empty placeholders in their
place. Every CPU and composite kernel of torch's ATen operators is still registered: the
dispatcher's tables differ only in Meta kernels and in the `prims`, `rngprims` and `export`
namespaces (checked by tests/test_torch_import.py), so translations are bit for bit the same.

Only `nmt translate` asks for it, before torch is first imported, and only on the CPU builds of
the torch releases it was checked against: another release may touch these modules while
importing, and no GPU build was checked. Library callers and `nmt serve` import torch whole.
NMT_FULL_TORCH_IMPORT set to anything but empty or 0 turns it off. The finder stays on
sys.meta_path for the rest of the process, so that a late import of either module, or of one of
their submodules, fails with a message that names the switch rather than loading half of it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import re
import sys
import types

# The torch modules left out, and the releases (major.minor) on which translations were checked
# to be identical without them.
TRACING_MODULES = ("torch._meta_registrations", "torch.export")
CHECKED_RELEASES = ("2.13",)
OFF_SWITCH = "NMT_FULL_TORCH_IMPORT"


def _not_loaded(name: str) -> str:
    return f"{name}: nmt translate does not load it (set {OFF_SWITCH}=1 to load torch whole)"


class _Placeholder(types.ModuleType):
    """An empty stand-in that says why, should anything in the process reach for it after all."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(_not_loaded(f"{self.__name__}.{name}"))


class _PlaceholderFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers TRACING_MODULES with empty placeholder packages, and their submodules with an error."""

    def find_spec(self, name, path, target=None):
        if name in TRACING_MODULES:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        if name.startswith(tuple(module + "." for module in TRACING_MODULES)):
            raise ModuleNotFoundError(_not_loaded(name), name=name)
        return None

    def create_module(self, spec):
        return _Placeholder(spec.name)

    def exec_module(self, module) -> None:
        pass  # a placeholder has nothing to run


def installed_cpu_torch_release() -> str | None:
    """The installed torch's major.minor where it is a CPU build, read from torch/version.py
    without importing torch; None where torch is missing or unreadable, or where its version.py
    names a CUDA or ROCm version (a GPU build)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        try:
            with open(os.path.join(folder, "version.py"), encoding="utf-8") as handle:
                text = handle.read()
        except OSError:
            continue
        found = re.search(r"""^__version__\s*(?::[^=]*)?=\s*['"](\d+)\.(\d+)""", text, re.MULTILINE)
        gpu_build = re.search(r"""^(cuda|hip)\s*(?::[^=]*)?=\s*['"]""", text, re.MULTILINE)
        if found and not gpu_build:
            return f"{found.group(1)}.{found.group(2)}"
    return None


def skip_tracing_modules() -> bool:
    """Have the coming `import torch` leave out TRACING_MODULES; True if it will. A no-op once
    torch is imported, on unchecked releases and GPU builds, and with NMT_FULL_TORCH_IMPORT=1."""
    if "torch" in sys.modules or os.environ.get(OFF_SWITCH, "") not in ("", "0"):
        return False
    if installed_cpu_torch_release() not in CHECKED_RELEASES:
        return False
    if not any(isinstance(finder, _PlaceholderFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _PlaceholderFinder())
    return True
