"""Marian (C++, 1.12) and nmt on the same machine in one run: the same Multi30k en-fr data through
the same SentencePiece model, models of the same size and kind (a BiGRU encoder, Nematus's
conditional GRU decoder with additive attention, 256-dim tied embeddings), each trained for the
same minutes with one thread, then test_2016 translated by whole processes taking turns (greedy and
beam 5; min / median seconds, sentences/s, source tokens/s, BLEU), start-up apart.

    bash ../shared/tools/marian/build.sh /tmp/marian          # Marian for CPU, ~30 minutes
    python bench/marian_side_by_side.py prepare --dir runs/marian-sbs
    python bench/marian_side_by_side.py train --dir runs/marian-sbs --minutes 15
    python bench/marian_side_by_side.py translate --dir runs/marian-sbs --repeat 5 --threads 1
    python bench/marian_side_by_side.py all --dir runs/marian-sbs --minutes 15   # the three at once

Marian's s2s model gives its encoder's directions the decoder's state size (one --dim-rnn), where
nmt's BiGRU halves it (hidden_dim 512: 2 x 256 encoder, 512 decoder); at --dim-rnn 384 (2 x 384
encoder, 384 decoder) the two models hold about the same number of parameters, and `translate`
prints both counts. Marian reads raw text through the run's own SentencePiece model (a `.spm`
vocabulary), so both sides are timed on raw text, segmentation included. Marian trains without
validation; nmt validates every 500 steps as its recipe says (its tokens/s leaves that time out, as
Marian's words/s does).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import record
from side_by_side import alternate, compile_nmt, torch_version, train_all

ROOT = Path(__file__).resolve().parent.parent
RECIPE = ROOT / "recipes" / "en-fr.yaml"
# nmt's side in Marian's s2s kind: the conditional GRU decoder (s'_i = f1(s_{i-1}, y_{i-1}),
# additive attention queried by s'_i, s_i = f2(s'_i, c_i)), tied embeddings as
# --tied-embeddings-all, the full vocabulary (Marian has no shortlist here). Each toolkit keeps
# its own initialisation.
NMT_SET = [
    "model.decoder=conditional",
    "model.attention=concat",
    "model.input_feeding=false",
    "decode.shortlist=false",
]


def _marian_shape(args) -> list[str]:
    return [
        "--type", "s2s",
        "--dim-emb", "256",
        "--dim-rnn", str(args.dim_rnn),
        "--enc-type", "bidirectional",
        "--enc-cell", "gru",
        "--dec-cell", "gru",
        "--enc-depth", "1",
        "--dec-depth", "1",
        "--tied-embeddings-all",
    ]  # fmt: skip


def _paths(args) -> dict[str, Path]:
    base = Path(args.dir)
    return {
        "nmt": base / "nmt",
        "marian": base / "marian",
        "bin": Path(args.marian),
        "out": base / "out",
    }


def _nmt_cmd(step: str, p: dict, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "nmt_cli", step, str(RECIPE), "--run-dir", str(p["nmt"]),
        *[x for kv in NMT_SET for x in ("--set", kv)], *extra,
    ]  # fmt: skip


def prepare(args) -> None:
    import subprocess

    p = _paths(args)
    if not (p["nmt"] / "data" / "meta.json").exists():
        subprocess.run(_nmt_cmd("preprocess", p), check=True)
    marian = p["marian"]
    marian.mkdir(parents=True, exist_ok=True)
    # the .spm suffix tells Marian the file is a SentencePiece model
    shutil.copyfile(p["nmt"] / "spm.model", marian / "vocab.spm")
    for split in ("train", "valid", "test"):
        for side, lang in (("src", "en"), ("tgt", "fr")):
            shutil.copyfile(p["nmt"] / "data" / f"{split}.{side}.txt", marian / f"{split}.{lang}")
    print(f"prepared {p['nmt']} and {marian}")


def train(args) -> None:
    """Both trainers for the same wall-clock minutes, one thread each."""
    p = _paths(args)
    for exe in ("marian", "marian-decoder"):
        if not (p["bin"] / exe).exists():
            sys.exit(f"{p['bin'] / exe} not found: build Marian first (--marian DIR)")
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    seconds = int(args.minutes * 60)
    m = p["marian"]
    nmt = _nmt_cmd("train", p, "--max-minutes", str(args.minutes), "--threads", "1")
    nmt += ["--set", f"train.seed={args.seed}"]
    marian = [
        "timeout", "--signal=TERM", str(seconds), str(p["bin"] / "marian"),
        *_marian_shape(args),
        "--model", str(m / "model.npz"),
        "--train-sets", str(m / "train.en"), str(m / "train.fr"),
        "--vocabs", str(m / "vocab.spm"), str(m / "vocab.spm"),
        "--dim-vocabs", "8000", "8000",
        # nmt's en-fr.yaml training: Adam at 1e-3, 1,000 target tokens a batch, the mean
        # cross-entropy per target token, no label smoothing, clipping at 1, dropout 0.1,
        # parameter averaging at 0.999 a step
        "--optimizer", "adam", "--learn-rate", "0.001",
        "--mini-batch-words", "1000", "--maxi-batch", "100",
        "--cost-type", "ce-mean-words", "--label-smoothing", "0",
        "--clip-norm", "1", "--dropout-rnn", "0.1",
        "--exponential-smoothing", "0.001",
        "--max-length", "100",
        "--cpu-threads", "1", "--workspace", "2000", "--seed", str(args.seed),
        "--disp-freq", "50", "--save-freq", "1000", "--sigterm", "save-and-exit",
        "--log", str(m / "train.log"), "--quiet",
    ]  # fmt: skip
    commands = {"nmt": ["timeout", str(seconds + 300), *nmt], "Marian": marian}
    logs = {"nmt": Path(args.dir) / "nmt.train.log", "Marian": Path(args.dir) / "marian.stdout.log"}
    if args.only:  # one side resumes for more minutes; its log goes on where it stopped
        commands = {args.only: commands[args.only]}
        logs = {args.only: logs[args.only].with_suffix(f".more{int(time.time())}.log")}
    done = train_all(commands, logs, env, together=not args.one_after_another)
    for name, (code, cpu, wall) in done.items():
        print(
            f"{name}: {wall / 60:.1f} min, {cpu / 60:.1f} CPU minutes, exit code {code} "
            "(124 = stopped by its time limit)"
        )


def _training_rates(base: Path) -> dict[str, float | None]:
    """Each trainer's target tokens a second over its run, validation left out: nmt's last line
    gives its run's mean; Marian's lines give each display interval's words/s and seconds."""
    found: dict[str, float | None] = {"nmt": None, "Marian": None}
    log = base / "nmt.train.log"
    text = log.read_text(encoding="utf-8") if log.exists() else ""
    hits = re.findall(r"([0-9.]+) tgt tok/s", text)
    if hits:
        found["nmt"] = float(hits[-1])
    log = base / "marian" / "train.log"
    text = log.read_text(encoding="utf-8") if log.exists() else ""
    intervals = [
        (float(seconds), float(rate.replace(",", "")))
        for seconds, rate in re.findall(r"Time ([0-9.]+)s : ([0-9.,]+) words/s", text)
    ]
    if intervals:
        seconds = sum(t for t, _ in intervals)
        found["Marian"] = round(sum(t * r for t, r in intervals) / seconds, 1)
    return found


