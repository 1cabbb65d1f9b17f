"""BLEU and chrF of a trained run on each of its test splits, in both conditions: standard
sacreBLEU (cased, detokenized, raw references) and the literature's (lowercased, normalised,
Moses-tokenized hypotheses against the official tokenized Multi30k references, which preprocessing
stores as ``RUN/data/<split>.ref.lc-tok.txt``; run dirs made before that fetch them from the
registry or ``NMT_DATA_MIRROR``). A run trained with ``data.lowercase`` stored lowercased
references, so its standard columns are lowercased BLEU and chrF, and are labelled so.

    python bench/test_bleu.py -m runs/en-fr [--beam-size 5] [--length-penalty A] [--no-shortlist]
        [--valid] [--record FILE]

``--valid`` scores the valid split first, in the same conditions, for choices that must be made on
val (whether to train on lowercased text, say, which only the lc-tok column can compare).

Prints a Markdown table (with each split's translation time and sentences/s, a whole `nmt
translate` process each) and writes RUN/test_scores.json; `--record FILE` also writes the table as
a record for bench/report.py.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import record


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", type=Path, required=True, help="run dir")
    ap.add_argument("--beam-size", type=int, default=0, help="0 = the recipe's")
    ap.add_argument("--no-shortlist", action="store_true")
    ap.add_argument("--length-penalty", type=float, default=None, help="default: the recipe's")
    ap.add_argument("--valid", action="store_true", help="score the valid split too")
    ap.add_argument("--record", type=Path, help="write the figure here (bench/records/NAME.json)")
    args = ap.parse_args()

    from nmt_cli.config.recipes import load_recipe
    from nmt_cli.data.corpora import fetch_tok_reference, read_lines
    from nmt_cli.data.store import load_meta
    from nmt_cli.evaluation.scores import score
    from nmt_cli.runtime.errors import DataError

    meta = load_meta(args.model)
    data = load_recipe(args.model / "recipe.yaml").data
    rows = []
    # A data.lowercase run stored lowercased references, so its "cased" columns are not cased.
    case = "lowercased (data.lowercase)" if data.lowercase else "cased"
    print(
        f"| test set | BLEU, {case} | chrF, {case} | BLEU, lc-tok (papers) "
        "| seconds to translate | sentences/s |"
    )
    print("|---|---|---|---|---|---|")
    for split, (src_file, *_) in meta["files"].items():
        if not (split.startswith("test") or (args.valid and split == "valid")):
            continue
        name = Path(src_file).name.split(".")[0]
        src, ref = (
            args.model / "data" / f"{split}.src.txt",
            args.model / "data" / f"{split}.tgt.txt",
        )
        cmd = [sys.executable, "-m", "nmt_cli", "translate", "-m", str(args.model), "-i", str(src)]
        if args.beam_size:
            cmd += ["--beam-size", str(args.beam_size)]
        if args.length_penalty is not None:
            cmd += ["--length-penalty", str(args.length_penalty)]
        if args.no_shortlist:
            cmd.append("--no-shortlist")
        start = time.perf_counter()
        hyps = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.split("\n")[
            :-1
        ]
        seconds = time.perf_counter() - start
        refs = ref.read_text(encoding="utf-8").split("\n")[:-1]
        standard = {
            s.metric.lower(): round(s.score, 2) for s in score(hyps, refs, ("bleu", "chrf"))
        }
        tok_ref = args.model / "data" / f"{split}.ref.lc-tok.txt"
        if (
            not tok_ref.exists() and data.corpus
        ):  # a run dir preprocessed before references were stored
            try:
                tok_ref = fetch_tok_reference(data.corpus, name, meta["tgt"])
            except DataError as exc:
                print(f"note: {exc}", file=sys.stderr)
        lc_tok = None
        if tok_ref.exists():
            lc_tok = round(
                score(hyps, read_lines(tok_ref), ("bleu",), lc_tok=meta["tgt"])[0].score, 2
            )
        rows.append(
            {
                "test": name,
                "bleu": standard["bleu"],
                "chrf": standard["chrf"],
                "bleu_lc_tok": lc_tok,
                "seconds": round(seconds, 1),
                "sentences_per_s": round(len(hyps) / seconds, 1),
                "lowercased": data.lowercase,
            }
        )
        shown_lc_tok = lc_tok if lc_tok is not None else "-"
        print(
            f"| {name} | {standard['bleu']} | {standard['chrf']} | {shown_lc_tok} "
            f"| {seconds:.1f} | {len(hyps) / seconds:.1f} |",
            flush=True,
        )
    (args.model / "test_scores.json").write_text(json.dumps(rows, indent=1))
    if args.record:
        record.write(
            args.record,
            figure=f"Test BLEU of {args.model.name}",
            about=f"`best.pt` of `{args.model}`, BLEU and chrF {case} (sacreBLEU) and the "
            "literature's lc-tok BLEU; each split translated by a whole `nmt translate` process.",
            columns=[
                "test set",
                f"BLEU, {case}",
                f"chrF, {case}",
                "BLEU, lc-tok",
                "seconds",
                "sentences/s",
            ],
            rows=[
                [
                    r["test"],
                    r["bleu"],
                    r["chrf"],
                    r["bleu_lc_tok"],
                    r["seconds"],
                    r["sentences_per_s"],
                ]
                for r in rows
            ],
            threads="default",
        )


if __name__ == "__main__":
    main()
