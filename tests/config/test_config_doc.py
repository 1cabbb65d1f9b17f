import dataclasses
import subprocess
import sys
from pathlib import Path

from nmt_cli.config.recipes import recipe_from_dict
from nmt_cli.config.reference import REGENERATE, SECTION_PURPOSE, key_rows, render, sections
from nmt_cli.config.sections import RESUMABLE_KEYS, Recipe

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "recipe-keys.md"


def test_committed_page_is_what_the_code_generates():
    assert PAGE.read_text(encoding="utf-8") == render(), (
        f"docs/recipe-keys.md is stale; run: {REGENERATE}"
    )


def test_the_module_prints_the_page_as_utf8():
    out = subprocess.run(
        [sys.executable, "-m", "nmt_cli.config.reference"],
        cwd=ROOT,
        capture_output=True,
        check=True,
        env={"PYTHONPATH": str(ROOT), "LC_ALL": "C"},
    ).stdout
    assert out.decode("utf-8") == render()


def test_every_leaf_key_has_one_row_and_a_help_string():
    flat = {}

    def walk(d, prefix=""):
        for k, v in d.items():
            # Sections are the top level's mappings; a mapping-valued key (data.pairs) is a leaf.
            section = isinstance(v, dict) and not prefix
            walk(v, f"{prefix}{k}.") if section else flat.setdefault(f"{prefix}{k}", v)

    walk(recipe_from_dict({}).to_dict())
    keys = [k for k, _ in key_rows()]
    assert sorted(keys) == sorted(flat) and len(keys) == len(set(keys))
    page = render()
    for key, f in key_rows():
        assert f.metadata.get("help"), f"{key} has no help string in nmt_cli/config/sections.py"
        assert page.count(f"| `{key}` |") == 1


def test_rows_carry_choices_ranges_defaults_and_resume_policy():
    lines = {line.split(" | ")[0]: line for line in render().splitlines() if line.startswith("| `")}
    assert "gru \\| lstm \\| rnn" in lines["| `model.rnn`"]
    assert "`512`" in lines["| `model.hidden_dim`"] and ">= 2" in lines["| `model.hidden_dim`"]
    assert ">= 1, <= 8" in lines["| `model.layers`"]
    assert "> 0" in lines["| `train.lr`"] and "| may change |" in lines["| `train.lr`"]
    assert "| fixed |" in lines["| `model.hidden_dim`"]
    for key in RESUMABLE_KEYS:
        assert "| may change |" in lines[f"| `{key}`"]


def test_every_section_is_described_in_recipe_order():
    assert sections() == [""] + [
        f.name for f in dataclasses.fields(Recipe) if f.name not in ("name", "src", "tgt")
    ]
    assert set(SECTION_PURPOSE) == set(sections())
    page = render()
    positions = [page.index(f"\n## {s or 'Top level'}\n") for s in sections()]
    assert positions == sorted(positions)