def _parameters(p: dict) -> dict[str, float]:
    """Millions of parameters: Marian's from its model file, nmt's from its training log."""
    with np.load(p["marian"] / "model.npz") as weights:
        marian = sum(weights[k].size for k in weights.files if not k.startswith("special:"))
    log = (p["nmt"].parent / "nmt.train.log").read_text(encoding="utf-8")
    nmt = float(re.search(r"model: ([0-9.]+)M parameters", log).group(1))
    return {"nmt": nmt, "Marian": round(marian / 1e6, 2)}


def _commands(p: dict, args, beam: int, src: Path, tag: str) -> dict[str, list[str]]:
    out = p["out"]
    return {
        "nmt": [
            sys.executable, "-m", "nmt_cli", "translate", "-m", str(p["nmt"]),
            "-i", str(src), "-o", str(out / f"nmt.{tag}.txt"), "--beam-size", str(beam),
        ],
        "Marian": [
            str(p["bin"] / "marian-decoder"),
            "-m", str(p["marian"] / "model.npz"),
            "-v", str(p["marian"] / "vocab.spm"), str(p["marian"] / "vocab.spm"),
            "-i", str(src), "-o", str(out / f"marian.{tag}.txt"),
            "--beam-size", str(beam), "--normalize", "1.0", "--max-length-factor", "1.5",
            "--mini-batch", "64", "--maxi-batch", "100", "--maxi-batch-sort", "src",
            "--cpu-threads", str(args.threads), "--quiet",
        ],
    }  # fmt: skip


