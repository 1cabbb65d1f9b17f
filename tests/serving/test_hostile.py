"""`nmt serve` against what an outsider sends: the reproductions of nested JSON, lone surrogates,
deep markup, oversized bodies and headers and odd file names, then generated JSON, form and
multipart bodies and markup at every route (hypothesis). Every answer is a 2xx or a
LibreTranslate-shaped 4xx (one line of JSON, ``{"error": ...}``), never a 500, and the server
answers /health after each."""

import http.client
import json
import socket
import urllib.parse

import pytest

pytest.importorskip("fastapi")
requests = pytest.importorskip("requests")
hypothesis = pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from test_libretranslate import client_run  # noqa: E402, F401  (the shared tiny model)
from test_serve import Server  # noqa: E402

POST_ROUTES = ["/translate", "/detect", "/translate_file", "/suggest", "/v1/translate"]
GET_ROUTES = ["/", "/health", "/ready", "/languages", "/frontend/settings", "/v1/models", "/spec"]
FIELDS = ["q", "source", "target", "format", "alternatives", "api_key", "src", "model"]
FIELDS += ["beam_size", "nbest", "alignments", "attention", "prefix", "glossary", "file"]
LIMIT = 64 * 1024 + 8 * 100_000  # the default body limit: 64 KiB + 8 bytes a character
EXAMPLES = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(scope="module")
def server(client_run):  # noqa: F811
    s = Server(client_run, "--threads", "1", "--max-wait-ms", "5")
    yield s
    assert s.stop() == 0
    assert not [line for line in s.log if "Traceback" in line]


def send(server, method: str, path: str, body: bytes | None = None, kind: str = "") -> tuple:
    """(status, headers, body) over a fresh connection, whatever the answer."""
    host, port = urllib.parse.urlsplit(server.url).netloc.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        conn.request(method, path, body=body, headers={"Content-Type": kind} if kind else {})
        answer = conn.getresponse()
        return answer.status, dict(answer.getheaders()), answer.read()
    finally:
        conn.close()


def assert_answered(server, status: int, raw: bytes, generated: bool = False) -> None:
    """A 2xx, or a 4xx whose body is one line of JSON with its error; then /health answers."""
    assert 200 <= status < 300 or 400 <= status < 500, (status, raw[:300])
    if generated:  # --hypothesis-show-statistics shows the mix of answers
        hypothesis.event(f"answered {status}")
    if status >= 400:
        assert b"\n" not in raw.strip()
        error = json.loads(raw)
        assert list(error) == ["error"] and isinstance(error["error"], str) and error["error"]
    assert server.request("GET", "/health", timeout=30)[0] == 200


# ---------------------------------------------------------------------- the reproductions

DEEP = b"[" * 990 + b"]" * 990
REPRODUCTIONS = [
    *[(route, b'{"q": ' + DEEP + b"}", "nested deeper than 32") for route in POST_ROUTES],
    ("/translate", b'{"q": "\\ud800", "source": "en", "target": "fr"}', "q: not valid Unicode"),
    ("/v1/translate", b'{"src": ["a \\ud800"]}', "src[0]: not valid Unicode"),
    ("/translate", b'{"q": "a", "source": "\\ud800", "target": "fr"}', "source: not valid"),
    ("/translate", b'{"q": "a", "source": "en", "target": "\\udc00"}', "target: not valid"),
    ("/translate", b'{"q": "a", "source": "en", "target": "fr", "format": "\\ud800"}', "format"),
    ("/translate", b'{"q": "a", "source": "en", "target": "fr", "api_key": "\\ud800"}', "api_key"),
    ("/detect", b'{"q": ["ok", "\\udfff"]}', "q[1]: not valid Unicode"),
    (
        "/translate",
        json.dumps({"q": "<b>" * 1600, "source": "en", "target": "fr", "format": "html"}).encode(),
        "nests inline elements more than 100 deep",
    ),
    (
        "/v1/translate",
        json.dumps({"src": ["<i>" * 1600 + "x"], "format": "html"}).encode(),
        "nests inline elements more than 100 deep",
    ),
    ("/v1/translate", b'{"src": ["a"], "beam_size": "' + b"9" * 5000 + b'"}', "beam_size"),
    ("/v1/translate", b'{"src": ["a"], "nbest": "\xc2\xb2"}', "nbest"),
]


