"""Driving one ASGI middleware in-process: a request's scope and body chunks in, the messages
it sends out."""

import asyncio


def http_scope(path: str = "/translate", headers: dict | None = None, method: str = "POST"):
    return {
        "type": "http",
        "method": method,
        "path": path,
        "query_string": b"",
        "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
    }


def call(app, scope: dict, chunks: list[bytes] = ()) -> tuple[list[dict], int]:
    """(messages sent, body chunks the app read) of one request whose body is ``chunks``."""
    pending = list(chunks)
    sent: list[dict] = []
    read = [0]

    async def receive():
        if not pending:
            return {"type": "http.disconnect"}
        read[0] += 1
        chunk = pending.pop(0)
        return {"type": "http.request", "body": chunk, "more_body": bool(pending)}

    async def send(message):
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return sent, read[0]


def answer(sent: list[dict]) -> tuple[int, dict, bytes]:
    """(status, headers, body) of the messages sent."""
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], {k.decode(): v.decode() for k, v in start["headers"]}, body
