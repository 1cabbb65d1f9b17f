"""`nmt translate` on a file far larger than memory should hold: its resident memory over time.

Writes a text file of ``--gigabytes`` GB made of Multi30k test_2016_flickr lines, in paragraphs
of one to three sentences (so the document layer cuts lines into sentences all along), runs
``nmt translate -i FILE`` (greedy search, one thread) with its output to a file, samples the
process's resident memory (VmRSS) every ``--every`` seconds for ``--seconds`` seconds, and stops
it with Ctrl-C. Printed: the samples, the lines written by then, and the largest RSS after the
first minute against the largest before it. Memory that does not grow with the lines read
means the file streams in bounded memory, whatever its size.

    python bench/stream_memory.py -m RUN [--gigabytes 1] [--seconds 300] [--file /tmp/big.en]
"""

from __future__ import annotations

import argparse
import gzip
import os
import platform
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path


def write_file(path: Path, data: Path, gigabytes: float) -> None:
    with gzip.open(data / "multi30k" / "test_2016_flickr.en.gz", "rt", encoding="utf-8") as fh:
        lines = [x.strip() for x in fh.read().split("\n")[:-1]]
    block, i = [], 0
    while i < len(lines):
        take = 1 + i % 3
        block.append(" ".join(lines[i : i + take]))
        i += take
    chunk = ("\n".join(block) + "\n").encode()
    target = int(gigabytes * (1 << 30))
    with open(path, "wb") as out:
        written = 0
        while written < target:
            out.write(chunk)
            written += len(chunk)


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--data", default=os.environ.get("NMT_DATA_MIRROR", "../shared/data"))
    ap.add_argument("--gigabytes", type=float, default=1.0)
    ap.add_argument("--seconds", type=float, default=300)
    ap.add_argument("--every", type=float, default=10)
    ap.add_argument("--file", default="/tmp/nmt-stream-memory.en")
    args = ap.parse_args()
    path = Path(args.file)
    if not path.exists() or path.stat().st_size < args.gigabytes * (1 << 30):
        write_file(path, Path(args.data), args.gigabytes)
    out = path.with_suffix(".out")
    print(
        f"# {platform.node()}, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {args.model}, "
        f"greedy, one thread; input {path.stat().st_size / (1 << 30):.2f} GiB"
    )
    command = [sys.executable, "-m", "nmt_cli", "translate", "-m", args.model, "-i", str(path)]
    command += ["--beam-size", "1", "--threads", "1"]
    with open(out, "wb") as sink:
        proc = subprocess.Popen(command, stdout=sink, stderr=subprocess.DEVNULL)
        began, samples = time.monotonic(), []
        while time.monotonic() - began < args.seconds and proc.poll() is None:
            time.sleep(args.every)
            samples.append((time.monotonic() - began, rss_mib(proc.pid)))
            print(f"{samples[-1][0]:6.0f} s  RSS {samples[-1][1]:7.1f} MiB", flush=True)
        proc.send_signal(signal.SIGINT)
        proc.wait()
    with open(out, "rb") as fh:
        written = sum(block.count(b"\n") for block in iter(lambda: fh.read(1 << 20), b""))
    early = max((r for t, r in samples if t <= 60), default=0.0)
    late = max((r for t, r in samples if t > 60), default=0.0)
    print(
        f"{written} lines written in {samples[-1][0]:.0f} s; largest RSS in the first minute "
        f"{early:.1f} MiB, after it {late:.1f} MiB"
    )
    out.unlink()


if __name__ == "__main__":
    main()
