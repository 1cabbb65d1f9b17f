"""Request bodies past the service's limit, refused so that every client reads why.

A body larger than the service takes is answered 413 with its one-line JSON error. Answering
from the Content-Length alone and closing the connection leaves the clients that send their
whole body before they read (Python's urllib and requests, so libretranslatepy and
deep-translator) with a broken pipe and no answer. So the rest of the body is read and dropped
first, up to :data:`DRAIN_LIMIT` bytes, and the answer comes after it, on a connection that stays
usable. A body declared larger than that is answered at once, marked ``Connection: close``, and
the connection lingers while up to DRAIN_LIMIT bytes more are read and dropped (at most
:data:`LINGER_S` seconds), so that a client reading while it sends (curl, browsers) gets the
answer before the connection closes. A client that asked ``Expect: 100-continue`` has sent no
body: it is answered at once. A body without a length (chunked) is counted as it is read.
"""

from __future__ import annotations

import asyncio
import json

from nmt_cli.serving.request_body import RequestError

DRAIN_LIMIT = 32 * 1024 * 1024  # bytes of a refused body read and dropped, at most
LINGER_S = 10.0  # seconds a connection refused past DRAIN_LIMIT waits for its client to read
CLOSE = (b"connection", b"close")


def too_large(size: int, limit: int, exact: bool = True) -> str:
    more = "" if exact else "more than "
    return f"the request body is too large ({more}{size} bytes, at most {limit})"


def declared_length(scope) -> int | None:
    """The request's Content-Length, None when it gives none (or one that is not a number)."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


def expects_continue(scope) -> bool:
    return any(
        name == b"expect" and value.lower() == b"100-continue"
        for name, value in scope.get("headers", ())
    )


async def drain(receive, budget: int) -> tuple[int, bool]:
    """Read and drop the rest of a request body, at most ``budget`` bytes: (bytes read, whether
    the body ended; False also when the client left)."""
    read = 0
    while read <= budget:
        message = await receive()
        if message["type"] != "http.request":
            return read, False
        read += len(message.get("body", b""))
        if not message.get("more_body", False):
            return read, True
    return read, False


class BodyLimit:
    """ASGI middleware: request bodies over ``limit`` bytes answered 413 (module docstring)."""

    def __init__(self, app, limit: int, drain_limit: int = DRAIN_LIMIT):
        self.app, self.limit, self.drain_limit = app, limit, drain_limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = declared_length(scope)
        if declared is not None and declared > self.limit:
            await self.refuse(declared, receive, send, expects_continue(scope))
            return
        seen = 0

        async def counted():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    more, ended = (0, True)
                    if message.get("more_body", False):
                        more, ended = await drain(receive, self.drain_limit - seen)
                    raise RequestError(
                        413,
                        too_large(seen + more, self.limit, exact=ended),
                        headers=None if ended else {"Connection": "close"},
                    )
            return message

        await self.app(scope, counted, send)

    async def refuse(self, declared: int, receive, send, expects: bool) -> None:
        message = {"error": too_large(declared, self.limit)}
        body = json.dumps(message, separators=(",", ":")).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        if expects:  # the client waits for a 100 Continue before it sends anything
            await send({"type": "http.response.start", "status": 413, "headers": [*headers, CLOSE]})
            await send({"type": "http.response.body", "body": body})
            return
        if declared <= self.drain_limit:
            await drain(receive, self.drain_limit)
            await send({"type": "http.response.start", "status": 413, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await send({"type": "http.response.start", "status": 413, "headers": [*headers, CLOSE]})
        await send({"type": "http.response.body", "body": body, "more_body": True})
        try:
            await asyncio.wait_for(drain(receive, self.drain_limit), LINGER_S)
        except asyncio.TimeoutError:
            pass
        await send({"type": "http.response.body", "body": b""})
