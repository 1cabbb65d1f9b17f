"""A recipe value checked against its key: the key's type annotation (int, float, bool, str,
lists, mappings and unions of them, as the sections in nmt_cli/config/sections.py declare them) and
its ``_opt`` choices and range. A value that does not fit is one :class:`ConfigError` line naming
the dotted key, what it expected and what it got."""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any

from nmt_cli.runtime.errors import ConfigError


def _type_name(tp: Any) -> str:
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(
        tp, str(tp)
    )


def _coerce(value: Any, tp: Any, where: str) -> Any:
    """Check ``value`` against the annotation ``tp``; ints are accepted where floats are."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, getattr(types, "UnionType", None)):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        for inner in options[:-1]:  # e.g. str | list[str]: a string stays a string
            try:
                return _coerce(value, inner, where)
            except ConfigError:
                pass
        return _coerce(value, options[-1], where)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return {
            _coerce(k, args[0], where): _coerce(v, args[1], f"{where}.{k}")
            for k, v in value.items()
        }
    if origin is list:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        return [_coerce(v, args[0], f"{where}[{i}]") for i, v in enumerate(value)]
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads 3e-4 (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
    elif tp is str and isinstance(value, str):
        return value
    raise ConfigError(f"{where}: expected {_type_name(tp)}, got {value!r}")


def _check_range(value: Any, meta: dict, where: str) -> None:
    choices = meta.get("choices")
    if choices and value not in choices:
        hint = difflib.get_close_matches(str(value), choices, n=1)
        extra = f" (did you mean '{hint[0]}'?)" if hint else ""
        raise ConfigError(f"{where}: '{value}' is not one of {', '.join(choices)}{extra}")
    lo, hi = meta.get("lo"), meta.get("hi")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if lo is not None and (value < lo or (meta.get("lo_open") and value == lo)):
            op = ">" if meta.get("lo_open") else ">="
            raise ConfigError(f"{where}: {value:g} is out of range (must be {op} {lo:g})")
        if hi is not None and value > hi:
            raise ConfigError(f"{where}: {value:g} is out of range (must be <= {hi:g})")


def check_value(value: Any, tp: Any, meta: typing.Mapping, where: str) -> Any:
    """``value`` as the key ``where`` of type ``tp`` holds it, checked against its metadata."""
    value = _coerce(value, tp, where)
    _check_range(value, meta, where)
    return value
