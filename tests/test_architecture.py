"""The architecture as checks: the layer order of nmt_cli's folders (pyproject.toml's
[tool.importlinter] contracts, run by import-linter) and the size of its functions."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "nmt_cli"
MAX_LINES = 120
MAX_PARAMETERS = 12

# Functions over the limits in modules being rewritten; temporary, each leaves this list with its
# rewrite. "path:qualified name".
OVER_THE_LIMITS: set[str] = set()


def test_the_import_contracts_hold():
    """Each folder imports only the folders below it, no modules of a folder import each other
    in a cycle, only serving speaks HTTP, and the text side never imports torch."""
    pytest.importorskip("importlinter", reason="import-linter is not installed (the dev extra)")
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    command = [lint] if lint else [sys.executable, "-m", "importlinter.cli"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [*command, "--config", str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def _is_typer_command(node: ast.FunctionDef | ast.AsyncFunctionDef, path: Path) -> bool:
    """A command declaration in nmt_cli/cli: decorated ``@<app>.command(...)``, or taking typer's
    ``Annotated`` options (its length is its options' declarations)."""
    if path.parent.name != "cli":
        return False
    for decorator in node.decorator_list:
        call = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(call, ast.Attribute) and call.attr == "command":
            return True
    arguments = node.args.args + node.args.kwonlyargs
    return any("Annotated" in ast.unparse(a.annotation) for a in arguments if a.annotation)


def _functions(tree: ast.AST, prefix: str = ""):
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
            yield from _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    args = node.args
    named = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    if named and named[0] in ("self", "cls"):
        named = named[1:]
    return len(named) + (args.vararg is not None) + (args.kwarg is not None)


def oversized_functions() -> dict[str, str]:
    """Every function of nmt_cli over MAX_LINES lines or MAX_PARAMETERS parameters (typer
    command declarations excepted): "path:name" -> what is over."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name, node in _functions(tree):
            if _is_typer_command(node, path):
                continue
            lines = node.end_lineno - node.lineno + 1
            parameters = _parameters(node)
            over = []
            if lines > MAX_LINES:
                over.append(f"{lines} lines")
            if parameters > MAX_PARAMETERS:
                over.append(f"{parameters} parameters")
            if over:
                found[f"{path.relative_to(ROOT).as_posix()}:{name}"] = ", ".join(over)
    return found


def test_no_function_is_over_120_lines_or_12_parameters():
    found = oversized_functions()
    new = {k: v for k, v in found.items() if k not in OVER_THE_LIMITS}
    assert not new, "\n".join(f"{k}: {v}" for k, v in new.items())
    gone = OVER_THE_LIMITS - set(found)
    assert not gone, f"within the limits now, strike from OVER_THE_LIMITS: {sorted(gone)}"


def test_the_size_check_sees_long_functions_and_many_parameters(tmp_path):
    """The walk finds methods and nested functions, counts parameters without self, and
    excepts cli commands only."""
    body = "\n".join(f"        x{i} = {i}" for i in range(MAX_LINES))
    source = (
        "class A:\n    def many(self, a, b, c, d, e, f, g, h, i, j, k, l, *rest):\n        pass\n"
        f"def outer():\n    def long():\n{body}\n"
    )
    tree = ast.parse(source)
    sizes = {
        name: (node.end_lineno - node.lineno + 1, _parameters(node))
        for name, node in _functions(tree)
    }
    assert sizes["A.many"] == (2, 13)
    assert sizes["outer.long"][0] > MAX_LINES
    command = ast.parse("@app.command()\ndef serve(a, b):\n    pass\n").body[0]
    assert _is_typer_command(command, PACKAGE / "cli" / "serving.py")
    assert not _is_typer_command(command, PACKAGE / "serving" / "app.py")
