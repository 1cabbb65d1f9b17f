import json
from functools import partial

import pytest
from asgi_driver import answer, call, http_scope

from nmt_cli.serving.body_limit import BodyLimit, Pace
from nmt_cli.serving.request_body import RequestError


async def echo(scope, receive, send):
    """Reads the whole body, answers its length."""
    size, more = 0, True
    while more:
        message = await receive()
        size += len(message.get("body", b""))
        more = message.get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": str(size).encode()})


def test_a_body_within_the_limit_reaches_the_app():
    sent, _ = call(BodyLimit(echo, 100), http_scope(headers={"content-length": "60"}), [b"x" * 60])
    assert answer(sent) == (200, {}, b"60")


def test_a_declared_body_over_the_limit_is_read_then_answered_413_on_a_usable_connection():
    limit = BodyLimit(echo, 100, drain_limit=10_000)
    chunks = [b"x" * 1000] * 5
    sent, read = call(limit, http_scope(headers={"content-length": "5000"}), chunks)
    status, headers, body = answer(sent)
    assert read == 5  # all of it read (and dropped) before the answer: urllib reads it then
    assert status == 413 and "connection" not in headers
    assert json.loads(body) == {"error": "the request body is too large (5000 bytes, at most 100)"}


def test_past_the_drain_limit_the_answer_comes_first_then_the_connection_closes():
    limit = BodyLimit(echo, 100, drain_limit=3000)
    chunks = [b"x" * 1000] * 10
    sent, read = call(limit, http_scope(headers={"content-length": "10000"}), chunks)
    assert sent[0]["status"] == 413 and (b"connection", b"close") in sent[0]["headers"]
    assert sent[1]["more_body"] and b"at most 100" in sent[1]["body"]  # written, then lingering
    assert sent[-1] == {"type": "http.response.body", "body": b""}
    assert read == 4  # up to the drain limit, not the whole body


def test_a_client_waiting_for_100_continue_is_answered_without_reading():
    scope = http_scope(headers={"content-length": "5000", "expect": "100-continue"})
    sent, read = call(BodyLimit(echo, 100), scope, [b"x" * 5000])
    assert read == 0 and answer(sent)[0] == 413
    assert answer(sent)[1]["connection"] == "close"


def test_a_chunked_body_is_counted_as_it_is_read():
    limit = BodyLimit(echo, 100, drain_limit=10_000)
    with pytest.raises(RequestError) as refused:
        call(limit, http_scope(), [b"x" * 60] * 5)
    assert refused.value.status == 413 and refused.value.headers is None  # drained to its end
    assert str(refused.value) == "the request body is too large (300 bytes, at most 100)"
    limit = BodyLimit(echo, 100, drain_limit=200)
    with pytest.raises(RequestError) as refused:
        call(limit, http_scope(), [b"x" * 60] * 50)
    assert refused.value.headers == {"Connection": "close"}
    assert "more than" in str(refused.value)


def test_a_body_that_falls_behind_its_pace_is_answered_408_and_its_connection_closed():
    import asyncio

    async def a_byte_at_a_time():
        await asyncio.sleep(0.02)
        return {"type": "http.request", "body": b"x", "more_body": True}

    async def run():
        pace = partial(Pace, grace_s=0.1, min_rate=1000)  # a byte every 20 ms is 50 a second
        limit = BodyLimit(echo, 100, pace=pace)
        await limit(http_scope(headers={"content-length": "90"}), a_byte_at_a_time, None)

    with pytest.raises(RequestError) as refused:
        asyncio.run(run())
    assert refused.value.status == 408 and refused.value.headers == {"Connection": "close"}
    assert str(refused.value).startswith("the request body arrives too slowly (")
    assert "at least 1000 a second past the first 0.1 s" in str(refused.value)
