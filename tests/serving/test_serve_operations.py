"""What operators of `nmt serve` rely on, against a real server: Prometheus metrics, liveness and
readiness, per-client rate limits answered 429 as LibreTranslate answers them, the access log
(texts only when asked)."""

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("prometheus_client")

from test_libretranslate import client_run  # noqa: E402, F401  (the shared tiny model)
from test_serve import Server  # noqa: E402

Q = {"q": "A dog runs.", "source": "en", "target": "fr"}


def metric(text: str, name: str, **labels) -> float:
    """The value of one sample in a Prometheus text exposition."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return 0.0


def test_metrics_readiness_rate_limits_and_access_log(client_run):  # noqa: F811
    s = Server(
        client_run,
        "--threads",
        "1",
        "--metrics",
        "--rate-limit",
        "6",
        "--char-rate-limit",
        "60",
        "--access-log",
    )
    try:
        assert s.json("GET", "/health")[1]["status"] == "ok"
        assert s.json("GET", "/ready") == (200, {"status": "ready", "models": ["tiny"]})
        # more characters than a minute allows: refused, and not counted
        big = {**Q, "q": "a dog " * 11}
        assert s.json("POST", "/translate", big) == (429, {"error": "Slowdown: 60 per 1 minute"})
        assert s.json("POST", "/translate", Q)[0] == 200
        assert s.json("POST", "/translate", {**Q, "q": ["A cat.", "A man."]})[0] == 200
        assert s.json("POST", "/translate", {**Q, "target": "xx"})[0] == 400
        status, raw = s.request("GET", "/metrics")
        text = raw.decode()
        assert status == 200
        assert metric(text, "nmt_http_requests_total", route="/translate", status="200") == 2
        assert metric(text, "nmt_http_errors_total", route="/translate", status="400") == 1
        assert metric(text, "nmt_http_errors_total", route="/translate", status="429") == 1
        assert metric(text, "nmt_http_request_duration_seconds_count", route="/translate") == 4
        assert metric(text, "nmt_decoded_sentences_total", model="tiny") == 3
        assert metric(text, "nmt_decoded_characters_total", model="tiny") == len("A dog runs.") + 12
        assert metric(text, "nmt_batch_sentences_count") >= 2
        assert metric(text, "nmt_batch_sentences_sum") == 3
        assert "nmt_queue_sentences 0.0" in text
        # 2 requests counted so far (one refused before translating is not); 4 more pass, the
        # next is refused
        for _ in range(4):
            assert s.json("POST", "/detect", {"q": "A dog."})[0] == 200
        assert s.json("POST", "/translate", Q) == (429, {"error": "Slowdown: 6 per 1 minute"})
        assert s.json("GET", "/health")[0] == 200  # liveness and metrics are never limited
        assert s.json("GET", "/ready")[0] == 200
    finally:
        assert s.stop() == 0
    log = [line for line in s.log if " /translate " in line or " /detect " in line]
    assert len(log) >= 9 and all("A dog" not in line for line in log)
    first = log[1].split()
    assert first[1:5] == ["127.0.0.1", "POST", "/translate", "200"] and first[6] == "chars=11"


def test_the_access_log_shows_texts_only_when_asked(client_run):  # noqa: F811
    s = Server(client_run, "--threads", "1", "--access-log", "--log-texts")
    try:
        assert s.json("POST", "/translate", Q)[0] == 200
    finally:
        assert s.stop() == 0
    (line,) = [line for line in s.log if " /translate " in line]
    assert line.rstrip().endswith('texts=["A dog runs."]')


def test_serve_option_defaults_are_the_settings_defaults():
    """`nmt serve`'s options take their defaults from ServeSettings, so the CLI and the Python
    API serve alike."""
    import dataclasses

    import typer

    from nmt_cli.cli.app import app
    from nmt_cli.serving.settings import ServeSettings

    serve = typer.main.get_command(app).commands["serve"]
    options = {p.name: p.default for p in serve.params}
    renamed = {
        "timeout": "timeout_s",
        "rate_limit": "requests_per_minute",
        "char_rate_limit": "chars_per_minute",
        "keep_alive": "keep_alive_s",
    }
    settings = {f.name: f.default for f in dataclasses.fields(ServeSettings)}
    compared = 0
    for option, default in options.items():
        field = renamed.get(option, option)
        if field in settings and settings[field] is not dataclasses.MISSING and default is not None:
            assert default == settings[field], option
            compared += 1
    assert compared >= 10, options  # host, port, batching, limits, timeout, threads, ...
