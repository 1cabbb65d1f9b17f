"""Load on `nmt serve` from concurrent clients on the loopback interface, against its baselines.

    python bench/serve_load.py -m runs/en-fr --src test.en --clients 32 --threads 2 \
        [--requests 1000] [--seconds 120] [--sentence "A dog runs."] [--modes file,serial,batched]
    python bench/serve_load.py -m runs/en-fr --src test.en --modes steady --clients 16 \
        --seconds 600 [--max-sentences 4] [--rss-every 10]

Each client is a thread with one keep-alive connection that posts one sentence per request to
POST /translate (LibreTranslate's route) and waits for the answer before the next. Requests are
bounded in count (--requests, default: one per line of --src) and time (--seconds); only
127.0.0.1 is ever addressed. Modes, run back to back:

- file: the same sentences in one file through a whole `nmt translate -i FILE` process (start-up
  and model loading included, as bench/decode_speed.py measures it), OMP_NUM_THREADS=--threads;
- file-inproc: `nmt translate`'s code path (translate_stream) in this process, model loading
  not timed: the stricter baseline;
- serial: `nmt serve --max-batch-tokens 0`: one request at a time, --threads CPU threads;
- serial-1t: the same with one CPU thread (on a busy machine two OpenMP threads can be slower);
- batched: `nmt serve` with batching across requests (--max-batch-tokens, --max-wait-ms).
- batched-ops: the same with --metrics and per-client rate limits on (set far above the load).
- batched-nocache: batched with --cache-size 0: no translation cache, no memory.
- batched-recall: batched with the default cache and --suggestions, a file of 2,000 suggestions
  none of the sentences sent matches, so both are looked up and miss (each line is sent once):
  what they cost. Compare with batched-nocache, run alternately (--modes
  batched-nocache,batched-recall,batched-nocache,batched-recall).
- steady: the server's defaults under a steady load for --seconds, each request a random run of
  1 to --max-sentences consecutive lines of --src in one list ("q": [...]); the server's
  resident memory (VmRSS) is sampled every --rss-every seconds and one line printed per sample.
  Not run by default (not in --modes' default).

Prints per mode: requests/s, sentences/s and p50/p95/p99 latency (and for a server, the
sentences a batch on average, from /health); the batched server's
sentences/s as a multiple of the others'; and how many of the servers' answers equal what
`nmt translate` wrote for the same line. `--record FILE` writes each mode's sentences/s and
latency as a record for bench/report.py. For steady, the mode's line is followed by the server's
RSS at the start (after the warm-up), after warm-up (the first sample at or after 30 s), at the end
and at most; the record gives them as columns too.
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import record

ROOT = Path(__file__).resolve().parent.parent
WARMED_UP_S = 30  # steady: the RSS sample at or after this many seconds is "after warm-up"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def start_server(model: str, threads: int, extra: list[str]) -> tuple[subprocess.Popen, int]:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nmt_cli",
            "serve",
            "-m",
            model,
            "--port",
            "0",
            "--threads",
            str(threads),
            *extra,
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env=env,
        text=True,
    )
    line = proc.stderr.readline()
    if "http://127.0.0.1:" not in line:
        proc.kill()
        sys.exit(f"nmt serve did not start: {line}{proc.stderr.read()}")
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    return proc, int(line.split("http://127.0.0.1:")[1].split("/")[0])


def load(port: int, pair: tuple[str, str], lines: list[str], clients: int, seconds: float) -> dict:
    """Send ``lines`` one per request from ``clients`` threads; stop early after ``seconds``."""
    latencies: list[float] = []
    errors: list[str] = []
    answers: list[str | None] = [None] * len(lines)
    lock = threading.Lock()
    next_line = iter(range(len(lines)))
    deadline = time.monotonic() + seconds

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while time.monotonic() < deadline:
            with lock:
                i = next(next_line, None)
            if i is None:
                break
            body = json.dumps({"q": lines[i], "source": pair[0], "target": pair[1]})
            start = time.perf_counter()
            conn.request("POST", "/translate", body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            payload = resp.read()
            took = time.perf_counter() - start
            with lock:
                if resp.status == 200:
                    latencies.append(took)
                    answers[i] = json.loads(payload)["translatedText"]
                else:
                    errors.append(payload.decode()[:200])
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    return {
        "wall_s": wall,
        "requests": len(latencies),
        "errors": len(errors),
        "first_error": errors[:1],
        "latencies": latencies,
        "answers": answers,
    }


def health(port: int) -> dict:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/health")
    body = json.loads(conn.getresponse().read())
    conn.close()
    return body


def serve_mode(args, lines: list[str], pair, extra: list[str], threads: int | None = None) -> dict:
    proc, port = start_server(args.model, threads or args.threads, extra)
    try:
        load(port, pair, lines[:8], 1, 60)  # warm-up: first calls pay for lazy initialisation
        before = health(port)
        r = load(port, pair, lines, args.clients, args.seconds)
        after = health(port)
        r["batches"] = after["decoded_batches"] - before["decoded_batches"]
        r["batched_sentences"] = after["decoded_sentences"] - before["decoded_sentences"]
        return r
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)


def unmatched_suggestions(pair: tuple[str, str]) -> str:
    """A --suggestions file of 2,000 suggestions for ``pair`` that no sentence matches."""
    import tempfile

    from nmt_cli.serving.suggestions import SuggestionStore

    path = Path(tempfile.mkdtemp()) / "suggestions.db"
    store = SuggestionStore(path)
    for i in range(2_000):
        store.add(*pair, f"unmatched sentence number {i}", f"phrase sans rapport {i}")
    store.close()
    return str(path)


def rss_mb(pid: int) -> float:
    """A process's resident memory (VmRSS of /proc/PID/status) in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"/proc/{pid}/status has no VmRSS")


