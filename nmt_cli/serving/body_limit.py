"""Request bodies past the service's limit, refused so that every client reads why; and bodies
that arrive too slowly.

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

A body must keep pace: N bytes within :data:`GRACE_S` + N / :data:`MIN_RATE` seconds of its first
read. One that falls behind is answered 408 and its connection closed, so a client sending its
body a byte at a time holds nothing for long (uvicorn bounds no read time of its own; a timeout
between two reads, as nginx's ``client_body_timeout``, lets a byte a second through).
"""

from __future__ import annotations

import asyncio
import json

from nmt_cli.serving.request_body import RequestError

DRAIN_LIMIT = 32 * 1024 * 1024  # bytes of a refused body read and dropped, at most
LINGER_S = 10.0  # seconds a connection refused past DRAIN_LIMIT waits for its client to read
GRACE_S = 10.0  # seconds any body may take
MIN_RATE = 1024  # bytes a second a body averages past GRACE_S, at least
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


class Pace:
    """The time a body has: from its first read, GRACE_S + bytes read / MIN_RATE seconds."""

    def __init__(self, grace_s: float = GRACE_S, min_rate: float = MIN_RATE):
        self.grace_s, self.min_rate = grace_s, min_rate
        self.start: float | None = None
        self.bytes = 0

    async def read(self, receive) -> dict:
        """The next message; asyncio.TimeoutError once the body has fallen behind."""
        now = asyncio.get_running_loop().time()
        if self.start is None:
            self.start = now
        left = self.start + self.grace_s + self.bytes / self.min_rate - now
        message = await asyncio.wait_for(receive(), max(left, 0.0))
        self.bytes += len(message.get("body", b""))
        return message

    def behind(self) -> str:
        return (
            f"the request body arrives too slowly ({self.bytes} bytes; at least "
            f"{self.min_rate:g} a second past the first {self.grace_s:g} s)"
        )


async def drain(receive, budget: int, pace: Pace) -> tuple[int, bool]:
    """Read and drop the rest of a request body, at most ``budget`` bytes: (bytes read, whether
    the body ended; False also when the client left or fell behind ``pace``)."""
    read = 0
    while read <= budget:
        try:
            message = await pace.read(receive)
        except asyncio.TimeoutError:
            return read, False
        if message["type"] != "http.request":
            return read, False
        read += len(message.get("body", b""))
        if not message.get("more_body", False):
            return read, True
    return read, False


class BodyLimit:
    """ASGI middleware: request bodies over ``limit`` bytes (``by_path``'s for the paths it
    names: a file upload's) answered 413, bodies falling behind their pace 408 (module
    docstring)."""

    def __init__(self, app, limit: int, drain_limit: int = DRAIN_LIMIT, pace=Pace, by_path=None):
        self.app, self.limit, self.drain_limit, self.pace = app, limit, drain_limit, pace
        self.by_path: dict[str, int] = dict(by_path or {})

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        pace = self.pace()
        limit = self.by_path.get(scope.get("path", ""), self.limit)
        declared = declared_length(scope)
        if declared is not None and declared > limit:
            await self.refuse(declared, limit, receive, send, expects_continue(scope), pace)
            return
        whole = False

        async def counted():
            nonlocal whole
            if whole:  # the body is read: what comes now (a disconnect) has no time limit
                return await receive()
            try:
                message = await pace.read(receive)
            except asyncio.TimeoutError:
                raise RequestError(408, pace.behind(), headers={"Connection": "close"}) from None
            whole = message["type"] != "http.request" or not message.get("more_body", False)
            if pace.bytes > limit:
                seen = pace.bytes
                more, ended = (0, True)
                if not whole:
                    more, ended = await drain(receive, self.drain_limit - seen, pace)
                raise RequestError(
                    413,
                    too_large(seen + more, limit, exact=ended),
                    headers=None if ended else {"Connection": "close"},
                )
            return message

        await self.app(scope, counted, send)

    async def refuse(
        self, declared: int, limit: int, receive, send, expects: bool, pace: Pace
    ) -> None:
        message = {"error": too_large(declared, limit)}
        body = json.dumps(message, separators=(",", ":")).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        if expects:  # the client waits for a 100 Continue before it sends anything
            await send({"type": "http.response.start", "status": 413, "headers": [*headers, CLOSE]})
            await send({"type": "http.response.body", "body": body})
            return
        if declared <= self.drain_limit:
            _read, ended = await drain(receive, self.drain_limit, pace)
            start = headers if ended else [*headers, CLOSE]
            await send({"type": "http.response.start", "status": 413, "headers": start})
            await send({"type": "http.response.body", "body": body})
            return
        await send({"type": "http.response.start", "status": 413, "headers": [*headers, CLOSE]})
        await send({"type": "http.response.body", "body": body, "more_body": True})
        try:
            await asyncio.wait_for(drain(receive, self.drain_limit, pace), LINGER_S)
        except asyncio.TimeoutError:
            pass
        await send({"type": "http.response.body", "body": b""})
