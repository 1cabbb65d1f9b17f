"""The model-family table of docs/models.md: each attention/decoder variant trained with the same
wall-clock budget on the same preprocessed data, then BLEU/chrF on a test split and BLEU by
source length.

    python bench/variants.py recipes/en-fr.yaml --base runs/en-fr --minutes 5 \
        [--only none,bahdanau-concat] [--set KEY=VALUE ...] [--out runs/variants]

--base is a preprocessed run dir of the recipe (`nmt preprocess`); its data and SentencePiece
model are copied, so every variant sees identical batches. Validation runs once, at the end, so
it costs every variant the same. Each row is printed with the command that reproduces it, and
all results go to OUT/variants.json; `--record FILE` also writes the table (with each variant's
training target tokens/s) as a record for bench/report.py.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import record
from rundirs import fresh_run_dir

VARIANTS = {
    "none": ["model.attention=none"],
    "bahdanau-concat": ["model.decoder=bahdanau", "model.attention=concat"],
    "luong-general-feeding": ["model.attention=general", "model.input_feeding=true"],
    "luong-concat-feeding": ["model.attention=concat", "model.input_feeding=true"],
    "luong-general": ["model.attention=general"],
    "luong-dot": ["model.attention=dot"],
    "luong-general-4heads": ["model.attention=general", "model.attention_heads=4"],
}
SAME_BUDGET = ["train.valid_every=1000000", "train.checkpoint_every=1000000"]


def nmt(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nmt_cli", *args], capture_output=True, text=True, check=True
    )


def run_variant(
    name: str, recipe: str, base: Path, out: Path, minutes: float, split: str, common: list[str]
) -> dict:
    from nmt_cli.evaluation.scores import bleu_by_length, score

    run_dir = fresh_run_dir(base, out / name)
    sets = [x for s in common + VARIANTS[name] + SAME_BUDGET for x in ("--set", s)]
    train_cmd = ["train", recipe, "--run-dir", str(run_dir), "--max-minutes", f"{minutes:g}", *sets]
    nmt(*train_cmd)
    summary = json.loads((run_dir / "summary.json").read_text())
    src_file, ref_file = (
        run_dir / "data" / f"{split}.src.txt",
        run_dir / "data" / f"{split}.tgt.txt",
    )
    start = time.perf_counter()
    hyps = nmt("translate", "-m", str(run_dir), "-i", str(src_file)).stdout.split("\n")[:-1]
    decode_s = time.perf_counter() - start
    sources = src_file.read_text(encoding="utf-8").split("\n")[:-1]
    refs = ref_file.read_text(encoding="utf-8").split("\n")[:-1]
    scores = {s.metric.lower(): round(s.score, 2) for s in score(hyps, refs, ("bleu", "chrf"))}
    return {
        "variant": name,
        "sets": VARIANTS[name],
        "minutes": minutes,
        "steps": summary["final_step"],
        "tgt_tokens_per_s": summary["tgt_tokens_per_s"],
        "params_m": round(_params(run_dir) / 1e6, 2),
        "valid_bleu": summary.get("best_valid_bleu"),
        "test_split": split,
        **{f"test_{k}": v for k, v in scores.items()},
        "decode_s": round(decode_s, 1),
        "by_length": bleu_by_length(sources, hyps, refs),
        "command": "nmt " + " ".join(train_cmd).replace(str(out), "OUT"),
    }


def _params(run_dir: Path) -> int:
    from nmt_cli.training.checkpoint import load_model

    model = load_model(run_dir).model
    return model.parameter_count()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("recipe")
    ap.add_argument("--base", type=Path, required=True, help="preprocessed run dir of the recipe")
    ap.add_argument("--minutes", type=float, default=5.0, help="training budget per variant")
    ap.add_argument("--only", default="", help="comma-separated subset of: " + ", ".join(VARIANTS))
    ap.add_argument(
        "--split", default="test", help="test split of the run dir to score (test = first)"
    )
    ap.add_argument("--out", type=Path, default=Path("runs/variants"))
    ap.add_argument(
        "--plot", type=Path, help="draw BLEU by source length of these variants here (plot extra)"
    )
    ap.add_argument(
        "--set",
        dest="common",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a recipe override applied to every variant (repeatable)",
    )
    ap.add_argument(
        "--report-only", action="store_true", help="print and plot OUT/variants.json, train nothing"
    )
    ap.add_argument("--record", type=Path, help="write the figure here (bench/records/NAME.json)")
    args = ap.parse_args()
    names = [n for n in args.only.split(",") if n] or list(VARIANTS)
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        sys.exit(f"unknown variant(s): {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    results_path = args.out / "variants.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    print(
        "| variant | params | steps | train tgt tok/s | valid BLEU (greedy) "
        "| test BLEU | test chrF |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in names:
        if not args.report_only:
            results[name] = run_variant(
                name, args.recipe, args.base, args.out, args.minutes, args.split, args.common
            )
            results_path.write_text(json.dumps(results, indent=1))
        r = results[name]
        print(
            f"| {name} | {r['params_m']}M | {r['steps']} | {r['tgt_tokens_per_s']:.0f} "
            f"| {r['valid_bleu']} | {r['test_bleu']} | {r['test_chrf']} |",
            flush=True,
        )
    if args.record:
        record.write(
            args.record,
            figure="Model variants with the same budget",
            about=f"Each variant of `{args.recipe}` trained for {args.minutes:g} minutes of wall "
            f"clock on the same batches, validated once at the end, then beam search on the "
            f"{args.split} split; cased sacreBLEU and chrF.",
            columns=[
                "variant",
                "parameters (M)",
                "steps",
                "target tokens/s",
                "valid BLEU",
                "test BLEU",
                "test chrF",
            ],
            rows=[
                [
                    n,
                    results[n]["params_m"],
                    results[n]["steps"],
                    round(results[n]["tgt_tokens_per_s"]),
                    results[n]["valid_bleu"],
                    results[n]["test_bleu"],
                    results[n]["test_chrf"],
                ]
                for n in names
            ],
            threads="default",
        )
    print("\nBLEU by source length (words):")
    for name in names:
        r = results[name]
        print(
            f"  {name:<24}"
            + "  ".join(f"{b['bucket']}: {b['bleu']} ({b['sentences']})" for b in r["by_length"])
        )
    if args.plot:
        from nmt_cli.translation.plots import bleu_by_length_chart

        bleu_by_length_chart({n: results[n] for n in names}, args.plot)


if __name__ == "__main__":
    main()