def steady_mode(args, lines: list[str], pair) -> dict:
    """The server's defaults under ``--clients`` threads sending 1 to ``--max-sentences`` lines a
    request for ``--seconds``; its RSS sampled every ``--rss-every`` seconds."""
    proc, port = start_server(args.model, args.threads, [])
    try:
        load(port, pair, lines[:8], 1, 60)  # warm-up: first calls pay for lazy initialisation
        latencies: list[float] = []
        errors: list[str] = []
        sentences = [0]
        lock = threading.Lock()
        most = max(1, min(args.max_sentences, len(lines)))
        start = time.monotonic()
        deadline = start + args.seconds

        def client(seed: int) -> None:
            rng = random.Random(seed)
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            while time.monotonic() < deadline:
                k = rng.randint(1, most)
                i = rng.randrange(len(lines) - k + 1)
                body = json.dumps({"q": lines[i : i + k], "source": pair[0], "target": pair[1]})
                sent = time.perf_counter()
                try:
                    conn.request("POST", "/translate", body, {"Content-Type": "application/json"})
                    resp = conn.getresponse()
                    payload = resp.read()
                except (OSError, http.client.HTTPException) as e:
                    with lock:
                        errors.append(repr(e)[:200])
                    conn.close()  # reconnects on the next request
                    continue
                took = time.perf_counter() - sent
                with lock:
                    if resp.status == 200 and len(json.loads(payload)["translatedText"]) == k:
                        latencies.append(took)
                        sentences[0] += k
                    else:
                        errors.append(f"{resp.status} {payload.decode()[:200]}")
            conn.close()

        samples = [(0.0, rss_mb(proc.pid), 0)]
        print(f"steady   t {0:6.0f} s  rss {samples[0][1]:8.1f} MB  requests {0:7d}", flush=True)
        threads = [threading.Thread(target=client, args=(seed,)) for seed in range(args.clients)]
        for t in threads:
            t.start()
        n = 1
        while start + n * args.rss_every <= deadline:
            time.sleep(max(0.0, start + n * args.rss_every - time.monotonic()))
            n += 1
            with lock:
                done = len(latencies)
            samples.append((time.monotonic() - start, rss_mb(proc.pid), done))
            t_s, mb, _ = samples[-1]
            print(f"steady   t {t_s:6.0f} s  rss {mb:8.1f} MB  requests {done:7d}", flush=True)
        for t in threads:
            t.join()  # each client ends after its last answer (at most 120 s past the deadline)
        wall = time.monotonic() - start
        samples.append((wall, rss_mb(proc.pid), len(latencies)))
        print(
            f"steady   t {wall:6.0f} s  rss {samples[-1][1]:8.1f} MB  requests "
            f"{len(latencies):7d}  (end)",
            flush=True,
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
    warm = next((mb for t_s, mb, _ in samples if t_s >= WARMED_UP_S), None)
    return {
        "wall_s": wall,
        "requests": len(latencies),
        "sentences": sentences[0],
        "errors": len(errors),
        "first_error": errors[:1],
        "latencies": latencies,
        "rss_samples": [(round(t_s, 1), round(mb, 1), done) for t_s, mb, done in samples],
        "rss_start_mb": round(samples[0][1], 1),
        "rss_after_warmup_mb": None if warm is None else round(warm, 1),
        "rss_end_mb": round(samples[-1][1], 1),
        "rss_max_mb": round(max(mb for _, mb, _ in samples), 1),
    }


def file_process_mode(args, lines: list[str]) -> dict:
    """A whole `nmt translate -i FILE` process, as a user runs it."""
    import tempfile

    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src.txt"
        src.write_text("\n".join(lines) + "\n", encoding="utf-8")
        start = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "nmt_cli",
                "translate",
                "-m",
                args.model,
                "-i",
                str(src),
                "-o",
                str(Path(tmp) / "out.txt"),
            ],
            env=env,
            check=True,
        )
        wall = time.perf_counter() - start
    return {
        "wall_s": wall,
        "requests": 1,
        "errors": 0,
        "first_error": [],
        "latencies": [wall],
        "sentences": len(lines),
    }