def translate(args) -> None:
    import sacrebleu

    p = _paths(args)
    p["out"].mkdir(parents=True, exist_ok=True)
    for needed in (
        p["marian"] / "model.npz",
        p["nmt"] / "checkpoints",
        p["nmt"].parent / "nmt.train.log",
    ):
        if not needed.exists():
            sys.exit(f"{needed}: missing; run the train step first")
    compile_nmt()
    threads = str(args.threads)
    env = dict(os.environ, OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads)
    envs = {"nmt": env, "Marian": dict(env, OPENBLAS_NUM_THREADS="1")}
    src = p["marian"] / "test.en"
    refs = (p["marian"] / "test.fr").read_text(encoding="utf-8").split("\n")[:-1]
    pieces = sum(
        len(x) for x in _tokenizer(p).encode_src(src.read_text(encoding="utf-8").split("\n")[:-1])
    )
    one = p["out"] / "one.en"
    one.write_text(src.read_text(encoding="utf-8").split("\n")[0] + "\n", encoding="utf-8")
    startup = alternate(_commands(p, args, 1, one, "one"), envs, args.repeat, "start-up")
    rows = []
    for beam in args.beams:
        runs = alternate(
            _commands(p, args, beam, src, f"beam{beam}"), envs, args.repeat, f"beam {beam}"
        )
        for name, (times, cpus) in runs.items():
            hyp = p["out"] / f"{name.lower()}.beam{beam}.txt"
            hyps = hyp.read_text(encoding="utf-8").split("\n")[:-1]
            rows.append(
                {
                    "toolkit": name,
                    "beam": beam,
                    "min_s": round(min(times), 2),
                    "median_s": round(statistics.median(times), 2),
                    "cpu_min_s": round(min(cpus), 2),
                    "startup_s": round(min(startup[name][0]), 2),
                    "bleu": round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2),
                }
            )
    _report(args, p, rows, len(refs), pieces)


def _tokenizer(p: dict):
    from nmt_cli.data.tokenizer import Tokenizer

    return Tokenizer.load(p["nmt"])


