"""What bounds slow and many clients of `nmt serve`, measured on 127.0.0.1.

    python bench/slow_clients.py -m runs/en-fr [--slow 100] [--seconds 30] [--extra "..."]

Starts `nmt serve -m RUN --port 0` (with --extra's options) and measures, in turn:

- slow header senders: --slow connections each sending its request's headers one byte a
  second; after --seconds, how many are still open, and a normal client's latency meanwhile;
- slow body senders: --slow connections each sending whole headers, then its body one byte a
  second; after --seconds, how many are still open and what they were answered;
- past --limit-concurrency: as many idle connections as the server's limit, then a normal
  request: its status;
- idle kept-alive connections: one request each, then idle; how many are open after the
  keep-alive time and a second;
- SIGTERM with kept-alive connections: a long request in flight, SIGTERM, then a request on
  an idle kept-alive connection and one on a new connection: what each gets.

Prints one line per measurement. Only 127.0.0.1 is ever addressed.
"""

from __future__ import annotations

import argparse
import http.client
import json
import shlex
import signal
import socket
import threading
import time

from serve_load import start_server

HEAD = b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Pad: "


def normal_request(port: int, text: str = "A dog runs.") -> tuple[int | str, float]:
    """(status or the error's name, seconds) of one LibreTranslate request on a new connection."""
    start = time.perf_counter()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("POST", "/translate", json.dumps({"q": text, "source": "en", "target": "fr"}))
        status = conn.getresponse().status
        conn.close()
    except OSError as exc:
        status = type(exc).__name__
    return status, time.perf_counter() - start


def read_what_came(sock: socket.socket) -> tuple[bool, bytes]:
    """(whether the server still holds ``sock`` open, what it sent on it so far)."""
    sock.setblocking(False)
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return False, data
            data += chunk
    except BlockingIOError:
        return True, data
    except OSError:
        return False, data
    finally:
        sock.setblocking(True)


def still_open(sock: socket.socket) -> bool:
    return read_what_came(sock)[0]


def slow_headers(port: int, count: int, seconds: float) -> None:
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]
    for s in socks:
        s.sendall(HEAD)
    latencies = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for s in socks:
            try:
                s.sendall(b"a")
            except OSError:
                pass
        latencies.append(normal_request(port))
        time.sleep(1)
    open_now = sum(still_open(s) for s in socks)
    worst = max(t for _, t in latencies)
    statuses = sorted({str(s) for s, _ in latencies})
    print(
        f"slow header senders: {count} sending a byte a second; after {seconds:g} s "
        f"{open_now} still open; normal requests meanwhile: {'/'.join(statuses)}, "
        f"at most {1000 * worst:.0f} ms"
    )
    for s in socks:
        s.close()


def slow_bodies(port: int, count: int, seconds: float) -> None:
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]
    for s in socks:
        s.sendall(HEAD + b"1\r\nContent-Length: 1000\r\n\r\n{")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for s in socks:
            try:
                s.sendall(b" ")
            except OSError:
                pass
        time.sleep(1)
    seen = [read_what_came(s) for s in socks]
    open_now = sum(held for held, _ in seen)
    answers = {data.split(b"\r\n")[0].decode() for _, data in seen}
    for s in socks:
        s.close()
    print(
        f"slow body senders: {count} sending a byte a second; after {seconds:g} s {open_now} "
        f"still open; answered: {', '.join(sorted(a for a in answers if a)) or 'nothing'}"
    )


def past_the_limit(port: int, limit: int) -> None:
    if not limit:
        print("past --limit-concurrency: no limit set")
        return
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(limit)]
    time.sleep(0.5)
    status, took = normal_request(port)
    for s in socks:
        s.close()
    time.sleep(0.5)
    after, _ = normal_request(port)
    print(
        f"past --limit-concurrency {limit}: {limit} idle connections open, a normal request gets "
        f"{status} in {1000 * took:.0f} ms; once they close: {after}"
    )


def idle_keep_alive(port: int, count: int, keep_alive: float) -> None:
    conns = []
    for _ in range(count):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/health")
        conn.getresponse().read()
        conns.append(conn)
    time.sleep(keep_alive + 1)
    open_now = sum(still_open(c.sock) for c in conns)
    print(f"idle kept-alive: {count} connections; {keep_alive + 1:g} s later {open_now} open")
    for c in conns:
        c.close()


def sigterm_with_kept_alive(model: str, extra: list[str]) -> None:
    proc, port = start_server(model, 1, extra)
    idle = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    idle.request("GET", "/health")
    idle.getresponse().read()
    long = json.dumps({"src": ["a man with a big red hat rides a small horse"] * 64})
    busy = threading.Thread(
        target=lambda: _post(port, "/v1/translate", long), daemon=True
    )  # keeps the server shutting down for a while
    busy.start()
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    try:
        idle.request(
            "POST", "/translate", json.dumps({"q": "A dog.", "source": "en", "target": "fr"})
        )
        kept = idle.getresponse().status
    except OSError as exc:
        kept = type(exc).__name__
    except http.client.HTTPException as exc:
        kept = type(exc).__name__
    fresh, _ = normal_request(port)
    busy.join(60)
    code = proc.wait(60)
    print(
        f"SIGTERM: a request on an idle kept-alive connection gets {kept}; on a new connection "
        f"{fresh}; the request in flight was answered; exit code {code}"
    )


def _post(port: int, path: str, body: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request("POST", path, body)
    return conn.getresponse().status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-m", "--model", required=True)
    parser.add_argument("--slow", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--extra", default="", help="more `nmt serve` options, one string")
    args = parser.parse_args()
    extra = shlex.split(args.extra)

    def option(name: str, default: float) -> float:
        return float(extra[extra.index(name) + 1]) if name in extra else default

    from nmt_cli.serving.settings import ServeSettings

    defaults = ServeSettings()
    limit = int(option("--limit-concurrency", defaults.limit_concurrency))
    keep_alive = option("--keep-alive", defaults.keep_alive_s)
    proc, port = start_server(args.model, 1, extra)
    try:
        shown = " ".join(extra) or "(defaults)"
        print(f"nmt serve {shown}: limit {limit}, keep-alive {keep_alive:g} s")
        slow_headers(port, args.slow, args.seconds)
        slow_bodies(port, args.slow, args.seconds)
        past_the_limit(port, limit)
        idle_keep_alive(port, 50, keep_alive)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    sigterm_with_kept_alive(args.model, extra)


if __name__ == "__main__":
    main()