@pytest.mark.parametrize("route,body,words", REPRODUCTIONS, ids=[r[2][:30] for r in REPRODUCTIONS])
def test_each_reproduction_is_a_one_line_400(server, route, body, words):
    status, _headers, raw = send(server, "POST", route, body, "application/json")
    assert status == 400 and words in json.loads(raw)["error"], raw
    assert_answered(server, status, raw)


def test_a_surrogate_in_a_multipart_form_is_a_400(server):
    form = (
        b'--b\r\nContent-Disposition: form-data; name="q"\r\n\r\n+2AA-\r\n'
        b'--b\r\nContent-Disposition: form-data; name="source"\r\n\r\nen\r\n'
        b'--b\r\nContent-Disposition: form-data; name="target"\r\n\r\nfr\r\n--b--\r\n'
    )
    status, _, raw = send(server, "POST", "/translate", form, "multipart/form-data; boundary=b")
    assert status == 200  # "+2AA-" as UTF-8 is text like any other
    utf7 = "multipart/form-data; boundary=b; charset=utf-7"  # where "+2AA-" is a lone surrogate
    status, _, raw = send(server, "POST", "/translate", form, utf7)
    assert status == 400 and "q: not valid Unicode" in json.loads(raw)["error"]
    assert_answered(server, status, raw)


def test_a_body_over_the_limit_reaches_urllib_and_requests_as_its_413(server):
    """Python clients send the whole body before they read: they see the 413 and its message."""
    body = json.dumps({"q": "a" * 4_000_000, "source": "en", "target": "fr"}).encode()
    answer = requests.post(server.url + "/translate", data=body, timeout=60)
    assert answer.status_code == 413 and "at most" in answer.json()["error"]
    status, raw = server.request("POST", "/translate", body)  # urllib: Connection: close
    assert status == 413 and json.loads(raw)["error"].startswith("the request body is too large")

    def chunks():
        for _ in range(40):
            yield b"a" * 100_000

    answer = requests.post(server.url + "/v1/translate", data=chunks(), timeout=60)  # chunked
    assert answer.status_code == 413 and "at most" in answer.json()["error"]


def test_past_the_drain_limit_the_413_comes_before_the_connection_closes(server):
    host, port = urllib.parse.urlsplit(server.url).netloc.split(":")
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall(
            b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000000000\r\n\r\n" + b"a" * 1_000_000
        )
        answer = b""
        while b"}" not in answer:
            answer += conn.recv(65536)
    assert answer.startswith(b"HTTP/1.1 413") and b"connection: close" in answer.lower()
    assert b"too large (1000000000 bytes" in answer


