"""`nmt serve` as clients use it: a real uvicorn server on 127.0.0.1 with a tiny trained model,
spoken to over HTTP; the web page in a real headless Chromium."""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from conftest import multi30k_lines, trained_copy  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run_dir(tiny_run, tmp_path_factory):
    return trained_copy(tiny_run, tmp_path_factory, "served", max_steps=40, checkpoint_every=40)


def nmt_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "nmt_cli", *args]


def child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


class Server:
    """`nmt serve --port 0` in a child process; ``url`` once it listens."""

    def __init__(self, run: Path, *options: str):
        self.proc = subprocess.Popen(
            nmt_command("serve", "-m", str(run), "--port", "0", *options),
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            env=child_env(),
            text=True,
        )
        line = self.proc.stderr.readline()
        if "http://" not in line:
            self.proc.kill()
            raise AssertionError(f"nmt serve did not start: {line}{self.proc.stderr.read()}")
        self.url = line[line.index("http://") :].split()[0].rstrip("/")
        self.log: list[str] = []
        threading.Thread(target=lambda: self.log.extend(self.proc.stderr), daemon=True).start()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise

    def request(self, method: str, path: str, body=None, headers=None, timeout=60):
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json", **(headers or {})},
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def json(self, method: str, path: str, body=None, **kw):
        status, raw = self.request(method, path, body, **kw)
        return status, json.loads(raw)


@pytest.fixture(scope="module")
def server(run_dir):
    s = Server(run_dir, "--threads", "2", "--max-wait-ms", "20")
    yield s
    assert s.stop() == 0


def cli_translate(run: Path, lines: list[str], *args: str) -> list[str]:
    out = subprocess.run(
        nmt_command("translate", "-m", str(run), *args),
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        env=child_env(),
        check=True,
    )
    return out.stdout.split("\n")[:-1]


LIBRE_LINES = ["A man is riding a bike.", "Two dogs play in the snow."]
NATIVE_LINES = ["A woman in a red coat walks down the street.", "People are standing."]


@pytest.fixture(scope="module")
def cli(run_dir):
    """What `nmt translate` writes for the lines the tests send: {line: output}, plain and with
    --alignments (two processes for all tests: each costs a torch start-up)."""
    lines = LIBRE_LINES + NATIVE_LINES + multi30k_lines("test_2016_flickr", "en", 64)
    return {
        "plain": dict(zip(lines, cli_translate(run_dir, lines))),
        "aligned": dict(zip(NATIVE_LINES, cli_translate(run_dir, NATIVE_LINES, "--alignments"))),
    }


def test_page_models_languages_and_health(server, run_dir):
    status, page = server.request("GET", "/")
    assert (
        status == 200 and b"<textarea" in page and b"http" not in page.replace(b"http-equiv", b"")
    )
    for name in ("app.js", "style.css"):
        assert server.request("GET", f"/static/{name}")[0] == 200
    assert server.json("GET", "/health") == (
        200,
        {
            "status": "ok",
            "models": ["tiny"],
            "pending_sentences": 0,
            "batching": True,
            "decoded_batches": 0,
            "decoded_sentences": 0,
        },
    )
    status, models = server.json("GET", "/v1/models")
    (model,) = models["models"]
    assert (
        status == 200
        and model["id"] == "tiny"
        and (model["source"], model["target"]) == ("en", "fr")
    )
    assert (
        model["step"] == 40
        and model["checkpoint"] in ("best.pt", "last.pt")
        and model["beam_size"] == 2
    )
    assert server.json("GET", "/languages") == (
        200,
        [
            {"code": "en", "name": "English", "targets": ["fr"]},
            {"code": "fr", "name": "French", "targets": []},
        ],
    )


