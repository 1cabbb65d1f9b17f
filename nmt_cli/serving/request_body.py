"""Reading an HTTP request for `nmt serve`: its fields from JSON, an urlencoded or multipart form,
and the query string (LibreTranslate's clients use all four), each field checked for its type and
range. Anything wrong is a :class:`RequestError`: its status and one line, never a traceback."""

import json
from typing import Any
from urllib.parse import parse_qs

from nmt_cli.serving.field_checks import FieldError, check_text, check_value, loads_checked

UNREADABLE_FORM = "Invalid request: the multipart form cannot be read"


class RequestError(Exception):
    """A refused request: its HTTP status, one line of explanation and, where the answer needs
    them, headers (``Connection: close`` after a body left unread)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.headers = status, headers


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
        return parse_form(text)
    if allow_form and not text.strip():
        return {}  # every field in the query string (deep-translator sends them so)
    try:
        body = loads_checked(text)
    except FieldError as exc:
        raise RequestError(400, f"Invalid request: {exc}") from None
    except json.JSONDecodeError as exc:
        raise RequestError(
            400, f"the request body is not valid JSON ({exc.msg} at character {exc.pos})"
        ) from None
    except ValueError as exc:  # json's other refusals: a number of over 4,300 digits
        raise RequestError(400, f"the request body is not valid JSON ({exc})") from None
    if not isinstance(body, dict):
        raise RequestError(400, "the request body must be a JSON object")
    return body


def parse_form(text: str) -> dict:
    """An urlencoded form (or query string): a field given once is a string, repeated a list."""
    try:
        fields = parse_qs(text, keep_blank_values=True, encoding="utf-8", errors="strict")
    except (UnicodeDecodeError, ValueError):
        raise RequestError(400, "the form data is not valid UTF-8") from None
    return {k: v[0] if len(v) == 1 else v for k, v in fields.items()}


async def read_multipart(request, max_fields: int) -> tuple[dict, dict]:
    """(fields, files) of a multipart form, read by Starlette's own parser (python-multipart) from
    the body already read and size-checked; files are Starlette UploadFiles."""
    from starlette.datastructures import UploadFile  # the serve extra: only for a form
    from starlette.exceptions import HTTPException

    try:
        form = await request.form(max_files=4, max_fields=max_fields)
    except HTTPException as exc:
        raise RequestError(400, f"{UNREADABLE_FORM} ({exc.detail})") from None
    except (ValueError, KeyError, AssertionError) as exc:
        raise RequestError(400, f"{UNREADABLE_FORM} ({exc})") from None
    fields: dict = {}
    files: dict = {}
    for key, value in form.multi_items():
        if isinstance(value, UploadFile):
            files.setdefault(key, value)
        elif key in fields:
            previous = fields[key]
            fields[key] = [*previous, value] if isinstance(previous, list) else [previous, value]
        else:
            fields[key] = value
    return fields, files


async def read_fields(request, max_body: int, allow_form: bool, max_fields: int):
    """(fields, uploaded files) of a Starlette request: its body (JSON, or with ``allow_form``
    an urlencoded or multipart form; its size bounded by the service's BodyLimit) and its query
    string, at most ``max_body`` bytes."""
    query = request.scope.get("query_string", b"")
    if len(query) > max_body:
        raise RequestError(
            414, f"the query string is too long ({len(query)} bytes, at most {max_body})"
        )
    raw = await request.body()  # read through the service's BodyLimit: 413 past max_body
    if len(raw) > max_body:
        raise RequestError(
            413, f"the request body is too large ({len(raw)} bytes, at most {max_body})"
        )
    kind = request.headers.get("content-type", "")
    files: dict = {}
    if allow_form and kind.startswith("multipart/form-data"):
        body, files = await read_multipart(request, max_fields)
    else:
        body = parse_body(raw, kind, allow_form)
    try:
        params = parse_form(query.decode("latin-1")) if query else {}
    except RequestError:
        raise RequestError(400, "the query string is not valid UTF-8") from None
    try:  # a form's charset may spell what UTF-8 cannot (UTF-7 spells lone surrogates)
        check_value(body)
        for key, upload in files.items():
            check_text(key, "a file field's name")
            check_text(upload.filename or "", f"{key}: its file name")
    except FieldError as exc:
        raise RequestError(400, f"Invalid request: {exc}") from None
    return merge_query(body, params), files


def given_key(body: dict, headers) -> str | None:
    """The api_key a request gives: in its fields, an X-API-Key header or a bearer token; one
    key given in two places must be the same."""
    auth = headers.get("authorization", "")
    given = [body.get("api_key"), headers.get("x-api-key")]
    if auth.lower().startswith("bearer "):
        given.append(auth[7:])
    if any(k is not None and not isinstance(k, str) for k in given):
        raise RequestError(400, "Invalid request: api_key must be a string")
    keys = {k for k in given if k not in (None, "")}
    if len(keys) > 1:
        raise RequestError(400, "Invalid request: two different api keys in one request")
    return keys.pop() if keys else None


def merge_query(body: dict, query: dict) -> dict:
    """The body's fields with the query string's: a field in both must say the same."""
    merged = dict(body)
    for key, value in query.items():
        if key in merged and merged[key] != value:
            raise RequestError(
                400,
                f"Invalid request: {key[:40]} is given both in the body and in the query "
                "string, with different values",
            )
        merged[key] = value
    return merged


def read_int(body: dict, key: str, default: int, lo: int, hi: int) -> int:
    value = body.get(key, default)
    if isinstance(value, str):  # form fields are strings
        try:
            value = int(value)
        except ValueError:  # not a number, or past int()'s 4,300 digits
            pass
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
