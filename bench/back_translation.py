"""Back-translation as a user runs it (docs/recipes.md#back-translation): whole `nmt` processes,
BLEU in and out of domain with sacreBLEU.

    python bench/back_translation.py --minutes 15 --work runs/ml-bt --procs 1 --test-lines 2000
    python bench/back_translation.py --minutes 15 --work runs/ml-bt --ratio 0.25 --keep 0.5

The stages, each written under WORK and reused when it is already there, so that another ratio
or filter trains only its own run:

1. ``fr-en``: a Multi30k fr-en model trained N minutes (recipes/multilingual.yaml, one pair);
2. ``bt.{en,fr}``: it translates the first --mono-lines of Tatoeba's French side into English
   (beam; `nmt translate --shard I/N` on --procs processes, merged in input order);
3. ``baseline``: en-fr trained N minutes on Multi30k alone;
4. with --keep F below 1, ``bt-keepF.{en,fr}``: the share F of the synthetic pairs the two
   models agree on best (dual conditional cross-entropy, Junczys-Dowmunt 2018: with H_f the
   baseline's and H_r the reverse model's cross-entropy per target piece, `nmt score
   --per-piece`, a pair scores |H_f - H_r| + (H_f + H_r) / 2, lower is better);
5. ``bt-rR-kF``: en-fr trained N minutes on Multi30k plus those pairs, `<bt>`-tagged, at
   ``data.back_translated_ratio`` R.

Scored on Multi30k's test_2016_flickr (in domain) and Tatoeba's test (out of domain); the table
is printed and WORK/results.json keeps every variant measured so far.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from multilingual import (
    ROOT,
    mirror,
    nmt,
    one_pair,
    read,
    score,
    test_files,
    train,
    translate,
    write,
)


def train_once(run: Path, minutes: float, args, *sets: str) -> None:
    """Train ``run`` unless an earlier call finished it (its summary.json is written last)."""
    if (run / "summary.json").exists():
        print(f"reusing {run}", flush=True)
        return
    train("recipes/multilingual.yaml", run, minutes, args, *sets)


def back_translate(reverse: Path, mono: Path, out: Path, args) -> None:
    if out.exists() and len(read(out, None)) == len(read(mono, None)):
        print(f"reusing {out}", flush=True)
        return
    shard = str(out) + ".{shard}"
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "nmt_cli", "translate", "-m", str(reverse), "-i", str(mono)]
            + ["--shard", f"{i}/{args.procs}", "--threads", "1", "-o", shard.format(shard=i)],
            cwd=ROOT,
        )
        for i in range(args.procs)
    ]
    if any(p.wait() for p in procs):
        sys.exit("a shard failed")
    write(
        out, [line for i in range(args.procs) for line in read(Path(shard.format(shard=i)), None)]
    )


def cross_entropy(run: Path, src: Path, tgt: Path) -> list[float]:
    """-log p(tgt | src) per target piece (its end-of-sentence included), from `nmt score`."""
    out = nmt(
        "score",
        "-m",
        run,
        "--src",
        src,
        "--tgt",
        tgt,
        "--per-piece",
        "--threads",
        "1",
        capture_output=True,
    )
    return [-float(x) for x in out.stdout.decode().split()]


def keep_agreed(work: Path, keep: float) -> Path:
    """The share ``keep`` of WORK/bt.{en,fr} with the lowest dual conditional cross-entropy."""
    prefix = work / f"bt-keep{keep:g}"
    if Path(f"{prefix}.fr").exists():
        return prefix
    en, fr = work / "bt.en", work / "bt.fr"
    forward = cross_entropy(work / "baseline", en, fr)  # the real French given the English
    backward = cross_entropy(work / "fr-en", fr, en)  # the English given the French
    scores = [abs(f - b) + (f + b) / 2 for f, b in zip(forward, backward, strict=True)]
    kept = sorted(sorted(range(len(scores)), key=scores.__getitem__)[: int(len(scores) * keep)])
    for lang, path in (("en", en), ("fr", fr)):
        lines = read(path, None)
        write(Path(f"{prefix}.{lang}"), [lines[i] for i in kept])
    return prefix


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True, help="folder for the runs and outputs")
    ap.add_argument("--minutes", type=float, default=15.0, help="each training run's budget")
    ap.add_argument("--threads", default="1", help="for every nmt process")
    ap.add_argument("--test-lines", type=int, default=0, help="first N test lines (0 = all)")
    ap.add_argument("--mono-lines", type=int, default=50_000, help="Tatoeba French lines")
    ap.add_argument("--procs", type=int, default=2, help="processes sharing the back-translation")
    ap.add_argument("--ratio", type=float, default=1.0, help="data.back_translated_ratio")
    ap.add_argument("--keep", type=float, default=1.0, help="share of synthetic pairs kept (0-1]")
    ap.add_argument(
        "--baseline",
        default="baseline",
        help="the Multi30k-only run's name; another name trains it again (beside a variant, "
        "so that both see the same machine); the filter always scores with WORK/baseline",
    )
    ap.add_argument("--name", help="the variant's run name (default bt-rR-kF)")
    ap.add_argument("--only-baseline", action="store_true", help="train and score it, no variant")
    ap.add_argument("--pilot", action="store_true", help="in minutes; figures mean nothing")
    args = ap.parse_args()
    if not 0 < args.keep <= 1:
        sys.exit("--keep must be in (0, 1]")
    if args.pilot:
        args.test_lines = args.test_lines or 100
        args.mono_lines = min(args.mono_lines, 300)
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    tatoeba = mirror() / "tatoeba-en-fr"
    mono = work / "bt.fr"
    if not mono.exists():
        write(mono, read(tatoeba / "train.fr.gz", args.mono_lines))
    train_once(work / "fr-en", args.minutes, args, *one_pair("fr-en"))
    back_translate(work / "fr-en", mono, work / "bt.en", args)
    train_once(work / "baseline", args.minutes, args, *one_pair("en-fr"))
    train_once(work / args.baseline, args.minutes, args, *one_pair("en-fr"))
    name = args.name or f"bt-r{args.ratio:g}-k{args.keep:g}"
    if not args.only_baseline:
        corpus = work / "bt" if args.keep == 1 else keep_agreed(work, args.keep)
        train_once(
            work / name,
            args.minutes,
            args,
            *one_pair("en-fr"),
            f"data.back_translated.en-fr={corpus}.{{lang}}",
            f"data.back_translated_ratio={args.ratio:g}",
        )
    multi30k = test_files(work, args.test_lines)
    tests = {
        "multi30k": (multi30k["en"], multi30k["fr"]),
        "tatoeba": tuple(
            write(
                work / "test" / f"tatoeba.{lang}",
                read(tatoeba / f"test.{lang}.gz", args.test_lines),
            )
            for lang in ("en", "fr")
        ),
    }
    out = work / "results.json"
    for run in (args.baseline,) if args.only_baseline else (args.baseline, name):
        if run in (json.loads(out.read_text()) if out.exists() else {}):
            continue
        scores = {
            test: score(translate(work / run, src, args), read(ref, None), "fr")
            for test, (src, ref) in tests.items()
        }
        scores["steps"] = json.loads((work / run / "summary.json").read_text())["steps"]
        # Read again just before writing: another variant may be running beside this one.
        results = json.loads(out.read_text()) if out.exists() else {}
        out.write_text(json.dumps({**results, run: scores}, indent=1))
    results = json.loads(out.read_text())
    print("| model | steps | Multi30k test_2016 BLEU | Tatoeba test BLEU |")
    print("|---|---|---|---|")
    for run, r in results.items():
        if isinstance(r, dict) and "multi30k" in r:
            print(
                f"| {run} | {r.get('steps')} | {r['multi30k']['bleu']} | {r['tatoeba']['bleu']} |"
            )
    print(f"written {out}")


if __name__ == "__main__":
    main()
