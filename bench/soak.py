"""A soak of `nmt serve`: concurrent clients for minutes, with varied and hostile requests.

    python bench/soak.py -m runs/en-fr --src test.en [--clients 16] [--minutes 10] \
        [--hostile 0.05] [--seed 1] [--extra "--max-wait-ms 20"]

Starts `nmt serve -m RUN --port 0` (its defaults, plus --extra) and runs --clients threads,
each with one kept-alive connection, for --minutes. Every request is drawn anew, so that no
cache can hide a leak: one of LibreTranslate's /translate (1 to 3 lines of --src, each with a
random number and word case changed, now and then as HTML, with 0 to 2 alternatives), the
native /v1/translate (n-best, alignments), or /detect; and, with probability --hostile, one of
the hostile requests of docs/reliability.md (nested JSON, a lone surrogate, markup 1,600 deep,
a body over the limit, broken JSON), which must be refused with a 4xx.

Prints one line a minute: requests answered, hostile ones refused, errors (a 5xx, a refused
valid request, an answered hostile one, a broken connection), p50 / p95 / p99 latency of the
valid requests and the server's resident memory (VmRSS, Linux). Only 127.0.0.1 is addressed.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import shlex
import signal
import threading
import time
from pathlib import Path

from serve_load import percentile, start_server

HOSTILE = [
    ("/translate", b'{"q": ' + b"[" * 990 + b"]" * 990 + b"}"),
    ("/v1/translate", b'{"src": ["a \\ud800 b"]}'),
    ("/translate", b'{"q": "a", "source": "en", "target": "fr", "format": "\\ud800"}'),
    (
        "/translate",
        json.dumps({"q": "<b>" * 1600, "source": "en", "target": "fr", "format": "html"}).encode(),
    ),
    ("/translate", b'{"q": "' + b"a" * 1_000_000 + b'"}'),
    ("/detect", b'{"q": ["unclosed'),
]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def varied(rng: random.Random, line: str) -> str:
    """``line`` with a random number put in and, now and then, its case changed."""
    words = line.split()
    words.insert(rng.randrange(len(words) + 1), str(rng.randrange(1, 100_000)))
    text = " ".join(words)
    roll = rng.random()
    return text.upper() if roll < 0.1 else text.title() if roll < 0.2 else text


def valid_request(rng: random.Random, lines: list[str]) -> tuple[str, bytes]:
    texts = [varied(rng, rng.choice(lines)) for _ in range(rng.randint(1, 3))]
    kind = rng.random()
    if kind < 0.5:
        body: dict = {"q": texts if len(texts) > 1 else texts[0], "source": "en", "target": "fr"}
        body["alternatives"] = rng.randint(0, 2)
        if rng.random() < 0.2:
            body.update(q=f"<p>{texts[0]} <b>{texts[-1]}</b></p>", format="html")
        return "/translate", json.dumps(body).encode()
    if kind < 0.9:
        nbest = rng.randint(1, 2)
        body = {"src": texts, "nbest": nbest, "alignments": rng.random() < 0.5}
        return "/v1/translate", json.dumps(body).encode()
    return "/detect", json.dumps({"q": texts[0]}).encode()


class Tally:
    """What the clients saw in the current minute."""

    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> tuple:
        with self.lock:
            taken = getattr(self, "latencies", []), getattr(self, "refused", 0)
            taken += (getattr(self, "errors", 0), getattr(self, "first_error", ""))
            self.latencies, self.refused, self.errors, self.first_error = [], 0, 0, ""
        return taken

    def error(self, what: str) -> None:
        with self.lock:
            self.errors += 1
            self.first_error = self.first_error or what


def client(port: int, lines: list[str], hostile: float, seed: int, stop, tally: Tally) -> None:
    rng = random.Random(seed)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    while not stop.is_set():
        bad = rng.random() < hostile
        path, body = rng.choice(HOSTILE) if bad else valid_request(rng, lines)
        start = time.perf_counter()
        try:
            conn.request("POST", path, body, {"Content-Type": "application/json"})
            answer = conn.getresponse()
            payload = answer.read()
        except (OSError, http.client.HTTPException) as exc:
            tally.error(f"{path}: {type(exc).__name__}")
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            continue
        took = time.perf_counter() - start
        if bad and 400 <= answer.status < 500:
            with tally.lock:
                tally.refused += 1
        elif not bad and answer.status == 200:
            with tally.lock:
                tally.latencies.append(took)
        else:
            tally.error(f"{path}: {answer.status} {payload[:120]!r}")
    conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-m", "--model", required=True)
    parser.add_argument("--src", required=True, help="source sentences, one a line")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--hostile", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--extra", default="", help="more `nmt serve` options, one string")
    args = parser.parse_args()
    lines = [x for x in Path(args.src).read_text(encoding="utf-8").splitlines() if x.strip()]
    proc, port = start_server(args.model, args.threads, shlex.split(args.extra))
    stop, tally = threading.Event(), Tally()
    workers = [
        threading.Thread(
            target=client, args=(port, lines, args.hostile, args.seed + k, stop, tally)
        )
        for k in range(args.clients)
    ]
    print(f"soak: {args.clients} clients, {args.minutes:g} min, hostile share {args.hostile:g}")
    print("minute  requests  refused  errors  p50_ms  p95_ms  p99_ms  rss_mib")
    total = [0, 0, 0]
    try:
        for w in workers:
            w.start()
        minute = 0
        while minute < args.minutes:
            time.sleep(min(60.0, 60 * (args.minutes - minute)))
            minute += 1
            latencies, refused, errors, first = tally.reset()
            ms = [1000 * percentile(latencies, q) if latencies else 0 for q in (50, 95, 99)]
            print(
                f"{minute:6d}  {len(latencies):8d}  {refused:7d}  {errors:6d}  {ms[0]:6.0f}  "
                f"{ms[1]:6.0f}  {ms[2]:6.0f}  {rss_mib(proc.pid):7.0f}"
                + (f"  first error: {first}" if first else ""),
                flush=True,
            )
            total = [total[0] + len(latencies), total[1] + refused, total[2] + errors]
    finally:
        stop.set()
        for w in workers:
            w.join(150)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    print(
        f"total: {total[0]} requests answered, {total[1]} hostile refused, {total[2]} errors; "
        f"server exit code {code}"
    )


if __name__ == "__main__":
    main()
