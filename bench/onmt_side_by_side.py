"""OpenNMT-py 3.5 and nmt on the same machine in one run: same data (Multi30k en-fr through the
same SentencePiece model), same model shape (256-dim embeddings, BiGRU 2x256 encoder, GRU 512
decoder, additive attention, the same initialisation), each trained for the same minutes side by
side with one thread, then whole-process translation of test_2016 (greedy and beam 5) with
min/median seconds, sentences/s and BLEU, and each toolkit's start-up (the same greedy command
on the test set's first line alone), so that the decoding without it compares as well.

    python bench/onmt_side_by_side.py setup --venv runs/onmt-venv
    python bench/onmt_side_by_side.py prepare --dir runs/sbs --venv runs/onmt-venv
    python bench/onmt_side_by_side.py train --dir runs/sbs --venv runs/onmt-venv --minutes 15
    python bench/onmt_side_by_side.py translate --dir runs/sbs --venv runs/onmt-venv --repeat 5

OpenNMT-py pins torch<2.3, so `setup` installs it with --no-deps into its own virtual environment
beside the torch this Python has, with the packages its modules import added by hand. Its inputs
are the SentencePiece pieces of nmt's own preprocessed splits (so both see the very same
segmentation and sentence-length filter) and its vocabulary is the SentencePiece vocabulary.
OpenNMT-py is timed on pre-segmented input and its output is joined back to text outside the
timing; nmt is timed on raw text, SentencePiece included. `translate --record FILE` also writes
the table as a record for bench/report.py.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

import record
from side_by_side import alternate, compile_nmt, torch_version, train_all

ROOT = Path(__file__).resolve().parent.parent
RECIPE = ROOT / "recipes" / "en-fr.yaml"
# The reference shape on nmt's side: additive (concat) attention, no input feeding, as on
# OpenNMT-py's side (input_feed 0 below), so that both decoders do the same work per step; and
# OpenNMT-py's output layer, a 512 x V matrix of its own over h~ of 512 (nmt's default ties it to
# the 256-dim target embeddings: 5.1M parameters against OpenNMT-py's 9.2M). And OpenNMT-py's
# initialisation, every parameter U(-0.1, 0.1) (its param_init 0.1): with nmt's default (N(0, 1)
# embeddings) the same model learns less per step
# (docs/results.md#the-same-shape-and-initialisation).
NMT_SET = [
    "model.attention=concat",
    "model.input_feeding=false",
    "model.tie_embeddings=false",
    "model.init=uniform",
]
# The packages OpenNMT-py 3.5's training and translation entry points import (its transforms
# package imports every transform module, spacy and fasttext included).
ONMT_IMPORTS = [
    "configargparse",
    "pyyaml",
    "numpy",
    "sacrebleu",
    "pyonmttok>=1.37,<2",
    "regex",
    "pyahocorasick",
    "spacy",
    "fasttext-wheel",
    "rapidfuzz",
    "six",
]

# OpenNMT-py's sentences per batch (its default is 30), as nmt's defaults: 64 for beam search, 128
# for greedy search, where a larger batch is faster for it too (test_2016, greedy: 10.7-15.3 s at
# 128 against 12.0-17.3 s at 64, three rounds each). nmt decoding in bf16 takes 192 for greedy
# search; OpenNMT-py gains nothing from it (Xeon, 2026-11-28: 4.82-5.09 s at 128 against
# 4.88-5.07 s at 192).
ONMT_BATCH = {False: 64, True: 128}

# torch >= 2.6 loads with weights_only=True by default, and OpenNMT-py 3.5's checkpoints hold an
# argparse.Namespace: its translator fails to load them unless this switch restores the old default.
# Its trainer needs nothing.
ONMT_TORCH_SHIM = {"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}


def setup(args) -> None:
    venv = Path(args.venv)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    if not venv.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(pip + [f"torch=={torch_version()}"], check=True)
    subprocess.run(pip + ["--no-deps", "OpenNMT-py==3.5.*"], check=True)
    subprocess.run(pip + ONMT_IMPORTS, check=True)
    subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import onmt.bin.train, onmt.bin.translate"],
        check=True,
    )


def _paths(args) -> dict[str, Path]:
    base = Path(args.dir)
    return {"nmt": base / "nmt", "onmt": base / "onmt", "bin": Path(args.venv) / "bin"}


def _pieces(tokenizer, ids, offsets) -> list[str]:
    sp = tokenizer.src  # joint model: one vocabulary for both sides
    return [
        " ".join(sp.id_to_piece(int(i)) for i in ids[offsets[k] : offsets[k + 1]])
        for k in range(len(offsets) - 1)
    ]


def prepare(args) -> None:
    import numpy as np

    from nmt_cli.data.tokenizer import Tokenizer

    p = _paths(args)
    if not (p["nmt"] / "data" / "meta.json").exists():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "nmt_cli",
                "preprocess",
                str(RECIPE),
                "--run-dir",
                str(p["nmt"]),
                *[x for kv in NMT_SET for x in ("--set", kv)],
            ],
            check=True,
        )
    tok = Tokenizer.load(p["nmt"])
    onmt = p["onmt"]
    onmt.mkdir(parents=True, exist_ok=True)
    data = p["nmt"] / "data"
    for split in ("train", "valid", "test"):
        for side in ("src", "tgt"):
            ids = np.load(data / f"{split}.{side}.ids.npy")
            offsets = np.load(data / f"{split}.{side}.offsets.npy")
            lines = _pieces(tok, ids, offsets)
            (onmt / f"{split}.{side}.sp").write_text(
                "".join(x + "\n" for x in lines), encoding="utf-8"
            )
    sp = tok.src
    vocab = [
        sp.id_to_piece(i)
        for i in range(sp.get_piece_size())
        if not (sp.is_control(i) or sp.is_unknown(i))
    ]
    (onmt / "vocab.txt").write_text("".join(f"{v}\t1\n" for v in vocab), encoding="utf-8")
    config = {
        "src_vocab": str(onmt / "vocab.txt"),
        "share_vocab": True,
        "src_vocab_size": len(vocab) + 10,
        "tgt_vocab_size": len(vocab) + 10,
        "data": {
            "corpus_1": {
                "path_src": str(onmt / "train.src.sp"),
                "path_tgt": str(onmt / "train.tgt.sp"),
            },
            "valid": {
                "path_src": str(onmt / "valid.src.sp"),
                "path_tgt": str(onmt / "valid.tgt.sp"),
            },
        },
        "save_model": str(onmt / "model"),
        "save_checkpoint_steps": 50,
        "keep_checkpoint": 2,
        "train_steps": 1_000_000,
        "valid_steps": 500,
        "report_every": 100,
        "seed": args.seed,
        # no loader processes (one thread means one thread); a bucket a little larger than the
        # corpus instead of the default 262,144 examples, which reads the 29k pairs nine times
        # before the first step
        "num_workers": 0,
        "bucket_size": 32768,
        # the model: the reference shape (brnn splits enc_hid_size over the two directions)
        "encoder_type": "brnn",
        "decoder_type": "rnn",
        "rnn_type": "GRU",
        "layers": 1,
        "word_vec_size": 256,
        "enc_hid_size": 512,
        "dec_hid_size": 512,
        "bridge": True,
        "global_attention": "mlp",
        "share_embeddings": True,
        # the settings that train well in 15 minutes (its defaults, SGD lr 1 with input feeding,
        # reach far lower BLEU in that time): Adam lr 1e-3, no input feeding, dropout as nmt's
        "input_feed": 0,
        "optim": "adam",
        "learning_rate": 0.001,
        "max_grad_norm": 1.0,
        "dropout": [0.1],
        "batch_type": "tokens",
        "batch_size": 1000,
        "normalization": "tokens",
        "valid_batch_size": 64,
    }
    (onmt / "train.yaml").write_text(json.dumps(config, indent=1), encoding="utf-8")  # JSON is YAML
    print(f"prepared {p['nmt']} and {onmt}")


def train(args) -> None:
    """Both trainers at once, one thread each, for the same wall-clock minutes."""
    p = _paths(args)
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    seconds = int(args.minutes * 60)
    nmt = [
        sys.executable,
        "-m",
        "nmt_cli",
        "train",
        str(RECIPE),
        "--run-dir",
        str(p["nmt"]),
        "--max-minutes",
        str(args.minutes),
        "--set",
        f"train.seed={args.seed}",
        *[x for kv in NMT_SET for x in ("--set", kv)],
    ]
    onmt = [
        "timeout",
        str(seconds),
        str(p["bin"] / "onmt_train"),
        "-config",
        str(p["onmt"] / "train.yaml"),
    ]
    done = train_all(
        {"nmt": ["timeout", str(seconds + 300), *nmt], "OpenNMT-py": onmt},
        {
            "nmt": p["nmt"].parent / "nmt.train.log",
            "OpenNMT-py": p["onmt"].parent / "onmt.train.log",
        },
        env,
    )
    (code_nmt, cpu_nmt, wall), (code_onmt, cpu_onmt, _) = done["nmt"], done["OpenNMT-py"]
    print(
        f"trained side by side for {wall / 60:.1f} min; CPU minutes nmt "
        f"{cpu_nmt / 60:.1f}, OpenNMT-py {cpu_onmt / 60:.1f}; exit codes {code_nmt}, {code_onmt} "
        "(124 = stopped by its time limit)"
    )


def _latest_onmt(onmt: Path) -> Path:
    ckpts = sorted(onmt.glob("model_step_*.pt"), key=lambda x: int(x.stem.rsplit("_", 1)[1]))
    if not ckpts:
        sys.exit(f"{onmt}: no OpenNMT-py checkpoint; run the train step first")
    return ckpts[-1]


def _commands(
    p: dict,
    args,
    onmt_model: Path,
    beam: int,
    src_text: Path,
    src_sp: Path,
    hyp_nmt: Path,
    hyp_onmt: Path,
) -> dict[str, list[str]]:
    """Each toolkit's translate command: nmt on raw text, OpenNMT-py on its pieces."""
    return {
        "nmt": [
            sys.executable,
            "-m",
            "nmt_cli",
            "translate",
            "-m",
            str(p["nmt"]),
            "-i",
            str(src_text),
            "-o",
            str(hyp_nmt),
            "--beam-size",
            str(beam),
            *(
                ["--batch-size", str(args.nmt_greedy_batch)]
                if beam == 1 and args.nmt_greedy_batch
                else []
            ),
            *args.translate_option,
        ],
        "OpenNMT-py": [
            str(p["bin"] / "onmt_translate"),
            "-model",
            str(onmt_model),
            "-src",
            str(src_sp),
            "-output",
            str(hyp_onmt),
            "-beam_size",
            str(beam),
            "-batch_size",
            str(ONMT_BATCH[beam == 1]),
            "-max_length",
            str(args.onmt_max_length),
        ],
    }


