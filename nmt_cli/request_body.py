"""Reading an HTTP request's body for `nmt serve`: JSON (or a form, as some LibreTranslate
clients post), and each field checked for its type and range. Anything wrong is a
:class:`RequestError`: its status and one line, never a traceback."""

import json
from typing import Any
from urllib.parse import parse_qs


class RequestError(Exception):
    """A refused request: its HTTP status and one line of explanation."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def parse_body(raw: bytes, content_type: str, allow_form: bool) -> dict:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise RequestError(400, "the request body is not valid UTF-8") from None
    # A form, as some LibreTranslate clients post; a JSON object sent with a form's content type
    # (curl -d does that) is still read as JSON.
    if (
        allow_form
        and content_type.startswith("application/x-www-form-urlencoded")
        and not text.lstrip().startswith("{")
    ):
        try:
            fields = parse_qs(text, keep_blank_values=True, encoding="utf-8", errors="strict")
        except (UnicodeDecodeError, ValueError):
            raise RequestError(400, "the form data is not valid UTF-8") from None
        return {k: v[0] if len(v) == 1 else v for k, v in fields.items()}
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise RequestError(
            400, f"the request body is not valid JSON ({exc.msg} at character {exc.pos})"
        ) from None
    if not isinstance(body, dict):
        raise RequestError(400, "the request body must be a JSON object")
    return body


def read_int(body: dict, key: str, default: int, lo: int, hi: int) -> int:
    value = body.get(key, default)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():  # form fields are strings
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise RequestError(
            400, f"{key}: expected an integer from {lo} to {hi}, got {json.dumps(value)[:40]}"
        )
    return value


def read_bool(body: dict, key: str) -> bool:
    value = body.get(key, False)
    if not isinstance(value, bool):
        raise RequestError(400, f"{key}: expected true or false, got {json.dumps(value)[:40]}")
    return value


def read_texts(value: Any, key: str) -> list[str]:
    items = value if isinstance(value, list) else [value]
    if value is None:
        raise RequestError(400, f"{key}: missing; give the text to translate")
    if isinstance(value, list) and not value:
        raise RequestError(400, f"{key}: empty list; give at least one text")
    for i, item in enumerate(items):
        where = f"{key}[{i}]" if isinstance(value, list) else key
        if not isinstance(item, str):
            raise RequestError(400, f"{where}: expected a string, got {type(item).__name__}")
        if not item.strip():
            raise RequestError(400, f"{where}: empty text")
    return items
