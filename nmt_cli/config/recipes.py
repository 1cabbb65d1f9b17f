"""Recipes: YAML -> the typed, validated dataclasses of nmt_cli/config/sections.py.

A recipe is read with ``yaml.safe_load``; a top-level ``base: other.yaml`` (relative to the
recipe's folder) first reads that recipe and lays this one over it, section by section, so a
variant states only what it changes. ``--set key.path=value`` overrides are applied to the merged
tree, and the result is checked field by field against the sections' dataclasses. Every problem
ends in one :class:`ConfigError` line naming the file and the dotted key. A run dir stores the
merged recipe, so it never depends on the base file staying the same.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import typing
from pathlib import Path
from typing import Any

from nmt_cli.config.direction_keys import check_denoise, check_directions
from nmt_cli.config.sections import Recipe, may_change_on_resume
from nmt_cli.config.values import check_value
from nmt_cli.runtime.errors import ConfigError
from nmt_cli.runtime.output_file import write_text_atomic


def _origin_of(key: str, origin: str, set_by: dict[str, str]) -> str:
    """Who gave ``key`` its value: the --set that named it (or a key below it), else the file."""
    for named, item in set_by.items():
        if named == key or named.startswith(key + "."):
            return f"--set {item}"
    return origin


def _build(
    cls: type, raw: Any, prefix: str, origin: str, set_by: dict[str, str] | None = None
) -> Any:
    set_by = set_by or {}
    where_self = prefix.rstrip(".") or "recipe"
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(
            f"{_origin_of(where_self, origin, set_by)}: {where_self}: expected a mapping "
            f"of keys, got {raw!r}"
        )
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key in raw:
        if key not in fields:
            hint = difflib.get_close_matches(str(key), list(fields), n=1, cutoff=0.6)
            extra = f" (did you mean '{prefix}{hint[0]}'?)" if hint else ""
            raise ConfigError(
                f"{_origin_of(f'{prefix}{key}', origin, set_by)}: {prefix}{key}: unknown key{extra}"
            )
    kwargs = {}
    for name, f in fields.items():
        where = f"{_origin_of(f'{prefix}{name}', origin, set_by)}: {prefix}{name}"
        tp = hints[name]
        if dataclasses.is_dataclass(tp):
            kwargs[name] = _build(tp, raw.get(name), f"{prefix}{name}.", origin, set_by)
            continue
        if name not in raw:
            continue
        kwargs[name] = check_value(raw[name], tp, f.metadata, where)
    return cls(**kwargs)


def _check_consistency(recipe: Recipe, origin: str) -> None:
    m = recipe.model
    if m.bidirectional and m.hidden_dim % 2:
        raise ConfigError(
            f"{origin}: model.hidden_dim: {m.hidden_dim} must be even with a "
            "bidirectional encoder (hidden_dim/2 per direction)"
        )
    if m.share_embeddings and not recipe.tokenizer.joint:
        raise ConfigError(
            f"{origin}: model.share_embeddings: needs tokenizer.joint: true "
            "(one vocabulary for both sides)"
        )
    if m.attention == "dot" and m.attention_heads != 1:
        raise ConfigError(
            f"{origin}: model.attention_heads: dot attention has no parameters, so "
            "its heads would be identical; use general, concat or cosine for several heads"
        )
    if m.initial_state_attention and (m.attention == "none" or m.decoder == "bahdanau"):
        why = (
            "there is no attention"
            if m.attention == "none"
            else "the bahdanau order already attends from s_{i-1}, so from s_0 before the "
            "first step"
        )
        raise ConfigError(
            f"{origin}: model.initial_state_attention: {why}; use it with the luong or "
            "conditional order and an attention score"
        )
    if (
        m.encoder_layers is not None
        and m.decoder_layers is not None
        and m.layers != 1
        and m.layers not in (m.encoder_layers, m.decoder_layers)
    ):
        raise ConfigError(
            f"{origin}: model.layers: {m.layers} is the depth of neither side, as "
            f"model.encoder_layers ({m.encoder_layers}) and model.decoder_layers "
            f"({m.decoder_layers}) set both; leave model.layers out"
        )
    for key, on in (("residual", m.residual), ("layer_norm", m.layer_norm)):
        if on and m.encoder_depth == 1 and m.decoder_depth == 1:
            raise ConfigError(
                f"{origin}: model.{key}: acts between stacked layers (l >= 2) and both sides "
                "have one layer; set model.encoder_layers or model.decoder_layers above 1"
            )
    if recipe.train.schedule == "cosine" and not (
        recipe.train.max_steps or recipe.train.max_minutes
    ):
        raise ConfigError(
            f"{origin}: train.schedule: cosine decays over train.max_steps or "
            "train.max_minutes, and neither is set; set one"
        )
    if recipe.src == recipe.tgt:
        raise ConfigError(f"{origin}: tgt: source and target language are both '{recipe.src}'")
    check_directions(recipe, origin)
    check_denoise(recipe, origin)
    _check_teacher(recipe, origin)


def _check_teacher(recipe: Recipe, origin: str) -> None:
    """data.teacher distils one pair's plain training corpora (the run itself is checked when
    nmt preprocess loads it: nmt_cli/translation/distillation.py)."""
    data = recipe.data
    if not data.teacher:
        if data.teacher_keep_references:
            raise ConfigError(
                f"{origin}: data.teacher_keep_references: needs data.teacher (the run whose "
                "translations the references are kept beside); set it false to train on the "
                "references alone"
            )
        return
    if any(not run.strip() for run in data.teacher):
        raise ConfigError(f"{origin}: data.teacher: an empty name; give a run dir or checkpoint")
    for key, value in (
        ("directions", data.directions),
        ("back_translated", data.back_translated),
        ("denoise", data.denoise),
    ):
        if value:
            raise ConfigError(
                f"{origin}: data.teacher: distils one language pair's plain corpora; leave "
                f"data.{key} out"
            )


def parse_value(text: str) -> Any:
    """A --set value is YAML, so `128`, `true`, `null` and `[a, b]` mean what they look like."""
    import yaml  # here, not at the top: loading a model reads its recipe from the checkpoint

    try:
        return yaml.safe_load(text) if text != "" else ""
    except yaml.YAMLError:
        return text


def apply_overrides(raw: dict, overrides: list[str], origin: str) -> dict:
    """Apply ``key.path=value`` overrides in place onto the parsed recipe tree."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--set {item}: expected KEY=VALUE, e.g. model.hidden_dim=128")
        key, text = item.split("=", 1)
        key = key.strip()
        parts = key.split(".")
        if not key or any(not p for p in parts):
            raise ConfigError(f"--set {item}: empty key")
        node = raw
        for part in parts[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise ConfigError(f"--set {item}: {part} is not a section")
            node = child
        node[parts[-1]] = parse_value(text)
    return raw


def recipe_from_dict(
    raw: Any, origin: str = "recipe", overrides: list[str] | None = None
) -> Recipe:
    if raw is None:
        raise ConfigError(f"{origin}: the recipe is empty")
    if not isinstance(raw, dict):
        raise ConfigError(f"{origin}: a recipe must be a mapping of keys, got {type(raw).__name__}")
    raw = apply_overrides(dict(raw), overrides or [], origin)
    set_by = {
        item.split("=", 1)[0].strip(): item for item in overrides or []
    }  # the last --set wins
    recipe = _build(Recipe, raw, "", origin, set_by)
    _check_consistency(recipe, origin)
    return recipe


def _read_yaml(path: Path) -> Any:
    if path.is_dir():
        run_dir = (path / "recipe.yaml").is_file()
        raise ConfigError(
            f"{path}: is a folder; give a recipe file, e.g. recipes/en-fr.yaml"
            f"{' (a run dir keeps its own as recipe.yaml)' if run_dir else ''}"
        )
    if not path.is_file():
        raise ConfigError(f"{path}: recipe file not found")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read recipe ({exc})") from None
    import yaml  # here, not at the top: as in parse_value

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        pos = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"{path}: broken YAML{pos}: {problem}") from None


