import json

from asgi_driver import answer, call, http_scope

from nmt_cli.serving.http_guard import MAX_HEADER_BYTES, PAGE_POLICY, HttpGuard


async def ok(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


async def failing(scope, receive, send):
    secret = "the user's own sentence"
    raise KeyError(secret)


def test_every_answer_carries_its_security_headers():
    for path, policy in (("/", PAGE_POLICY), ("/static/app.js", PAGE_POLICY)):
        _, headers, _ = answer(call(HttpGuard(ok), http_scope(path, method="GET"))[0])
        assert headers["content-security-policy"] == policy
        assert headers["x-content-type-options"] == "nosniff"
    for path in ("/translate", "/download_file/x.html"):
        _, headers, _ = answer(call(HttpGuard(ok), http_scope(path))[0])
        assert "sandbox" in headers["content-security-policy"]
        assert headers["x-content-type-options"] == "nosniff"


def test_oversized_headers_are_answered_431():
    scope = http_scope(headers={"x-big": "a" * MAX_HEADER_BYTES})
    status, headers, body = answer(call(HttpGuard(ok), scope)[0])
    assert status == 431 and headers["x-content-type-options"] == "nosniff"
    assert json.loads(body)["error"].startswith("the request headers are too large")


def test_an_internal_error_is_a_500_with_a_request_id_logged_once_without_the_input(capsys):
    status, headers, body = answer(call(HttpGuard(failing), http_scope())[0])
    request_id = headers["x-request-id"]
    assert status == 500
    assert json.loads(body) == {"error": f"internal error (request id {request_id})"}
    log = capsys.readouterr().err
    assert log.count(request_id) == 1 and log.count("Traceback") == 1
    assert "KeyError" in log and "in failing" in log
    assert "own sentence" not in log  # the message is left out; frames show source lines
