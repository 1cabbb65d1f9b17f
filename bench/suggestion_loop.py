"""Corrections through `nmt serve --suggestions`: a parallel file's references sent to POST /suggest
as corrections of the model, then every source asked again, before and after the server is killed
(SIGKILL) and started anew on the same file.

    python bench/suggestion_loop.py -m runs/en-fr --db corrections.db \
        --src test_2017_mscoco.en.gz --ref test_2017_mscoco.fr.gz [--threads 1] [--check-only]

Prints how many sources the model already translated as their reference, how many suggestions were
taken, and, for each of the two servers, how many answers of POST /v1/translate came from the
memory (``memory``) and equal the reference. ``--check-only``: send nothing, ask only (a file
filled before, served with another model: the corrections stay what users get). Only 127.0.0.1 is
addressed.
"""

from __future__ import annotations

import argparse
import http.client
import json
import signal
import sys
from pathlib import Path

from serve_load import ROOT, start_server

CHUNK = 64  # sentences per /v1/translate request


def post(port: int, path: str, body: dict) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    answer = json.loads(resp.read())
    conn.close()
    return resp.status, answer


def pair(port: int) -> tuple[str, str]:
    """The first language pair the server translates."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", "/v1/models")
    first = json.loads(conn.getresponse().read())["pairs"][0]
    conn.close()
    return first["source"], first["target"]


def ask(port: int, sources: list[str], references: list[str]) -> tuple[int, int]:
    """(answers from the memory, answers equal to their reference, whitespace-normalised)."""
    memory = equal = 0
    for at in range(0, len(sources), CHUNK):
        status, answer = post(port, "/v1/translate", {"src": sources[at : at + CHUNK]})
        if status != 200:
            sys.exit(f"/v1/translate: {status} {answer}")
        for tr, ref in zip(answer["translations"], references[at : at + CHUNK]):
            memory += tr["memory"] == list(range(tr["segments"]))
            equal += " ".join(tr["text"].split()) == " ".join(ref.split())
    return memory, equal


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--db", required=True, type=Path, help="the --suggestions file")
    ap.add_argument("--src", required=True, type=Path)
    ap.add_argument("--ref", required=True, type=Path)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--check-only", action="store_true", help="send no suggestions")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from nmt_cli.data.corpora import read_lines

    sources, references = list(read_lines(args.src)), list(read_lines(args.ref))
    extra = ["--suggestions", str(args.db), "--cache-size", "0"]
    proc, port = start_server(args.model, args.threads, extra)
    try:
        if not args.check_only:
            _, before = ask(port, sources, references)
            print(f"{before} of {len(sources)} sources already translated as their reference")
            source, target = pair(port)
            for q, s in zip(sources, references):
                body = {"q": q, "s": s, "source": source, "target": target}
                status, answer = post(port, "/suggest", body)
                if status != 200:
                    sys.exit(f"/suggest: {status} {answer}")
            print(f"{len(sources)} suggestions taken")
        memory, equal = ask(port, sources, references)
        print(f"served: {memory} of {len(sources)} from memory, {equal} equal to the reference")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(60)
    proc, port = start_server(args.model, args.threads, extra)
    try:
        memory, equal = ask(port, sources, references)
        print(f"after SIGKILL and a restart: {memory} from memory, {equal} equal to the reference")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)


if __name__ == "__main__":
    main()