def _report(args, p: dict, rows: list[dict], sentences: int, pieces: int) -> None:
    import torch

    from nmt_cli.runtime.device import resolve_decode_precision

    precision = resolve_decode_precision("auto", torch.device("cpu"))
    params, rates = _parameters(p), _training_rates(Path(args.dir))
    print(
        f"# {record.cpu_name()}; {args.threads} thread(s) each; torch {torch_version()}; "
        f"{sentences} sentences, {pieces} source pieces; nmt decodes in {precision}, Marian fp32"
    )
    print(f"# parameters (millions): {params}; training target tokens/s: {rates}")
    for r in rows:
        print(
            f"beam {r['beam']}  {r['toolkit']:<6} min {r['min_s']:6.2f} s  median "
            f"{r['median_s']:6.2f} s  {sentences / r['min_s']:6.1f} sent/s  "
            f"{pieces / r['min_s']:7.0f} src tok/s  start-up {r['startup_s']:.2f} s  "
            f"BLEU {r['bleu']:.2f}"
        )
    for beam in args.beams:
        pair = {r["toolkit"]: r for r in rows if r["beam"] == beam}
        marian, ours = pair["Marian"], pair["nmt"]
        print(
            f"beam {beam}  ratio (Marian / nmt): min {marian['min_s'] / ours['min_s']:.2f}x"
            f"  median {marian['median_s'] / ours['median_s']:.2f}x"
        )
    print(json.dumps({"rows": rows, "parameters": params, "train_tok_s": rates}))
    if args.record:
        speedup = (
            f"{rates['nmt'] / rates['Marian']:.2f}x" if rates["nmt"] and rates["Marian"] else ""
        )
        table = [["training target tokens/s", rates["nmt"], rates["Marian"], speedup, ""]]
        for r_nmt, r_marian in zip(
            [r for r in rows if r["toolkit"] == "nmt"],
            [r for r in rows if r["toolkit"] == "Marian"],
        ):
            search = "greedy" if r_nmt["beam"] == 1 else f"beam {r_nmt['beam']}"
            table.append(
                [
                    f"{search}: whole-process s (min / median)",
                    f"{r_nmt['min_s']:.2f} / {r_nmt['median_s']:.2f}",
                    f"{r_marian['min_s']:.2f} / {r_marian['median_s']:.2f}",
                    f"{r_marian['min_s'] / r_nmt['min_s']:.2f}x",
                    f"{r_nmt['bleu']:.2f} / {r_marian['bleu']:.2f}",
                ]
            )
        record.write(
            args.record,
            figure=f"Side by side with Marian 1.12 (nmt in {precision}, Marian fp32)",
            about=f"`{args.dir}`: the two toolkits' models ({params['nmt']}M / {params['Marian']}M "
            f"parameters) trained by this benchmark's `train` step; {sentences:,} test sentences "
            f"by whole processes, {args.threads} thread(s) each, alternating {args.repeat} times; "
            "BLEU: sacreBLEU, cased.",
            columns=["figure", "nmt", "Marian", "nmt's speed / Marian's", "BLEU nmt / Marian"],
            rows=table,
            threads=args.threads,
        )


def _train_options(t: argparse.ArgumentParser) -> None:
    t.add_argument("--minutes", type=float, default=15.0)
    t.add_argument("--seed", type=int, default=1234)
    t.add_argument("--dim-rnn", type=int, default=384, help="Marian's --dim-rnn (see above)")
    t.add_argument(
        "--only",
        choices=("nmt", "Marian"),
        help="train this side alone: both resume where they stopped, so this gives one of them "
        "more minutes (to compare decoding at closer BLEU)",
    )
    t.add_argument(
        "--one-after-another",
        action="store_true",
        help="train one toolkit after the other (a machine with one free core)",
    )


def _translate_options(d: argparse.ArgumentParser) -> None:
    d.add_argument("--repeat", type=int, default=5)
    d.add_argument("--threads", type=int, default=1)
    d.add_argument("--beams", type=int, nargs="+", default=[1, 5])
    d.add_argument("--record", type=Path, help="write the figure here (bench/records/NAME.json)")


def everything(args) -> None:
    """prepare, train and translate in one run."""
    prepare(args)
    train(args)
    translate(args)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="step", required=True)
    for name in ("prepare", "train", "translate", "all"):
        s = sub.add_parser(name)
        s.add_argument("--dir", default="runs/marian-sbs", help="where both runs live")
        s.add_argument("--marian", default="/tmp/marian/build", help="Marian's build folder")
        if name in ("train", "all"):
            _train_options(s)
        if name in ("translate", "all"):
            _translate_options(s)
    args = ap.parse_args()
    steps = {"prepare": prepare, "train": train, "translate": translate, "all": everything}
    steps[args.step](args)


if __name__ == "__main__":
    main()