def _parameters(base: Path) -> dict[str, float | None]:
    """Each model's parameter count as its trainer logged it (millions; None without a log): the
    check that the two sides really have the same shape."""
    import re

    found = {}
    for name, log, pattern, scale in (
        ("nmt", "nmt.train.log", r"model: ([0-9.]+)M parameters", 1.0),
        ("OpenNMT-py", "onmt.train.log", r"number of parameters: ([0-9]+)", 1e-6),
    ):
        match = (
            re.search(pattern, (base / log).read_text(encoding="utf-8"))
            if (base / log).exists()
            else None
        )
        found[name] = round(float(match.group(1)) * scale, 2) if match else None
    return found


def translate(args) -> None:
    import sacrebleu

    from nmt_cli.data.tokenizer import Tokenizer

    p = _paths(args)
    out = Path(args.dir) / "out"
    out.mkdir(exist_ok=True)
    compile_nmt()  # both sides start from byte-compiled modules
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    onmt_env = dict(env, **ONMT_TORCH_SHIM)
    src_text = p["nmt"] / "data" / "test.src.txt"
    refs = (p["nmt"] / "data" / "test.tgt.txt").read_text(encoding="utf-8").split("\n")[:-1]
    onmt_model = _latest_onmt(p["onmt"])
    sp = Tokenizer.load(p["nmt"]).tgt
    if not args.onmt_max_length:
        longest = max(
            len(x.split())
            for x in (p["onmt"] / "test.src.sp").read_text(encoding="utf-8").split("\n")
        )
        args.onmt_max_length = int(1.5 * longest + 10)
    # Each toolkit's start-up: the same command on the test set's first line, so that the
    # decoding itself (whole process minus start-up) can be compared as well as the whole
    (out / "one.src.txt").write_text(
        src_text.read_text(encoding="utf-8").split("\n")[0] + "\n", encoding="utf-8"
    )
    (out / "one.src.sp").write_text(
        (p["onmt"] / "test.src.sp").read_text(encoding="utf-8").split("\n")[0] + "\n",
        encoding="utf-8",
    )
    envs = {"nmt": env, "OpenNMT-py": onmt_env}
    startup = alternate(
        _commands(
            p,
            args,
            onmt_model,
            1,
            out / "one.src.txt",
            out / "one.src.sp",
            out / "nmt.one.txt",
            out / "onmt.one.txt",
        ),
        envs,
        args.repeat,
        "start-up",
    )
    rows = []
    for beam in args.beams:
        hyp_nmt, hyp_onmt = out / f"nmt.beam{beam}.txt", out / f"onmt.beam{beam}.txt"
        commands = _commands(
            p, args, onmt_model, beam, src_text, p["onmt"] / "test.src.sp", hyp_nmt, hyp_onmt
        )
        runs = alternate(commands, envs, args.repeat, f"beam {beam}")
        onmt_text = [
            sp.decode(line.split())
            for line in hyp_onmt.read_text(encoding="utf-8").split("\n")[:-1]
        ]
        hyps = {
            "nmt": hyp_nmt.read_text(encoding="utf-8").split("\n")[:-1],
            "OpenNMT-py": onmt_text,
        }
        for name in commands:
            times, cpus = runs[name]
            bleu = sacrebleu.corpus_bleu(hyps[name], [refs]).score
            rows.append(
                {
                    "toolkit": name,
                    "beam": beam,
                    "min_s": round(min(times), 2),
                    "median_s": round(statistics.median(times), 2),
                    "runs_s": [round(t, 2) for t in times],
                    "cpu_s": [round(t, 2) for t in cpus],
                    "bleu": round(bleu, 2),
                    "startup_min_s": round(min(startup[name][0]), 2),
                    "startup_median_s": round(statistics.median(startup[name][0]), 2),
                }
            )
    print(
        f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, {args.threads} "
        f"threads each, python {platform.python_version()}, torch {torch_version()}; "
        f"{len(refs)} sentences; OpenNMT-py model {onmt_model.name}"
    )
    import torch

    from nmt_cli.runtime.device import resolve_decode_precision

    precision = resolve_decode_precision("auto", torch.device("cpu"))
    print(
        f"# nmt decodes in {precision} (decode.precision auto: bf16 where the CPU has bf16 "
        "hardware); OpenNMT-py in fp32"
    )
    sizes = _parameters(Path(args.dir))
    print(f"# parameters (millions, from the training logs): {sizes}")
    if None not in sizes.values() and abs(sizes["nmt"] / sizes["OpenNMT-py"] - 1) > 0.05:
        print("# WARNING: the two models differ in size by more than 5%: not the same shape")
    for name, (times, cpus) in startup.items():
        print(
            f"start-up    {name:<11} min {min(times):6.2f} s  "
            f"median {statistics.median(times):6.2f} s  CPU min {min(cpus):6.2f} s  (one line)"
        )
    for beam in args.beams:
        pair = {r["toolkit"]: r for r in rows if r["beam"] == beam}
        for name, r in pair.items():
            print(
                f"beam {beam}  {name:<11} min {r['min_s']:6.2f} s  median {r['median_s']:6.2f} s  "
                f"{len(refs) / r['min_s']:6.1f} sent/s  CPU min {min(r['cpu_s']):6.2f} s  "
                f"BLEU {r['bleu']:.2f}"
            )
        onmt, ours = pair["OpenNMT-py"], pair["nmt"]
        print(
            f"beam {beam}  ratio (OpenNMT-py / nmt): min {onmt['min_s'] / ours['min_s']:.2f}x  "
            f"median {onmt['median_s'] / ours['median_s']:.2f}x"
        )
        decoding = {name: r["min_s"] - r["startup_min_s"] for name, r in pair.items()}
        print(
            f"beam {beam}  without start-up (min - start-up min): nmt {decoding['nmt']:.2f} s, "
            f"OpenNMT-py {decoding['OpenNMT-py']:.2f} s, "
            f"ratio {decoding['OpenNMT-py'] / max(decoding['nmt'], 0.01):.2f}x"
        )
    print(json.dumps(rows))
    if args.record:
        table = []
        for beam in args.beams:
            pair = {r["toolkit"]: r for r in rows if r["beam"] == beam}
            onmt, ours = pair["OpenNMT-py"], pair["nmt"]
            table.append(
                [
                    "greedy" if beam == 1 else f"beam {beam}",
                    f"{ours['min_s']:.2f} / {ours['median_s']:.2f}",
                    round(len(refs) / ours["min_s"], 1),
                    f"{onmt['min_s']:.2f} / {onmt['median_s']:.2f}",
                    round(len(refs) / onmt["min_s"], 1),
                    f"{onmt['min_s'] / ours['min_s']:.2f}x / "
                    f"{onmt['median_s'] / ours['median_s']:.2f}x",
                    f"{ours['bleu']:.2f} / {onmt['bleu']:.2f}",
                ]
            )
        record.write(
            args.record,
            figure=f"Side by side with OpenNMT-py 3.5 (nmt in {precision})",
            about=f"`{args.dir}`: the two toolkits' models of the same shape, trained side by side "
            f"by this benchmark's `train` step; {len(refs):,} test sentences translated by whole "
            f"processes, {args.threads} threads each, alternating {args.repeat} times; BLEU: "
            "sacreBLEU, cased.",
            columns=[
                "search",
                "nmt min / median s",
                "nmt sentences/s",
                "OpenNMT-py min / median s",
                "OpenNMT-py sentences/s",
                "ratio min / median",
                "BLEU nmt / OpenNMT-py",
            ],
            rows=table,
            threads=args.threads,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="step", required=True)
    for name in ("setup", "prepare", "train", "translate"):
        s = sub.add_parser(name)
        s.add_argument("--venv", default="runs/onmt-venv", help="OpenNMT-py's virtual environment")
        if name != "setup":
            s.add_argument("--dir", default="runs/sbs", help="where both runs live")
    sub.choices["train"].add_argument("--minutes", type=float, default=15.0)
    for name in ("prepare", "train"):  # a second draw of the pair: both sides with another seed
        sub.choices[name].add_argument(
            "--seed",
            type=int,
            default=1234,
            help="both trainers' seed (give prepare and train the same)",
        )
    t = sub.choices["translate"]
    t.add_argument("--repeat", type=int, default=5)
    t.add_argument("--threads", type=int, default=2)
    t.add_argument("--beams", type=int, nargs="+", default=[1, 5])
    t.add_argument("--record", type=Path, help="write the figure here (bench/records/NAME.json)")
    t.add_argument(
        "--nmt-greedy-batch",
        type=int,
        default=0,
        help="nmt's sentences per batch for greedy search; 0 = its run's recipe (runs trained "
        "before decode.batch_size defaulted to 128 for greedy search store 64)",
    )
    t.add_argument(
        "--translate-option",
        action="append",
        default=[],
        help="passed to every nmt translate, e.g. --translate-option=--no-shortlist (repeatable)",
    )
    t.add_argument(
        "--onmt-max-length",
        type=int,
        default=0,
        help="OpenNMT-py's output cap; 0 = nmt's cap for the longest test source, 1.5 x its "
        "pieces + 10 (OpenNMT-py's default, 250, lets a weak model run on far longer)",
    )
    args = ap.parse_args()
    {"setup": setup, "prepare": prepare, "train": train, "translate": translate}[args.step](args)


if __name__ == "__main__":
    main()