def test_a_client_that_leaves_mid_body_is_no_internal_error(server):
    host, port = urllib.parse.urlsplit(server.url).netloc.split(":")
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall(
            b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Content-Length: 100\r\n\r\n{"q":'
        )
    assert server.request("GET", "/health", timeout=30)[0] == 200
    assert server.request("GET", "/health", timeout=30)[0] == 200  # the leaver's task is done
    assert not [line for line in server.log if "internal error" in line]


def test_headers_too_large_are_431_and_every_answer_has_its_security_headers(server):
    answer = requests.get(server.url + "/health", headers={"X-Big": "a" * 100_000}, timeout=30)
    assert answer.status_code == 431 and "headers are too large" in answer.json()["error"]
    page = requests.get(server.url + "/", timeout=30)
    assert "script-src 'self'" in page.headers["content-security-policy"]
    api = requests.post(server.url + "/translate", json={"q": "A dog."}, timeout=30)
    for answer in (page, api):
        assert answer.headers["x-content-type-options"] == "nosniff"
    assert "sandbox" in api.headers["content-security-policy"]


@pytest.mark.parametrize(
    "name", ["a?x=1#f.txt", "%2e%2e%2fpasswd.txt", "my notes é ü.txt", "nul\x00x\x1b\u202e.txt"]
)
def test_every_translated_file_downloads_from_the_url_returned(server, name):
    answer = requests.post(
        server.url + "/translate_file",
        files={
            "file": (name, b"A dog runs.\n", "text/plain"),
            "source": (None, "en"),
            "target": (None, "fr"),
        },
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    url = answer.json()["translatedFileUrl"]
    assert url.isascii() and not any(c in url.split("/download_file/")[1] for c in "?# /")
    got = requests.get(url, timeout=30)
    assert got.status_code == 200 and got.text.strip()
    shown = urllib.parse.unquote(got.headers["content-disposition"].split("''")[1])
    assert shown == "".join(c for c in name if c.isprintable() and c != "\u202e")


# ---------------------------------------------------------------------- generated input

surrogates = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
any_text = st.text(st.characters(codec=None) | surrogates, max_size=40) | st.sampled_from(
    ["en", "fr", "auto", "text", "html", "A dog runs.", "", " "]
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | any_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
    max_leaves=12,
)
bodies = st.dictionaries(st.sampled_from(FIELDS) | any_text, json_values, max_size=8)


def form_fields(route: str) -> dict:
    """The valid body of ``route`` as form fields (its string fields)."""
    return {k: v for k, v in VALID[route].items() if isinstance(v, str)}


def nested(value, depth: int):
    for _ in range(depth):
        value = [value]
    return value


VALID = {  # a valid body per route, for generated fields to change
    "/translate": {"q": "A dog runs.", "source": "en", "target": "fr"},
    "/detect": {"q": "A dog runs."},
    "/translate_file": {"source": "en", "target": "fr"},
    "/suggest": {"q": "A dog.", "s": "Un chien.", "source": "en", "target": "fr"},
    "/v1/translate": {"src": ["A dog runs.", "Two cats."], "nbest": 2, "alignments": True},
}


@EXAMPLES
@given(
    route=st.sampled_from(POST_ROUTES),
    body=bodies,
    from_valid=st.booleans(),
    depth=st.integers(0, 40) | st.just(0),
    where=st.sampled_from(FIELDS),
)
def test_generated_json_bodies_at_every_route(server, route, body, from_valid, depth, where):
    if from_valid:  # a valid request with some fields changed: it reaches the model
        body = {**VALID[route], **dict(list(body.items())[:2])}
    if depth:
        body[where] = nested(body.get(where), depth)
    raw = json.dumps(body).encode()  # lone surrogates as \\ud800 escapes
    status, _, answer = send(server, "POST", route, raw, "application/json")
    assert_answered(server, status, answer, generated=True)


@EXAMPLES
@given(
    route=st.sampled_from(POST_ROUTES),
    raw=st.binary(max_size=300),
    kind=st.sampled_from(["application/json", "application/x-www-form-urlencoded", "text/plain"]),
)
def test_generated_bytes_at_every_route(server, route, raw, kind):
    status, _, answer = send(server, "POST", route, raw, kind)
    assert_answered(server, status, answer, generated=True)


@EXAMPLES
@given(
    route=st.sampled_from(POST_ROUTES),
    fields=st.dictionaries(st.sampled_from(FIELDS) | any_text, any_text, max_size=6),
    query=st.dictionaries(st.sampled_from(FIELDS), st.text(max_size=20), max_size=3),
    from_valid=st.booleans(),
)
def test_generated_forms_and_query_strings_at_every_route(server, route, fields, query, from_valid):
    if from_valid:
        fields = {**form_fields(route), **dict(list(fields.items())[:2])}
    encode = {
        k.encode("utf-8", "surrogatepass"): v.encode("utf-8", "surrogatepass")
        for k, v in fields.items()
    }
    path = route + ("?" + urllib.parse.urlencode(query) if query else "")
    raw = urllib.parse.urlencode(encode).encode()
    status, _, answer = send(server, "POST", path, raw, "application/x-www-form-urlencoded")
    assert_answered(server, status, answer, generated=True)


def multipart(fields: dict, file: tuple | None, boundary: str) -> bytes:
    out = b""
    for name, value in fields.items():
        out += (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode(
                "utf-8", "surrogatepass"
            )
            + value.encode("utf-8", "surrogatepass")
            + b"\r\n"
        )
    if file is not None:
        name, content = file
        out += (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"'
                "\r\nContent-Type: text/plain\r\n\r\n"
            ).encode("utf-8", "surrogatepass")
            + content
            + b"\r\n"
        )
    return out + f"--{boundary}--\r\n".encode()


@EXAMPLES
@given(
    route=st.sampled_from(["/translate", "/translate_file", "/detect"]),
    fields=st.dictionaries(st.sampled_from(FIELDS) | any_text, any_text, max_size=5),
    file=st.none()
    | st.tuples(
        st.tuples(any_text, st.sampled_from([".txt", ".html", ".htm", ""])).map("".join),
        st.binary(max_size=80) | any_text.map(lambda t: t.encode("utf-8", "surrogatepass")),
    ),
    boundary=st.sampled_from(["b", "xYz-123", "-"]),
    from_valid=st.booleans(),
)
def test_generated_multipart_forms_at_every_route(
    server, route, fields, file, boundary, from_valid
):
    if from_valid:
        fields = {**form_fields(route), **dict(list(fields.items())[:2])}
    fields = {k.replace('"', ""): v for k, v in fields.items()}
    if file is not None:
        file = (file[0].replace('"', ""), file[1])
    raw = multipart(fields, file, boundary)
    kind = f"multipart/form-data; boundary={boundary}"
    status, _, answer = send(server, "POST", route, raw, kind)
    assert_answered(server, status, answer, generated=True)


TAGS = ["b", "i", "a", "span", "code", "p", "div", "pre", "script", "br", "img", "x-y", "!--"]
markup = st.recursive(
    st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
    | st.sampled_from(["A dog runs.", "&amp;", "&#xD800;", "<", ">", "</b>", "<!--"]),
    lambda inner: (
        st.tuples(
            st.sampled_from(TAGS), st.sampled_from(["", ' class="notranslate"', " href=x"]), inner
        ).map(lambda t: f"<{t[0]}{t[1]}>{t[2]}</{t[0]}>")
        | st.lists(inner, max_size=4).map("".join)
    ),
    max_leaves=20,
)


@EXAMPLES
@given(document=markup, depth=st.integers(0, 150) | st.just(0), tag=st.sampled_from(TAGS))
def test_generated_markup_at_every_route_that_reads_it(server, document, depth, tag):
    document = f"<{tag}>" * depth + document + f"</{tag}>" * (depth // 2)
    for route, body in (
        ("/translate", {"q": document, "source": "en", "target": "fr", "format": "html"}),
        ("/v1/translate", {"src": [document or "x"], "format": "html"}),
    ):
        status, _, answer = send(
            server, "POST", route, json.dumps(body).encode(), "application/json"
        )
        assert_answered(server, status, answer, generated=True)
    file = multipart({"source": "en", "target": "fr"}, ("page.html", document.encode()), "b")
    status, _, answer = send(
        server, "POST", "/translate_file", file, "multipart/form-data; boundary=b"
    )
    assert_answered(server, status, answer, generated=True)


@EXAMPLES
@given(
    path=st.sampled_from(GET_ROUTES + ["/static/app.js", "/download_file/x", "/static/"])
    | st.text(st.characters(codec="ascii"), max_size=30).map(lambda p: "/" + p),
    query=st.text(st.characters(codec="ascii"), max_size=30),
)
def test_generated_paths_and_query_strings_on_get(server, path, query):
    target = urllib.parse.quote(path, safe="/%") + ("?" + urllib.parse.quote(query, safe="=&"))
    status, _, answer = send(server, "GET", target)
    if status >= 400:
        assert_answered(server, status, answer, generated=True)
    else:
        assert server.request("GET", "/health", timeout=30)[0] == 200