def file_mode(args, lines: list[str]) -> dict:
    """`nmt translate -i FILE`'s code path, timed without start-up and model loading."""
    from nmt_cli.documents.lines import OutputOptions, translate_stream
    from nmt_cli.translation.translator import Translator

    translator = Translator.load(args.model, device="cpu", threads=args.threads)
    translator.translate(lines[:8])
    data = ("\n".join(lines) + "\n").encode()
    out = io.StringIO()
    start = time.perf_counter()
    translate_stream(translator, io.BytesIO(data), out, interactive=False, out=OutputOptions())
    wall = time.perf_counter() - start
    return {
        "wall_s": wall,
        "requests": 1,
        "errors": 0,
        "first_error": [],
        "latencies": [wall],
        "sentences": len(lines),
        "answers": out.getvalue().split("\n")[:-1],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True, help="run dir or checkpoint")
    ap.add_argument("--src", type=Path, help="sentences, one per line (plain or .gz)")
    ap.add_argument("--sentence", help="send this one sentence instead of --src's lines")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument(
        "--requests", type=int, default=0, help="requests at most (0: one per line of --src)"
    )
    ap.add_argument("--seconds", type=float, default=300, help="stop sending after this long")
    ap.add_argument(
        "--threads", type=int, default=2, help="CPU threads of nmt translate and of the server"
    )
    ap.add_argument(
        "--modes", default="file,file-inproc,serial,serial-1t,batched", help="also: steady"
    )
    ap.add_argument("--max-batch-tokens", type=int, default=1024)
    ap.add_argument("--max-wait-ms", type=float, default=50.0, help="as nmt serve's")
    ap.add_argument(
        "--max-sentences", type=int, default=4, help="steady: 1 to this many lines a request"
    )
    ap.add_argument(
        "--rss-every", type=float, default=10, help="steady: sample the server's RSS this often (s)"
    )
    ap.add_argument("--record", type=Path, help="write the figure here (bench/records/NAME.json)")
    args = ap.parse_args()
    if args.rss_every <= 0 or args.max_sentences < 1:
        sys.exit("--rss-every must be above 0 and --max-sentences at least 1")

    sys.path.insert(0, str(ROOT))
    from nmt_cli.data.corpora import read_lines
    from nmt_cli.translation.translator import Translator

    if args.sentence:
        lines = [args.sentence] * (args.requests or 200)
    elif args.src:
        lines = [line for line in read_lines(args.src) if line.strip()]
        if args.requests:
            lines = (lines * (args.requests // max(len(lines), 1) + 1))[: args.requests]
    else:
        sys.exit("give --src FILE or --sentence TEXT")
    recipe = Translator.load(args.model, device="cpu").recipe
    pair = (recipe.src, recipe.tgt)
    cpu = (
        next(
            (
                line.split(":", 1)[1].strip()
                for line in open("/proc/cpuinfo")
                if line.startswith("model name")
            ),
            platform.processor(),
        )
        if Path("/proc/cpuinfo").exists()
        else platform.processor()
    )
    print(
        f"# {args.model} ({recipe.name}, beam {recipe.decode.beam_size}); {len(lines)} sentences, "
        f"{args.clients} clients, {args.threads} threads; {cpu}, {os.cpu_count()} CPUs; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    results = {}
    runs: dict[str, list[float]] = {}
    for mode in args.modes.split(","):
        if mode == "file":
            r = file_process_mode(args, lines)
        elif mode == "file-inproc":
            r = file_mode(args, lines)
        elif mode in ("serial", "serial-1t"):
            r = serve_mode(
                args,
                lines,
                pair,
                ["--max-batch-tokens", "0"],
                threads=1 if mode == "serial-1t" else args.threads,
            )
        elif mode in ("batched", "batched-ops", "batched-nocache", "batched-recall"):
            # batched-ops: the same with metrics and per-client rate limits counted (limits
            # far above the load, so none is refused)
            ops = {
                "batched-ops": [
                    "--metrics",
                    "--rate-limit",
                    "100000000",
                    "--char-rate-limit",
                    "1000000000",
                ],
                "batched-nocache": ["--cache-size", "0"],
                "batched-recall": ["--suggestions", unmatched_suggestions(pair)],
            }
            r = serve_mode(
                args,
                lines,
                pair,
                [
                    "--max-batch-tokens",
                    str(args.max_batch_tokens),
                    "--max-wait-ms",
                    str(args.max_wait_ms),
                ]
                + ops.get(mode, []),
            )
        elif mode == "steady":
            r = steady_mode(args, lines, pair)
        else:
            sys.exit(
                f"--modes: unknown mode {mode!r} "
                "(file, file-inproc, serial, serial-1t, batched, batched-ops, batched-nocache, "
                "batched-recall, steady)"
            )
        sentences = r.get("sentences", r["requests"])
        r["sent_per_s"] = sentences / r["wall_s"]
        lat = [x * 1000 for x in r["latencies"]]
        where = "whole file" if mode.startswith("file") else "per request"
        print(
            f"{mode:<8} {r['wall_s']:7.2f} s  {r['requests'] / r['wall_s']:8.1f} req/s  "
            f"{r['sent_per_s']:8.1f} sent/s  latency ({where}) p50 {percentile(lat, 50):8.1f} ms  "
            f"p95 {percentile(lat, 95):8.1f} ms  p99 {percentile(lat, 99):8.1f} ms  "
            f"mean {statistics.fmean(lat):8.1f} ms  errors {r['errors']} {r['first_error'] or ''}",
            flush=True,
        )
        if r.get("batches"):
            print(
                f"{mode:<8} {r['batched_sentences']} sentences decoded in {r['batches']} batches, "
                f"{r['batched_sentences'] / r['batches']:.1f} a batch",
                flush=True,
            )
        if mode == "steady":
            print(
                f"steady   rss_start_mb {r['rss_start_mb']}  rss_after_warmup_mb "
                f"{r['rss_after_warmup_mb']} (first sample at or after {WARMED_UP_S} s)  "
                f"rss_end_mb {r['rss_end_mb']}  rss_max_mb {r['rss_max_mb']}",
                flush=True,
            )
        results[mode] = r
        runs.setdefault(mode, []).append(r["sent_per_s"])
    if "batched-recall" in runs and "batched-nocache" in runs:
        a, b = statistics.fmean(runs["batched-recall"]), statistics.fmean(runs["batched-nocache"])
        print(
            f"batched-recall / batched-nocache: {a / b:.3f}x sentences/s (means of "
            f"{len(runs['batched-recall'])} and {len(runs['batched-nocache'])} runs)"
        )
    if "file-inproc" in results:  # a sentence must not depend on what it was batched with
        written = results["file-inproc"]["answers"]
        for mode in ("serial", "serial-1t", "batched", "batched-ops"):
            if mode in results:
                got = [(a, w) for a, w in zip(results[mode]["answers"], written) if a is not None]
                same = sum(a == w for a, w in got)
                print(f"{mode}: {same} of {len(got)} answers equal nmt translate's")
    if "batched" in results:
        for other in ("file", "file-inproc", "serial", "serial-1t"):
            if other in results:
                ratio = results["batched"]["sent_per_s"] / results[other]["sent_per_s"]
                print(f"batched / {other}: {ratio:.2f}x sentences/s")
    if "batched-ops" in results:
        for other in ("batched", "file", "file-inproc"):
            if other in results:
                ratio = results["batched-ops"]["sent_per_s"] / results[other]["sent_per_s"]
                print(f"batched-ops / {other}: {ratio:.2f}x sentences/s")
    if args.record:
        rows = []
        rss = ("rss_start_mb", "rss_after_warmup_mb", "rss_end_mb", "rss_max_mb")
        steady = "steady" in results
        for mode, r in results.items():
            lat = [x * 1000 for x in r["latencies"]]
            spread = "whole file" if mode.startswith("file") else "per request"
            rows.append(
                [
                    mode,
                    round(r["sent_per_s"], 1),
                    f"{percentile(lat, 50):.1f} / {percentile(lat, 95):.1f} / "
                    f"{percentile(lat, 99):.1f} ({spread})",
                    r["errors"],
                ]
                + ([r.get(key) for key in rss] if steady else [])
            )
        what = f'"{args.sentence}"' if args.sentence else f"lines of {args.src}"
        steady_about = (
            f" `steady` is the server's defaults with each request 1 to {args.max_sentences} "
            f"consecutive lines, for {args.seconds:g} s; its server's resident memory (VmRSS) "
            f"sampled every {args.rss_every:g} s: at the start (after a warm-up), at the first "
            f"sample at or after {WARMED_UP_S} s, at the end and at most."
            if steady
            else ""
        )
        record.write(
            args.record,
            figure="nmt serve under load",
            about=f"{args.clients} clients on the loopback interface sending {what}, one per "
            f"request, to `nmt serve -m {args.model}` (beam {recipe.decode.beam_size}); `file` is "
            "`nmt translate -i FILE` as a whole process, `file-inproc` the same decoding in "
            "process, `serial` one request at a time, `batched` the server's defaults."
            + steady_about,
            columns=["mode", "sentences/s", "latency p50 / p95 / p99 (ms)", "errors"]
            + (
                ["RSS start (MB)", f"RSS at {WARMED_UP_S} s (MB)", "RSS end (MB)", "RSS max (MB)"]
                if steady
                else []
            ),
            rows=rows,
            threads=args.threads,
            machine=f"{cpu}, {os.cpu_count()} CPUs",
        )


if __name__ == "__main__":
    main()
