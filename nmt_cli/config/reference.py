"""The reference of every recipe key, generated from the typed config so the two cannot drift.

Each key's type, default, allowed values and meaning come from the dataclasses of
``nmt_cli/config/sections.py`` (the ``help`` of each ``_opt``), and whether it may change on resume
from ``may_change_on_resume``. Regenerate the committed page with::

    python -m nmt_cli.config.reference > docs/recipe-keys.md

``tests/config/test_config_doc.py`` fails when the committed page differs from what this prints.
"""

from __future__ import annotations

import dataclasses
import sys
import typing

import yaml

from nmt_cli.config.sections import Recipe, may_change_on_resume

REGENERATE = "python -m nmt_cli.config.reference > docs/recipe-keys.md"

# What each section of a recipe is for; a section added to Recipe without a line here fails the
# test.
SECTION_PURPOSE = {
    "": "The run's name and its language pair.",
    "data": "Which corpus or local files to read, and which pairs to keep.",
    "tokenizer": "How SentencePiece cuts words into subwords.",
    "model": "The encoder, bridge, attention and decoder.",
    "train": "Batches, optimiser, schedule, validation, checkpoints, stopping, precision.",
    "decode": "Search and output length; also the defaults of `nmt translate` and `nmt eval -m`.",
}


def _default(f: dataclasses.Field) -> str:
    value = f.default_factory() if f.default is dataclasses.MISSING else f.default
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def _allowed(meta: typing.Mapping) -> str:
    parts = []
    if meta.get("choices"):
        parts.append(" \\| ".join(meta["choices"]))
    if meta.get("lo") is not None:
        parts.append(f"{'>' if meta.get('lo_open') else '>='} {meta['lo']:g}")
    if meta.get("hi") is not None:
        parts.append(f"<= {meta['hi']:g}")
    return ", ".join(parts)


def _type(f: dataclasses.Field) -> str:
    return str(f.type).replace(" | None", " or null")


def key_rows(cls: type = Recipe, prefix: str = "") -> list[tuple[str, dataclasses.Field]]:
    """(dotted key, field) for every leaf key of a recipe section, in declaration order."""
    hints = typing.get_type_hints(cls)
    rows = []
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            rows.extend(key_rows(hints[f.name], f"{prefix}{f.name}."))
        else:
            rows.append((f"{prefix}{f.name}", f))
    return rows


def sections() -> list[str]:
    """The recipe's sections in file order, "" being the top-level keys."""
    hints = typing.get_type_hints(Recipe)
    return [""] + [
        f.name for f in dataclasses.fields(Recipe) if dataclasses.is_dataclass(hints[f.name])
    ]


def _table(keys: list[tuple[str, dataclasses.Field]]) -> list[str]:
    lines = [
        "| key | type | default | allowed | on resume | meaning |",
        "|---|---|---|---|---|---|",
    ]
    for key, f in keys:
        help_text = f.metadata.get("help", "").replace("|", "\\|")
        resume = "may change" if may_change_on_resume(key) else "fixed"
        lines.append(
            f"| `{key}` | {_type(f)} | `{_default(f)}` | {_allowed(f.metadata)} | {resume} "
            f"| {help_text} |"
        )
    return lines


def render() -> str:
    """The whole Markdown page of recipe keys."""
    rows = key_rows()
    out = [
        "# Recipe keys",
        "",
        f"Generated from the help strings of `nmt_cli/config/sections.py` by `{REGENERATE}`;",
        "edit those and regenerate rather than editing this page "
        "(`tests/config/test_config_doc.py` checks it).",
        "How recipes are written, `base:` and `--set`: [recipes.md](recipes.md).",
        "",
        'A key left out takes its default. "on resume": whether the key may differ when '
        "`nmt train`",
        "resumes a run from its checkpoint (a fixed key that changed is refused; "
        "`--restart` starts over).",
    ]
    for section in sections():
        keys = [(k, f) for k, f in rows if (k.rsplit(".", 1)[0] if "." in k else "") == section]
        out += ["", f"## {section or 'Top level'}", "", SECTION_PURPOSE[section], ""]
        out += _table(keys)
    return "\n".join(out) + "\n"


def main() -> None:
    sys.stdout.buffer.write(render().encode("utf-8"))


if __name__ == "__main__":
    main()