def test_libretranslate_requests_answer_as_nmt_translate(server, cli):
    lines = LIBRE_LINES
    expected = [cli["plain"][line] for line in lines]
    assert server.json(
        "POST", "/translate", {"q": lines[0], "source": "en", "target": "fr", "format": "text"}
    ) == (200, {"translatedText": expected[0]})
    assert server.json("POST", "/translate", {"q": lines, "source": "en", "target": "fr"}) == (
        200,
        {"translatedText": expected},
    )
    # A form post, as some LibreTranslate clients send it; lines of one text stay lines.
    form = urllib.parse.urlencode({"q": "\n".join(lines), "source": "en", "target": "fr"}).encode()
    status, raw = server.request(
        "POST", "/translate", form, headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    assert status == 200 and json.loads(raw) == {"translatedText": "\n".join(expected)}
    status, body = server.json(
        "POST", "/translate", {"q": lines[0], "source": "en", "target": "fr", "alternatives": 1}
    )
    assert status == 200 and len(body["alternatives"]) <= 1
    assert body["translatedText"] not in body["alternatives"]


def test_native_translate_gives_nbest_alignment_and_word_attention(server, cli, run_dir):
    from nmt_cli import Translator, translate_texts

    lines = NATIVE_LINES
    aligned = [cli["aligned"][line] for line in lines]
    api = [
        t.translation
        for t in translate_texts(
            Translator.load(run_dir, device="cpu"), lines, nbest=2, alignments=True
        )
    ]
    status, body = server.json(
        "POST", "/v1/translate", {"src": lines, "nbest": 2, "alignments": True, "attention": True}
    )
    assert status == 200 and body["model"] == "tiny"
    for k, tr in enumerate(body["translations"]):
        text, alignment = aligned[k].split("\t")
        assert (tr["text"], tr["alignment"]) == (text, alignment)
        assert [(a["text"], a["score"]) for a in tr["nbest"]] == [
            (a.text, pytest.approx(a.score, abs=1e-4)) for a in api[k].alternatives
        ]
        # each alternative with its own alignment and confidence, the first the best's
        assert [a["alignment"] for a in tr["nbest"]] == [
            " ".join(f"{i}-{j}" for i, j in a.alignment) for a in api[k].alternatives
        ]
        assert tr["nbest"][0]["alignment"] == tr["alignment"]
        assert tr["nbest"][0]["confidence"] == tr["confidence"]
        assert all(0 <= a["confidence"] <= 1 for a in tr["nbest"])
        att = tr["attention"]
        assert att["source_words"] == lines[k].split()
        assert len(att["target_words"]) == len(tr["text"].split()) == len(att["weights"])
        for row in att["weights"]:
            # each weight rounded to 4 places, and a retried text has more of them in a row
            assert len(row) == len(att["source_words"]) and sum(row) == pytest.approx(1, abs=3e-3)
        best = {(row.index(max(row)), j) for j, row in enumerate(att["weights"])}
        assert {tuple(map(int, p.split("-"))) for p in alignment.split()} == best


@pytest.mark.slow
def test_64_concurrent_requests_each_answer_as_nmt_translate(server, cli):
    lines = multi30k_lines("test_2016_flickr", "en", 64)
    expected = [cli["plain"][line] for line in lines]
    before = server.json("GET", "/health")[1]["decoded_batches"]

    def ask(line):
        return server.json("POST", "/translate", {"q": line, "source": "en", "target": "fr"})

    with ThreadPoolExecutor(16) as clients:
        answers = list(clients.map(ask, lines))
    assert [status for status, _ in answers] == [200] * 64, answers
    batches = server.json("GET", "/health")[1]["decoded_batches"] - before
    assert batches < 64  # requests were decoded together
    assert [body["translatedText"] for _, body in answers] == expected


@pytest.mark.slow
@pytest.mark.parametrize("shortlist", ["--shortlist", "--no-shortlist"])
def test_concurrent_answers_equal_nmt_translate_with_a_narrow_shortlist(
    run_dir, tmp_path, shortlist
):
    """As the 64-request test, with a shortlist narrower than the tiny vocabulary (8 frequent
    pieces, 2 per source piece), as a real model's is; and with it turned off on both sides."""
    from nmt_cli.training.checkpoint import load, resolve, save_atomic

    payload = load(resolve(run_dir))
    payload["recipe"]["decode"].update(shortlist=True, shortlist_frequent=8, shortlist_per_source=2)
    narrow = tmp_path / "narrow.pt"
    save_atomic(payload, narrow)
    lines = multi30k_lines("test_2016_flickr", "en", 64)
    expected = cli_translate(narrow, lines, shortlist)
    s = Server(narrow, "--threads", "2", "--max-wait-ms", "20", shortlist)
    try:
        with ThreadPoolExecutor(16) as clients:
            answers = list(
                clients.map(
                    lambda line: s.json(
                        "POST", "/translate", {"q": line, "source": "en", "target": "fr"}
                    ),
                    lines,
                )
            )
    finally:
        assert s.stop() == 0
    assert [body.get("translatedText") for _, body in answers] == expected


BAD = [
    # (route, body bytes, content type, status, words in the error)
    ("/translate", b'{"q": "A dog.", "source": "en"', "application/json", 400, "not valid JSON"),
    (
        "/translate",
        b'{"q": "A dog.", "source": "en", "target": "fr", "alternatives": ' + b"9" * 4301 + b"}",
        "application/json",
        400,
        "not valid JSON",
    ),
    ("/translate", b'["A dog."]', "application/json", 400, "JSON object"),
    (
        "/translate",
        '{"q": "caf\xe9", "source": "en", "target": "fr"}'.encode("latin-1"),
        "application/json",
        400,
        "UTF-8",
    ),
    (
        "/translate",
        b'{"q": 7, "source": "en", "target": "fr"}',
        "application/json",
        400,
        "must be a string or a list of strings",
    ),
    (
        "/translate",
        b'{"source": "en", "target": "fr"}',
        "application/json",
        400,
        "Invalid request: missing q parameter",
    ),
    (
        "/translate",
        b'{"q": "A dog.", "target": "fr"}',
        "application/json",
        400,
        "Invalid request: missing source parameter",
    ),
    (
        "/translate",
        b'{"q": "A dog.", "source": "en", "target": "de"}',
        "application/json",
        400,
        "de is not supported",
    ),
    (
        "/translate",
        b'{"q": "A dog.", "source": "fr", "target": "en"}',
        "application/json",
        400,
        "English (en) is not available as a target language from French (fr)",
    ),
    (
        "/translate",
        b'{"q": "A dog.", "source": "en", "target": "fr", "format": "xml"}',
        "application/json",
        400,
        "xml format is not supported",
    ),
    (
        "/translate",
        json.dumps({"q": "a " * 3000, "source": "en", "target": "fr"}).encode(),
        "application/json",
        400,
        "Invalid request: request (6000) exceeds text limit (5000)",
    ),
    (
        "/translate",
        json.dumps({"q": ["a dog"] * 10_000, "source": "en", "target": "fr"}).encode(),
        "application/json",
        400,
        "Invalid request: request (10000) exceeds text limit (1024)",
    ),
    (
        "/translate",
        json.dumps({"q": ["a dog " * 800] * 30, "source": "en", "target": "fr"}).encode(),
        "application/json",
        413,
        "at most 100000 in one request",
    ),
    (
        "/translate",
        b"--xx\r\nContent-Disposition: form-data; name=q\r\n\r\nA dog.\r\n--xx--garbage",
        "multipart/form-data",  # no boundary given
        400,
        "multipart form cannot be read",
    ),
    (
        "/translate",
        b"\x00\xff--zz\r\nnot a part header\r\n\r\n--zz",
        "multipart/form-data; boundary=zz",
        400,
        "Invalid request",
    ),
    (
        "/translate",
        b'--b\r\nContent-Disposition: form-data; name="q"\r\n\r\nA dog.\r\n'
        b'--b\r\nContent-Disposition: form-data; name="source"\r\n\r\nen\r\n'
        b'--b\r\nContent-Disposition: form-data; name="target"\r\n\r\nfr\r\n'
        b'--b\r\nContent-Disposition: form-data; name="alternatives"\r\n\r\nthree\r\n--b--\r\n',
        "multipart/form-data; boundary=b",
        400,
        "Invalid request: alternatives parameter is not a number",
    ),
    (
        "/translate",
        b"q=A+dog.&source=en&target=fr&alternatives=%5B1%5D",
        "application/x-www-form-urlencoded",
        400,
        "alternatives parameter is not a number",
    ),
    (
        "/translate?source=en&target=fr&q=" + "a" * 100_000,
        b"",
        "application/x-www-form-urlencoded",
        400,
        "Invalid request: request (100000) exceeds text limit (5000)",
    ),
    (
        "/translate?q=A+dog.&source=en&target=fr&api_key=one",
        b'{"api_key": "two"}',
        "application/json",
        400,
        "api_key is given both in the body and in the query string",
    ),
    (
        "/translate?q=A+dog.&source=en&target=fr&api_key=one",
        b"",
        "application/x-www-form-urlencoded",
        400,
        "two different api keys",
    ),
    (
        "/translate",
        b'{"q": "A dog.", "source": "en", "target": "fr", "alternatives": 40}',
        "application/json",
        400,
        "Invalid request: alternatives parameter must be <= 31",
    ),
    ("/detect", b"{}", "application/json", 400, "Invalid request: missing q parameter"),
    ("/translate_file", b"{}", "application/json", 400, "missing file parameter"),
    ("/v1/translate", b'{"src": "A dog."}', "application/json", 400, "list of sentences"),
    ("/v1/translate", b'{"src": ["A dog.", ""]}', "application/json", 400, "src[1]: empty text"),
    (
        "/v1/translate",
        b'{"src": ["A dog."], "beam_size": "wide"}',
        "application/json",
        400,
        "beam_size",
    ),
    ("/v1/translate", b'{"src": ["A dog."], "nbest": 9}', "application/json", 400, "nbest"),
    (
        "/v1/translate",
        b'{"src": ["A dog."], "attention": "yes"}',
        "application/json",
        400,
        "attention",
    ),
    (
        "/v1/translate",
        b'{"src": ["A dog."], "model": "../../etc/passwd"}',
        "application/json",
        400,
        "no model",
    ),
    (
        "/v1/translate",
        b'{"src": ["A dog."], "restore_case": "yes"}',
        "application/json",
        400,
        "restore_case: expected true or false",
    ),
    (
        "/v1/translate",
        b'{"src": ["A dog."], "numbers": "roman"}',
        "application/json",
        400,
        "numbers: 'roman' is not one of keep, target, model",
    ),
    (
        "/translate",
        b'{"q": "A dog.", "source": "en", "target": "fr", "numbers": 3}',
        "application/json",
        400,
        "numbers: '3' is not one of keep, target, model",
    ),
    ("/v1/translate", b"\xff\xfe", "application/json", 400, "UTF-8"),
    ("/static/serve.py", None, "application/json", 404, "no such file"),
    ("/static/..%2F..%2Fpyproject.toml", None, "application/json", 404, "Not Found"),
]


def test_capitals_and_numbers_options_reach_the_native_route_as_the_cli_takes_them(server, run_dir):
    line = "TWO DOGS PLAY WITH 1,234 BALLS AT 10:30 IN THE SNOW."
    asked = {"restore_case": False, "numbers": "target"}
    for body, args in (({}, []), (asked, ["--no-restore-case", "--numbers", "target"])):
        status, answer = server.json("POST", "/v1/translate", {"src": [line], **body})
        assert status == 200
        assert answer["translations"][0]["text"] == cli_translate(run_dir, [line], *args)[0]
    assert "1,234" in cli_translate(run_dir, [line])[0]
    libre = {"q": line, "source": "en", "target": "fr", **asked}
    status, answer = server.json("POST", "/translate", libre)
    assert status == 200 and answer["translatedText"] == cli_translate(run_dir, [line], *args)[0]


@pytest.mark.parametrize("route,body,content_type,status,words", BAD, ids=[b[4] for b in BAD])
def test_bad_input_gets_a_one_line_json_error_and_the_server_stays_up(
    server, route, body, content_type, status, words
):
    headers = {"Content-Type": content_type}
    if "two different" in words:
        headers["X-API-Key"] = "another"
    got, raw = server.request("POST" if body is not None else "GET", route, body, headers=headers)
    assert got == status
    assert b"\n" not in raw.strip() and words in json.loads(raw)["error"]
    assert (
        server.json("POST", "/translate", {"q": "A dog.", "source": "en", "target": "fr"})[0] == 200
    )


@pytest.mark.slow
def test_api_key_queue_limit_and_time_limit(tiny_run, tmp_path_factory):
    # A model that reads long sentences whole (decode.max_segment_tokens 0), so that a request of
    # long lines keeps the decoder busy past the time limit on a fast, quiet machine too.
    whole = trained_copy(
        tiny_run,
        tmp_path_factory,
        "whole",
        decode={"max_segment_tokens": 0},
        max_steps=40,
        checkpoint_every=40,
    )
    long_line = " ".join(["a man with a big red hat rides a small horse"] * 12)
    s = Server(
        whole,
        "--api-key",
        "s3cret",
        "--max-queue",
        "100",
        "--timeout",
        "0.5",
        "--threads",
        "1",
        "--max-chars",
        "100000",
    )
    try:
        q = {"q": "A dog.", "source": "en", "target": "fr"}
        assert s.json("POST", "/translate", q) == (
            400,
            {"error": "Please contact the server operator to get an API key"},
        )
        assert s.json("POST", "/translate", {**q, "api_key": "s3cre"}) == (
            403,
            {"error": "Invalid API key"},
        )
        assert s.json("POST", "/translate", {**q, "api_key": "s3cret"})[0] == 200
        assert (
            s.json("POST", "/v1/translate", {"src": ["A dog."]}, headers={"X-API-Key": "s3cret"})[0]
            == 200
        )
        assert s.json("GET", "/languages")[0] == 200  # no key needed to read what is served
        too_many = {"src": ["A dog."] * 101, "api_key": "s3cret"}
        assert s.json("POST", "/v1/translate", too_many)[0] == 413

        # 20 long lines, each one segment, with their alignments: their decoding outlasts the
        # 0.5 s limit many times over
        slow = {
            "src": [long_line] * 20,
            "beam_size": 4,
            "alignments": True,  # no second pass: the sentences decoded are the ones counted
            "api_key": "s3cret",
        }
        with ThreadPoolExecutor(1) as pool:
            first = pool.submit(s.json, "POST", "/v1/translate", slow)
            deadline = time.monotonic() + 30
            while (
                s.json("GET", "/health")[1]["pending_sentences"] == 0
                and time.monotonic() < deadline
            ):
                time.sleep(0.01)
            # one sentence more than the queue has room for (its second pass may be on); each
            # new, since a sentence from the cache takes no room
            room = 100 - s.json("GET", "/health")[1]["pending_sentences"]
            fresh = [f"A dog number {i}." for i in range(room + 1)]
            status, body = s.json("POST", "/v1/translate", {"src": fresh, "api_key": "s3cret"})
            assert (status, body["error"].split(" (")[0]) == (503, "the queue is full")
            assert first.result() == (504, {"error": "the translation took longer than 0.5 s"})
        deadline = time.monotonic() + 60
        while s.json("GET", "/health")[1]["pending_sentences"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert s.json("POST", "/translate", {**q, "api_key": "s3cret"})[0] == 200
    finally:
        assert s.stop() == 0


@pytest.mark.slow
def test_sigterm_finishes_the_requests_in_flight_and_exits_0(run_dir):
    s = Server(run_dir, "--threads", "1")
    lines = multi30k_lines("test_2016_flickr", "en", 6)
    with ThreadPoolExecutor(6) as pool:
        answers = [
            pool.submit(s.json, "POST", "/v1/translate", {"src": [line] * 4, "beam_size": 4})
            for line in lines
        ]
        deadline = time.monotonic() + 30
        while s.json("GET", "/health")[1]["pending_sentences"] < 12 and time.monotonic() < deadline:
            time.sleep(0.005)
        s.proc.send_signal(signal.SIGTERM)  # with at least 3 requests queued or decoding
        assert [a.result()[0] for a in answers] == [200] * 6
    assert s.proc.wait(60) == 0
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(s.url + "/health", timeout=5)


# ---------------------------------------------------------------------- the page in a browser


def chromium_driver():
    webdriver = pytest.importorskip("selenium.webdriver")
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not binary or not driver_path:
        pytest.skip(
            "Debian's chromium and chromium-driver are not installed "
            "(scripts/setup.sh installs them)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # CSP violations show there
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
    ):
        options.add_argument(flag)
    from selenium.webdriver.chrome.service import Service as ChromeService

    return webdriver.Chrome(service=ChromeService(executable_path=driver_path), options=options)


@pytest.mark.slow
def test_page_translates_and_hovering_a_word_highlights_what_it_attended_to(server, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver = chromium_driver()
    try:
        driver.get(server.url + "/")
        wait = WebDriverWait(driver, 30)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#model option"))
        box = driver.find_element(By.ID, "source")
        box.send_keys("A man is riding a bike.\nTwo dogs play in the snow.")
        driver.find_element(By.ID, "translate").click()
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#heatmap td.cell")) > 0)
        segments = driver.find_elements(By.CSS_SELECTOR, "#segments .segment-text")
        expected = server.json(
            "POST",
            "/v1/translate",
            {"src": ["A man is riding a bike.", "Two dogs play in the snow."], "attention": True},
        )[1]["translations"]
        assert [s.text for s in segments] == [t["text"] for t in expected]
        weights = expected[0]["attention"]["weights"]
        heads = driver.find_elements(By.CSS_SELECTOR, "#heatmap th.src-word")
        assert [h.text for h in heads] == ["A", "man", "is", "riding", "a", "bike."]
        j = len(weights) // 2
        row = weights[j]
        want = {i for i, w in enumerate(row) if w >= 0.2 or i == row.index(max(row))}
        ActionChains(driver).move_to_element(
            driver.find_element(By.CSS_SELECTOR, f"#heatmap th.tgt-word[data-row='{j}']")
        ).perform()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#heatmap td.attended"))
        lit = driver.find_elements(By.CSS_SELECTOR, "#heatmap td.attended")
        assert {int(c.get_attribute("data-col")) for c in lit} == want
        assert {int(c.get_attribute("data-row")) for c in lit} == {j}
        lit_words = driver.find_elements(By.CSS_SELECTOR, "#pair-source .word.attended")
        assert {int(w.get_attribute("data-i")) for w in lit_words} == want
        assert (
            len(driver.find_elements(By.CSS_SELECTOR, "#nbest-list li")) == 2
        )  # the tiny recipe's beam
        driver.save_screenshot(str(tmp_path / "page.png"))
        assert (tmp_path / "page.png").stat().st_size > 10_000
        assert_page_keeps_its_security_policy(server, driver)
    finally:
        driver.quit()


def assert_page_keeps_its_security_policy(server, driver) -> None:
    """The page came with its Content-Security-Policy and worked without breaking it; the
    browser does enforce it (an inline style added now is refused and reported)."""
    with urllib.request.urlopen(server.url + "/", timeout=30) as page:
        assert "script-src 'self'" in page.headers["Content-Security-Policy"]
        assert page.headers["X-Content-Type-Options"] == "nosniff"

    def violations() -> list[str]:
        logged = driver.get_log("browser")
        return [e["message"] for e in logged if "Security Policy" in e["message"]]

    assert violations() == []
    driver.execute_script(
        "const s = document.createElement('style'); s.textContent = 'body { color: red; }';"
        "document.head.appendChild(s);"
    )
    time.sleep(0.5)
    assert any("inline style" in v for v in violations())


@pytest.mark.slow
def test_page_translates_a_pasted_paragraph_whole_and_an_html_document(server):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    paragraph = "A man is riding a bike. Two dogs play in the snow."
    expected = server.json("POST", "/v1/translate", {"src": [paragraph]})[1]["translations"][0]
    assert expected["segments"] == 2  # the server cut the paragraph into its two sentences
    driver = chromium_driver()
    try:
        driver.get(server.url + "/")
        wait = WebDriverWait(driver, 30)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#model option"))
        driver.find_element(By.ID, "source").send_keys(paragraph)
        driver.find_element(By.ID, "translate").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#segments .segment-text"))
        (shown,) = driver.find_elements(By.CSS_SELECTOR, "#segments .segment-text")
        assert shown.text == expected["text"].strip()
        assert driver.find_element(By.ID, "timing").text.startswith("2 sentences")
        # both sentences' words in one heat map, each target word attending to its own sentence
        heads = driver.find_elements(By.CSS_SELECTOR, "#heatmap th.src-word")
        assert [h.text for h in heads] == paragraph.split()

        pytest.importorskip("nmt_cli.documents.markup")  # the HTML reader of the document layer
        document = "<p>A man is riding a <b>bike</b>.</p>\n<p>Two dogs play in the snow.</p>"
        html = server.json("POST", "/v1/translate", {"src": [document], "format": "html"})[1]
        box = driver.find_element(By.ID, "source")
        box.clear()
        box.send_keys(document)
        Select(driver.find_element(By.ID, "format")).select_by_value("html")
        driver.find_element(By.ID, "translate").click()
        want = " ".join(html["translations"][0]["text"].split())  # as the page lays it out
        wait.until(
            lambda d: (
                [
                    " ".join(s.text.split())
                    for s in d.find_elements(By.CSS_SELECTOR, "#segments .segment-text")
                ]
                == [want]
            )
        )
        assert "<p>" in want and "<b>" in want
    finally:
        driver.quit()


def test_a_sentence_cut_into_clauses_has_one_confidence_and_no_capital_inside(server):
    lines = [x.rstrip(".") for x in multi30k_lines("test_2016_flickr", "en", 6)]
    long = ", and ".join(line[0].lower() + line[1:] for line in lines) + "."
    status, body = server.json(
        "POST", "/v1/translate", {"src": [long], "nbest": 2, "alignments": True}
    )
    assert status == 200, body
    (answer,) = body["translations"]
    assert answer["segments"] > 1
    assert 0 < answer["confidence"] <= 1
    assert len(answer["nbest"]) == 2 and answer["nbest"][0]["text"] == answer["text"]
    words = answer["text"].split()
    pairs = [tuple(map(int, p.split("-"))) for p in answer["alignment"].split()]
    assert max(j for _, j in pairs) < len(words) and max(i for i, _ in pairs) < len(long.split())
