"""Preprocessing throughput and peak memory on large synthetic-but-realistic corpora.

    python bench/preprocess_speed.py --pairs 1000000 [--pairs 8000000 ...] [--workdir DIR]
        [--keep-corpus] [--keep-run] [--reuse-run] [--sample-sentences 200000]
        [--train-steps 300 | --train-minutes 5] [--baseline <checkout of another revision>]
        [--record FILE]

For each size, a .gz corpus of that many en-fr pairs is made from the real Multi30k and Tatoeba
training text, perturbed so that pairs are not exact repeats (a word dropped, two neighbours
swapped, or two pairs joined into one, each side alike), unless it is already in DIR from an
earlier --keep-corpus run; blocks of 100k pairs are made on every core, each from its own seed.
Then `nmt preprocess` (the en-fr recipe's tokenizer settings) runs on it as a child process
while its whole process tree's memory is sampled every 0.2 s. Printed per size: pairs/s, lines/s
(both sides), peak memory (the tree's summed PSS and RSS, and the largest process's own
high-water mark), seconds per phase, the encoded size on disk in bytes per token, and the
ceiling: SentencePiece's own batch encoding of the same stored lines with the same model on the
same cores (reading excluded; the best of three rounds). --baseline runs the same preprocess with
another revision right after, for a speed ratio measured side by side. --train-steps N or
--train-minutes M then trains the en-fr model on the run and, at the same time on one thread
each, on Multi30k, printing peak memory and target tokens/s of each; with --reuse-run it trains
on the run dir that an earlier --keep-run left, without preprocessing again. `--record FILE`
writes each size's seconds, pairs/s, lines/s, share of SentencePiece's speed and peak memory as a
record for bench/report.py.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import record
import yaml

ROOT = Path(__file__).resolve().parent.parent


def base_pairs() -> list[tuple[list[str], list[str]]]:
    """Multi30k and Tatoeba en-fr training pairs (about 175k), split into words."""
    from nmt_cli.data.corpora import fetch, read_lines

    pairs = list(
        zip(
            read_lines(fetch("multi30k", "train.en.gz")),
            read_lines(fetch("multi30k", "train.fr.gz")),
        )
    )
    mirror = os.environ.get("NMT_DATA_MIRROR")
    tatoeba = Path(mirror) / "tatoeba-en-fr" if mirror else None
    if tatoeba and (tatoeba / "train.en.gz").exists():
        pairs += zip(read_lines(tatoeba / "train.en.gz"), read_lines(tatoeba / "train.fr.gz"))
    return [(src.split(), tgt.split()) for src, tgt in pairs]


def perturbed(pairs: list[tuple[list[str], list[str]]], rng: random.Random) -> tuple[str, str]:
    s, t = rng.choice(pairs)
    kind = rng.random()
    if kind < 0.4 and len(s) > 2 and len(t) > 2:  # drop a word on each side
        s, t = s.copy(), t.copy()
        del s[rng.randrange(len(s))], t[rng.randrange(len(t))]
    elif kind < 0.8 and len(s) > 2 and len(t) > 2:  # swap two neighbours on each side
        s, t = s.copy(), t.copy()
        i, j = rng.randrange(len(s) - 1), rng.randrange(len(t) - 1)
        s[i], s[i + 1] = s[i + 1], s[i]
        t[j], t[j + 1] = t[j + 1], t[j]
    else:  # join with another pair
        s2, t2 = rng.choice(pairs)
        s, t = s + s2, t + t2
    return " ".join(s), " ".join(t)


BLOCK_PAIRS = 100_000
_BASE: list = []  # the base pairs, loaded before the worker processes fork


def corpus_block(seed_and_index: tuple[int, int]) -> tuple[bytes, bytes]:
    """One block of BLOCK_PAIRS perturbed pairs, each side as a gzip member (level 1): members
    concatenate into one valid .gz file. Each block has its own generator, so the corpus is the
    same whatever the number of processes."""
    seed, index = seed_and_index
    rng = random.Random(seed * 1_000_003 + index)
    block = [perturbed(_BASE, rng) for _ in range(BLOCK_PAIRS)]
    return tuple(
        gzip.compress("".join(side + "\n" for side in sides).encode("utf-8"), compresslevel=1)
        for sides in zip(*block)
    )


def make_corpus(n: int, folder: Path, seed: int = 0) -> None:
    """n pairs (rounded up to whole blocks) as train.{en,fr}.gz, made on every core."""
    from nmt_cli.data.workers import ordered_map, usable_cores

    folder.mkdir(parents=True, exist_ok=True)
    done = folder / "COMPLETE"
    if done.exists():
        return
    _BASE[:] = base_pairs()
    blocks = [(seed, i) for i in range(-(-n // BLOCK_PAIRS))]
    with (
        open(folder / "train.en.gz.part", "wb") as en,
        open(folder / "train.fr.gz.part", "wb") as fr,
    ):
        for en_member, fr_member in ordered_map(corpus_block, blocks, usable_cores()):
            en.write(en_member)
            fr.write(fr_member)
    for lang in ("en", "fr"):
        os.replace(folder / f"train.{lang}.gz.part", folder / f"train.{lang}.gz")
    done.write_text(f"{len(blocks) * BLOCK_PAIRS}\n")


def tree_memory_mb(pid: int) -> tuple[float, float]:
    """Resident memory of ``pid`` and all its descendants: the sum of their RSS (which counts a
    page shared by forked workers once per process, so it overstates) and of their PSS (shared
    pages divided among the processes sharing them: what the tree really holds)."""
    rss = pss = 0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            rss += int(
                re.search(r"^VmRSS:\s+(\d+)", Path(f"/proc/{p}/status").read_text(), re.M).group(1)
            )
            pss += int(
                re.search(
                    r"^Pss:\s+(\d+)", Path(f"/proc/{p}/smaps_rollup").read_text(), re.M
                ).group(1)
            )
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, AttributeError):
            pass
    return rss / 1024, pss / 1024


def run_sampled(
    cmd: list[str], env: dict | None = None, cwd: Path = ROOT
) -> tuple[float, dict, subprocess.CompletedProcess]:
    """Run ``cmd``; (seconds, peak memory in MB: the tree's sampled RSS and PSS sums and the
    child's own max RSS, result)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, env=env, cwd=cwd)
        peak_rss = peak_pss = 0.0
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            rss, pss = tree_memory_mb(proc.pid)
            peak_rss, peak_pss = max(peak_rss, rss), max(peak_pss, pss)
            time.sleep(0.2)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        result = subprocess.CompletedProcess(cmd, proc.returncode, out.read(), err.read())
    peak = {
        "tree_rss_mb": round(peak_rss),
        "tree_pss_mb": round(peak_pss),
        "maxrss_mb": round(usage.ru_maxrss / 1024),
    }
    return time.perf_counter() - start, peak, result


def ceiling(run_dir: Path, max_lines: int = 2_000_000, repeat: int = 3) -> dict:
    """SentencePiece's own batch encoding speed on (up to max_lines of) the stored lines, already
    in memory: the best of ``repeat`` rounds, so that a moment of load elsewhere on the machine
    lowers the ceiling less (which would flatter the preprocess)."""
    from nmt_cli.data.tokenizer import Tokenizer
    from nmt_cli.data.workers import usable_cores

    tok, threads = Tokenizer.load(run_dir), usable_cores()
    text = {}
    for side in ("src", "tgt"):
        with open(run_dir / "data" / f"train.{side}.txt", encoding="utf-8") as fh:
            text[side] = [line.rstrip("\n") for _, line in zip(range(max_lines // 2), fh)]
    rounds = []
    for _ in range(repeat):
        start = time.perf_counter()
        for side, lines in text.items():
            for i in range(0, len(lines), 50_000):
                tok.encode_ids(side, lines[i : i + 50_000], threads)
        rounds.append(sum(map(len, text.values())) / (time.perf_counter() - start))
    return {
        "lines": sum(map(len, text.values())),
        "threads": threads,
        "lines_per_s": round(max(rounds)),
        "rounds_lines_per_s": [round(r) for r in rounds],
    }


def recipe_for(corpus: Path, work: Path, sample_sentences: int | None) -> Path:
    en_fr = yaml.safe_load((ROOT / "recipes" / "en-fr.yaml").read_text())
    en_fr["name"] = "bench"
    if sample_sentences:
        en_fr["tokenizer"]["sample_sentences"] = sample_sentences
    from nmt_cli.data.corpora import fetch

    # Every split as a path (no corpus registry), which every revision reads alike (--baseline).
    held_out = {
        split: str(fetch("multi30k", f"{split}.en.gz")).replace(".en.gz", ".{lang}.gz")
        for split in ("val", "test_2016_flickr")
    }
    en_fr["data"] = {
        "corpus": None,
        "train": str(corpus / "train.{lang}.gz"),
        "valid": held_out["val"],
        "test": [held_out["test_2016_flickr"]],
        "max_len": 80,
    }
    path = work / f"{corpus.name}.yaml"
    path.write_text(yaml.safe_dump(en_fr))
    return path


def train_probe(recipe: Path, run_dir: Path, budget: list[str], env: dict) -> dict:
    """`nmt train` for a budget (--max-steps N or --max-minutes M) on one thread, validation and
    averaging out of the way; its peak memory and target tokens/s."""
    cmd = [
        sys.executable,
        "-m",
        "nmt_cli",
        "train",
        str(recipe),
        "--run-dir",
        str(run_dir),
        "--restart",
        "--threads",
        "1",
        *budget,
        "--set",
        "train.valid_every=100000",
        "--set",
        "train.checkpoint_every=100000",
        "--set",
        "train.average_last=0",
    ]
    seconds, peak, result = run_sampled(cmd, env)
    if result.returncode != 0:
        sys.exit(result.stderr.strip().splitlines()[-1])
    summary = json.loads((run_dir / "summary.json").read_text())
    rates = sorted(
        m["tgt_tokens_per_s"]
        for m in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())
        if m.get("kind") == "train"
    )
    return {
        "steps": summary["steps"],
        "seconds": round(seconds),
        **peak,
        "peak_rss_mb": summary.get("peak_rss_mb"),
        "tgt_tokens_per_s": summary["tgt_tokens_per_s"],
        "median_logged_tgt_tokens_per_s": rates[len(rates) // 2] if rates else None,
    }


def train_side_by_side(
    recipe: Path, run_dir: Path, work: Path, budget: list[str], env: dict
) -> dict:
    """The same recipe trained on the big run and on Multi30k at the same time, one thread each,
    so that both see the same machine."""
    from concurrent.futures import ThreadPoolExecutor

    small_recipe, small_run = work / "multi30k.yaml", work / "run-multi30k"
    small_recipe.write_text((ROOT / "recipes" / "en-fr.yaml").read_text())
    if not (small_run / "data" / "meta.json").exists():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "nmt_cli",
                "preprocess",
                str(small_recipe),
                "--run-dir",
                str(small_run),
            ],
            env=env,
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
    with ThreadPoolExecutor(2) as pool:
        big = pool.submit(train_probe, recipe, run_dir, budget, env)
        small = pool.submit(train_probe, small_recipe, small_run, budget, env)
        return {"big": big.result(), "multi30k": small.result()}


def baseline_run(checkout: Path, recipe: Path, run_dir: Path, n: int, seconds_now: float) -> dict:
    """The same preprocess with another revision of the package (a checkout on PYTHONPATH), right
    after this one's, on the same corpus and settings: the speed ratio that matters on a shared
    machine."""
    shutil.rmtree(run_dir, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    # Run from the checkout: `python -m` puts the working directory first on the import path.
    code = [sys.executable, "-c", "import nmt_cli, sys; print(nmt_cli.__file__, file=sys.stderr)"]
    where = subprocess.run(
        code, env=env, cwd=checkout, capture_output=True, text=True
    ).stderr.strip()
    if not where.startswith(str(checkout.resolve())):
        sys.exit(f"baseline: the checkout's package is not the one imported ({where})")
    seconds, peak, result = run_sampled(
        [sys.executable, "-m", "nmt_cli", "preprocess", str(recipe), "--run-dir", str(run_dir)],
        env,
        cwd=checkout,
    )
    if result.returncode != 0:
        sys.exit(f"baseline: {result.stderr.strip().splitlines()[-1]}")
    shutil.rmtree(run_dir, ignore_errors=True)
    return {
        "checkout": str(checkout),
        "package": where,
        "seconds": round(seconds, 1),
        "lines_per_s": round(2 * n / seconds),
        "peak_mb": peak,
        "speedup_of_this_revision": round(seconds / seconds_now, 2),
    }


def measure_preprocess(
    n: int, made: float, run_dir: Path, recipe: Path, env: dict, args: argparse.Namespace
) -> dict:
    """`nmt preprocess` of the recipe's n-pair corpus into ``run_dir``: speed, memory, sizes, the
    ceiling."""
    shutil.rmtree(run_dir, ignore_errors=True)
    seconds, peak, result = run_sampled(
        [sys.executable, "-m", "nmt_cli", "preprocess", str(recipe), "--run-dir", str(run_dir)], env
    )
    if result.returncode != 0:
        sys.exit(result.stderr.strip().splitlines()[-1])
    meta = json.loads((run_dir / "data" / "meta.json").read_text())
    train = meta["splits"]["train"]
    tokens = train["src"]["tokens"] + train["tgt"]["tokens"]
    ids_bytes = sum(
        (run_dir / "data" / f"train.{s}.ids.npy").stat().st_size for s in ("src", "tgt")
    )
    offsets_bytes = sum(
        (run_dir / "data" / f"train.{s}.offsets.npy").stat().st_size for s in ("src", "tgt")
    )
    top = ceiling(run_dir)
    found = lambda pattern: re.search(pattern, result.stderr, re.M)
    stage = lambda pattern: float(found(pattern).group(1)) if found(pattern) else None
    pass_rate = stage(r"^train: .*encoded in .*?, (\d+) lines/s\)")
    result_row = {
        "pairs": n,
        "kept": train["src"]["sentences"],
        "seconds": round(seconds, 1),
        "pairs_per_s": round(n / seconds),
        "lines_per_s": round(2 * n / seconds),
        "peak_mb": peak,
        "sample_sentences": args.sample_sentences or "recipe default",
        "id_dtype": meta["id_dtype"],
        "tokens": tokens,
        "ids_bytes_per_token": round(ids_bytes / tokens, 3),
        "offsets_mb": round(offsets_bytes / 2**20),
        "sample_s": stage(r"^sample drawn in ([\d.]+) s"),
        "sentencepiece_s": stage(r"^SentencePiece learned in ([\d.]+) s"),
        "read_clean_encode_s": stage(r"^train: .*encoded in ([\d.]+) s"),
        "shortlist_s": stage(r"^shortlist learned in ([\d.]+) s"),
        "pass_lines_per_s": pass_rate,
        "ceiling_spm_lines_per_s": top["lines_per_s"],
        "ceiling_rounds": top["rounds_lines_per_s"],
        "threads": top["threads"],
        "pass_share_of_ceiling": round(pass_rate / top["lines_per_s"], 2) if pass_rate else None,
        "end_to_end_share_of_ceiling": round(2 * n / seconds / top["lines_per_s"], 2),
        "corpus_seconds_to_make": round(made),
        "cpus": os.cpu_count(),
    }
    print(json.dumps(result_row), flush=True)
    print(
        f"{n} pairs in {seconds:.0f} s: {result_row['pairs_per_s']} pairs/s "
        f"({result_row['lines_per_s']} lines/s; SentencePiece alone {top['lines_per_s']} "
        f"lines/s on {top['threads']} threads), "
        f"peak memory {peak['tree_pss_mb'] / 1024:.2f} GiB (PSS of the process tree; RSS sum "
        f"{peak['tree_rss_mb'] / 1024:.2f} GiB)",
        flush=True,
    )
    if args.baseline:
        print(
            json.dumps(
                {
                    "baseline": baseline_run(
                        args.baseline, recipe, run_dir.with_name(f"run-{n}-baseline"), n, seconds
                    )
                }
            ),
            flush=True,
        )
    return result_row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--pairs", type=int, action="append", help="corpus size (repeatable); default 1M"
    )
    ap.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="where corpora and runs go (big: 40M pairs "
        "take about 2 GB of .gz and 10 GB of run dir)",
    )
    ap.add_argument(
        "--keep-corpus", action="store_true", help="keep the generated corpora for later runs"
    )
    ap.add_argument("--keep-run", action="store_true", help="keep the preprocessed run dirs")
    ap.add_argument(
        "--reuse-run",
        action="store_true",
        help="train on the run dir kept by an earlier --keep-run instead of preprocessing again",
    )
    ap.add_argument(
        "--train-steps",
        type=int,
        default=0,
        help="then train N steps on the run and on Multi30k, side by side",
    )
    ap.add_argument("--train-minutes", type=float, default=0, help="... or for M minutes each")
    ap.add_argument(
        "--sample-sentences",
        type=int,
        default=None,
        help="tokenizer.sample_sentences (default: the recipe's, 2M); SentencePiece's "
        "training memory grows with it",
    )
    ap.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="a checkout of another revision: preprocess the same corpus with it right after, "
        "and print the speed ratio",
    )
    ap.add_argument("--record", type=Path, help="write the figure here (bench/records/NAME.json)")
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="nmt-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    measured = []
    for n in args.pairs or [1_000_000]:
        corpus = work / f"corpus-{n}"
        start = time.perf_counter()
        make_corpus(n, corpus)
        made = time.perf_counter() - start
        print(
            json.dumps({"corpus": str(corpus), "pairs": n, "seconds_to_make": round(made, 1)}),
            flush=True,
        )
        run_dir = work / f"run-{n}"
        recipe = recipe_for(corpus, work, args.sample_sentences)
        if not (args.reuse_run and (run_dir / "data" / "meta.json").exists()):
            measured.append(measure_preprocess(n, made, run_dir, recipe, env, args))
        budget = (
            ["--max-steps", str(args.train_steps)]
            if args.train_steps
            else ["--max-minutes", str(args.train_minutes)]
            if args.train_minutes
            else []
        )
        if budget:
            print(
                json.dumps({"train": train_side_by_side(recipe, run_dir, work, budget, env)}),
                flush=True,
            )
        if not args.keep_corpus:
            shutil.rmtree(corpus, ignore_errors=True)
        if not args.keep_run:
            shutil.rmtree(run_dir, ignore_errors=True)
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    if args.record and measured:
        record.write(
            args.record,
            figure="Preprocessing at scale",
            about="Multi30k and Tatoeba en-fr pairs, perturbed so that none repeats, repeated to N "
            "pairs; `nmt preprocess` with the en-fr tokenizer settings as a separate process. "
            "Lines count both sides; peak memory is the PSS of the process tree; `of "
            "SentencePiece` is the whole preprocess against SentencePiece's own encoding speed "
            "on the same lines.",
            columns=["pairs", "seconds", "pairs/s", "lines/s", "of SentencePiece", "peak (MB)"],
            rows=[
                [
                    r["pairs"],
                    r["seconds"],
                    r["pairs_per_s"],
                    r["lines_per_s"],
                    r["end_to_end_share_of_ceiling"],
                    round(r["peak_mb"]["tree_pss_mb"]),
                ]
                for r in measured
            ],
            threads=os.environ.get("OMP_NUM_THREADS", "default"),
        )


if __name__ == "__main__":
    main()
