"""What every answer of `nmt serve` carries, and what becomes of a request the service failed.

- Security headers on every answer: ``X-Content-Type-Options: nosniff``, ``Referrer-Policy:
  no-referrer`` and a Content-Security-Policy: the page's own (its script, style sheet and API
  calls from this origin, nothing inline, no framing) on the page and its files, and one that
  allows nothing (a sandbox) on everything else, so that a translated HTML file or a JSON
  answer opened in a browser runs nothing.
- Request headers over :data:`MAX_HEADER_BYTES` in all are answered 431 (uvicorn's own bound,
  ``h11_max_incomplete_event_size``, is set far higher, for query strings as long as a body).
- An exception no route turned into an answer is an internal error: the client gets 500
  ``{"error": "internal error (request id ...)"}``, never the exception's text, and the log gets
  the traceback once, with the request id, the route and the exception's type but neither its
  message nor anything else of the request (both may hold the input's text). A client that
  leaves before its request body is read (Starlette's ``ClientDisconnect``) is no failure of
  the service: nothing is answered, logged or counted.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
import uuid

from starlette.requests import ClientDisconnect

MAX_HEADER_BYTES = 32 * 1024
PAGE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
OTHER_POLICY = "default-src 'none'; frame-ancestors 'none'; sandbox"
PAGE_PATHS = ("/", "/static/")


def security_headers(path: str) -> list[tuple[bytes, bytes]]:
    page = path == "/" or path.startswith(PAGE_PATHS[1])
    return [
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"no-referrer"),
        (b"content-security-policy", (PAGE_POLICY if page else OTHER_POLICY).encode()),
    ]


def json_answer(status: int, message: str, extra: list | None = None) -> tuple[dict, dict]:
    """The ASGI messages of a one-line JSON error."""
    body = json.dumps({"error": message}, separators=(",", ":")).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    start = {"type": "http.response.start", "status": status, "headers": headers + (extra or [])}
    return start, {"type": "http.response.body", "body": body}


def log_internal_error(request_id: str, scope, exc: BaseException) -> None:
    """The traceback once on stderr: frames and the exception's type, not its message."""
    route = getattr(scope.get("route"), "path", None) or "-"
    frames = "".join(traceback.format_list(traceback.extract_tb(exc.__traceback__)))
    print(
        f"{time.strftime('%Y-%m-%dT%H:%M:%S')} nmt serve: internal error, request {request_id}, "
        f"{scope.get('method', '-')} {route}: {type(exc).__name__}\n"
        f"Traceback (most recent call last):\n{frames}",
        file=sys.stderr,
        end="",
        flush=True,
    )


class HttpGuard:
    """ASGI middleware: security headers, 431 for oversized headers, internal errors answered
    with a request id (module docstring)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        added = security_headers(scope.get("path", ""))
        started = False

        async def guarded(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                have = {name.lower() for name, _ in message.get("headers", ())}
                extra = [(name, value) for name, value in added if name not in have]
                message = {**message, "headers": [*message.get("headers", ()), *extra]}
            await send(message)

        size = sum(len(name) + len(value) for name, value in scope.get("headers", ()))
        if size > MAX_HEADER_BYTES:
            for message in json_answer(
                431,
                f"the request headers are too large ({size} bytes, at most {MAX_HEADER_BYTES})",
            ):
                await guarded(message)
            return
        try:
            await self.app(scope, receive, guarded)
        except ClientDisconnect:  # the client left before its request was read: no one to answer
            return
        except Exception as exc:
            request_id = uuid.uuid4().hex[:16]
            log_internal_error(request_id, scope, exc)
            if not started:  # else the connection closes on an answer cut short
                for message in json_answer(
                    500,
                    f"internal error (request id {request_id})",
                    [(b"x-request-id", request_id.encode())],
                ):
                    await guarded(message)
