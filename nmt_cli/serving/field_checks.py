"""Untrusted values checked where a request is read, before any route looks at them.

A request's JSON body, form fields, query string and file names come from anyone. Two things
would otherwise reach the service as a 500: a JSON document nested deeper than the parser's
recursion allows (about 1,000 levels, a 2 KB body), and strings that are not valid Unicode (a
lone surrogate such as ``"\\ud800"``, which JSON's escapes can spell but UTF-8 cannot encode, so
neither the tokenizer nor an error message that echoes it can take it). Both are refused here
with one line naming the field. The walk over a value is iterative, so its own depth is no limit.
"""

from __future__ import annotations

import json
from typing import Any

MAX_JSON_DEPTH = 32  # LibreTranslate's and nmt's own bodies are 3 deep; a glossary object 4


class FieldError(ValueError):
    """A value refused: the one line that says which field and why."""


def loads_checked(text: str) -> Any:
    """``json.loads(text)``, refused (FieldError) when nested deeper than MAX_JSON_DEPTH or
    holding a string that is not valid Unicode; json's own errors (ValueError) pass through."""
    try:
        value = json.loads(text)
    except RecursionError:  # nested past the parser's recursion limit, far past MAX_JSON_DEPTH
        raise FieldError(
            f"the request body is nested deeper than {MAX_JSON_DEPTH} levels"
        ) from None
    check_value(value)
    return value


def check_value(value: Any, where: str = "") -> None:
    """Refuse (FieldError) a value nested deeper than MAX_JSON_DEPTH, or any string in it, key or
    value, that is not valid Unicode; ``where`` names the value in the message. A value's place
    is kept as (parent's place, key) and spelt out only for the message."""
    stack: list[tuple[Any, tuple | None, int]] = [(value, None, 0)]
    while stack:
        item, place, depth = stack.pop()
        if isinstance(item, str):
            _check(item, where, place)
            continue
        if not isinstance(item, (dict, list)):
            continue
        if depth >= MAX_JSON_DEPTH:
            name = _spelt(where, place) or "the request body"
            raise FieldError(f"{name}: nested deeper than {MAX_JSON_DEPTH} levels")
        pairs = item.items() if isinstance(item, dict) else enumerate(item)
        for key, child in pairs:
            if isinstance(key, str):
                _check(key, where, place, field_name=True)
            if isinstance(child, str):
                _check(child, where, (place, key))
            elif isinstance(child, (dict, list)):
                stack.append((child, (place, key), depth + 1))


def _check(text: str, where: str, place: tuple | None, field_name: bool = False) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        name = _spelt(where, place)
        if field_name:
            name = f"{name}.{_shown(text)}" if name else "a field name"
        raise FieldError(
            f"{_shown(name) or 'a field'}: not valid Unicode (a lone surrogate at character "
            f"{exc.start})"
        ) from None


def _spelt(where: str, place: tuple | None) -> str:
    """A place (parent's place, key) spelt as a field path: ``src[1]``, ``glossary.term``."""
    keys = []
    while place is not None:
        place, key = place
        keys.append(key)
    out = where
    for key in reversed(keys):
        out += f"[{key}]" if isinstance(key, int) else (f".{key}" if out else str(key))
    return out


def check_text(text: str, where: str) -> None:
    """Refuse (FieldError) a string UTF-8 cannot encode (a lone surrogate), naming where it is."""
    _check(text, where, None)


def _shown(name: Any) -> str:
    """A field name fit to echo: at most 40 characters, surrogates replaced."""
    text = str(name)[:40]
    return text.encode("utf-8", "replace").decode("utf-8")