def _merge(base: dict, over: dict) -> dict:
    """``over`` laid onto ``base``: sections merge key by key, any other value (lists too)
    replaces."""
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _with_base(raw: Any, path: Path, chain: tuple[Path, ...] = ()) -> Any:
    """The recipe tree of ``path`` with its ``base:`` chain resolved (the base's name is not
    inherited)."""
    if not isinstance(raw, dict) or "base" not in raw:
        return raw
    raw = dict(raw)
    base = raw.pop("base")
    if not isinstance(base, str) or not base:
        raise ConfigError(f"{path}: base: expected the file name of another recipe, got {base!r}")
    base_path = path.parent / base
    chain = chain + (path.resolve(),)
    if base_path.resolve() in chain:
        raise ConfigError(f"{path}: base: {base} leads back to {base_path} (a cycle)")
    if not base_path.is_file():
        raise ConfigError(f"{path}: base: {base_path}: recipe file not found")
    parent = _with_base(_read_yaml(base_path), base_path, chain)
    if not isinstance(parent, dict):
        raise ConfigError(f"{base_path}: a recipe must be a mapping of keys (base of {path})")
    _build(Recipe, parent, "", str(base_path))  # a bad key or value in the base names the base file
    parent.pop("name", None)
    return _merge(parent, raw)


def load_recipe(path: str | os.PathLike, overrides: list[str] | None = None) -> Recipe:
    """Read, resolve ``base:``, override and validate a recipe file; any problem is one
    ConfigError line."""
    path = Path(path)
    raw = _read_yaml(path)
    named = isinstance(raw, dict) and "name" in raw
    recipe = recipe_from_dict(_with_base(raw, path), str(path), overrides)
    if recipe.name == "unnamed" and not named:
        recipe.name = path.stem
    return recipe


def save_recipe(recipe: Recipe, path: Path) -> None:
    import yaml  # here, not at the top: as in parse_value

    write_text_atomic(path, yaml.safe_dump(recipe.to_dict(), sort_keys=False))


def flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in d.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def recipe_differences(old: dict, new: dict) -> tuple[list[str], list[str]]:
    """Keys that differ between two recipes, split into (blocking, allowed on resume)."""
    # A key the older recipe lacks did not exist yet: it had its default's meaning.
    a, b = {**flatten(Recipe().to_dict()), **flatten(old)}, flatten(new)
    changed = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    blocking = [k for k in changed if not may_change_on_resume(k)]
    allowed = [k for k in changed if k not in blocking]
    return blocking, allowed
