"""`nmt eval`: sacreBLEU's scores of hypotheses, or of models' translations side by side."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from nmt_cli.cli.app import DeviceOption, ThreadsOption, _read, app
from nmt_cli.cli.decode_options import (
    BeamSizeOption,
    LengthPenaltyOption,
    SourceOption,
    TargetOption,
    _decode_changes,
    _option_name,
)
from nmt_cli.runtime import startup
from nmt_cli.runtime.errors import UserError
from nmt_cli.runtime.interrupts import task


@app.command("eval")
@startup.command(
    "evaluation stopped; nothing was scored", uses_torch=lambda model, **_: bool(model)
)
def evaluate(
    ctx: typer.Context,
    hyp: Annotated[
        list[Path] | None,
        typer.Option(
            metavar="FILE", help="Hypotheses, one per line; repeat to compare two systems."
        ),
    ] = None,
    ref: Annotated[
        Path | None, typer.Option(help="References, one per line (plain or .gz).")
    ] = None,
    model: Annotated[
        list[str] | None,
        typer.Option(
            "-m",
            "--model",
            metavar="RUN",
            help="Run dir, checkpoint file or package; repeat to score several models side by side "
            "(to ensemble them, translate with nmt translate -m A -m B and score with --hyp).",
        ),
    ] = None,
    src: Annotated[
        Path | None,
        typer.Option(
            help="Source file: with -m, translate it first; with --by-length, bucket by it."
        ),
    ] = None,
    metrics: Annotated[
        str, typer.Option(help="Comma-separated: bleu, chrf, ter.")
    ] = "bleu,chrf,ter",
    by_length: Annotated[
        bool,
        typer.Option(
            "--by-length", help="BLEU per source-length bucket (0-10, 10-20, 20-30, 30+ words)."
        ),
    ] = False,
    lc_tok: Annotated[
        str | None,
        typer.Option(
            help="Score in the literature's condition: lowercase, normalise punctuation and "
            "Moses-tokenize the hypotheses for LANG, and the references too unless they already "
            "are (the official tokenized ones are used as given)."
        ),
    ] = None,
    beam_size: BeamSizeOption = None,
    length_penalty: LengthPenaltyOption = None,
    plot: Annotated[
        Path | None,
        typer.Option(help="With --by-length: save the BLEU-by-length chart here (plot extra)."),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
    paired_bs: Annotated[
        bool,
        typer.Option(
            "--paired-bs",
            help="Two systems: sacreBLEU's paired bootstrap test of the second against the "
            "first, a p-value per metric.",
        ),
    ] = False,
    paired_ar: Annotated[
        bool,
        typer.Option(
            "--paired-ar",
            help="Two systems: sacreBLEU's approximate randomization test, a p-value per metric.",
        ),
    ] = False,
    sentence: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="Write each sentence's BLEU and chrF here as JSON lines (line, system, bleu, "
            "chrf).",
        ),
    ] = None,
    threads: ThreadsOption = None,
    device: DeviceOption = "auto",
    split_sentences: Annotated[
        bool,
        typer.Option(
            "--split-sentences/--no-split-sentences",
            help="With -m: cut each source line into sentences and translate them as nmt "
            "translate does (default: each line one sentence, as test sets are).",
        ),
    ] = False,
    target: TargetOption = None,
    source: SourceOption = None,
    record: Annotated[
        str | None,
        typer.Option(
            metavar="TESTSET",
            help="With -m RUN: keep the scores in RUN/scores.json under this test set's name, "
            "for the card of a package nmt export makes from the same checkpoint.",
        ),
    ] = None,
) -> None:
    """Score hypotheses against references with sacreBLEU (BLEU, chrF, TER, with signatures).

    Either --hyp and --ref, or -m RUN --src FILE --ref FILE to translate and then score. Several
    -m with --by-length compare the models side by side.
    """
    # here, not at the top: sacreBLEU loads with the command, not with --help
    from nmt_cli.evaluation import scores as scoring

    if ref is None:
        raise UserError("--ref: give the reference file")
    refs = _read(ref)
    names = scoring.parse_metrics(metrics)
    if by_length and src is None:
        raise UserError("--by-length: give --src FILE (buckets are by source length)")
    if plot is not None and not by_length:
        raise UserError("--plot draws BLEU by source length: add --by-length (and --src FILE)")
    if plot is not None and not plot.parent.is_dir():
        raise UserError(f"--plot {plot}: the folder {plot.parent} does not exist")
    sources = _read(src) if src is not None else None
    systems: dict[str, list[str]] = {}
    directions: dict[str, str] = {}  # each -m's direction, for --record
    if record is not None:
        from nmt_cli.packages.scores_record import recorded_checkpoint

        if not model:
            raise UserError("--record: give -m RUN (the run dir whose scores to keep)")
        for m in model:  # before translating: a model whose scores cannot be kept
            recorded_checkpoint(m)
    if model:
        if sources is None:
            raise UserError("--src: give the source file to translate with -m")
        # Checked before translating: a mismatch found afterwards would waste the whole translation.
        if len(sources) != len(refs):
            raise UserError(
                f"--src and --ref differ in length: {len(sources)} vs {len(refs)} lines"
            )
        # torch is imported only to translate
        from nmt_cli.documents.layer import translate_texts
        from nmt_cli.translation.translator import TranslateOptions, load_translator

        changes = _decode_changes(ctx)
        for m in model:
            translator = load_translator([m], changes, device=device, name_of=_option_name)
            route = translator.routing.route(target, source)  # a language it lacks: now
            pair = (route.source or "any", route.target) if route else None
            directions[m] = "-".join(pair or (translator.recipe.src, translator.recipe.tgt))
            direction = TranslateOptions(target=target, source=source)
            if translator.lowercase and not lc_tok:
                typer.echo(
                    f"note: {m} was trained with data.lowercase and writes lowercase; against "
                    "cased references use --lc-tok LANG",
                    err=True,
                )
            with task(f"stopped while translating {src} with {m}; nothing was scored"):
                if split_sentences:
                    done = translate_texts(translator, sources, direction)
                    systems[_unique(systems, m)] = [t.text for t in done]
                else:
                    systems[_unique(systems, m)] = [
                        t.text for t in translator.translate(sources, direction)
                    ]
    elif hyp:
        for path in hyp:
            systems[_unique(systems, str(path))] = _read(path)
    else:
        raise UserError("give --hyp FILE, or -m RUN with --src FILE")
    report = {}
    for name, hyps in systems.items():
        entry = {"scores": [s.as_dict() for s in scoring.score(hyps, refs, names, lc_tok)]}
        if by_length:
            entry["by_length"] = scoring.bleu_by_length(sources, hyps, refs, lc_tok)
        report[name] = entry
    if sentence is not None and not sentence.parent.is_dir():
        raise UserError(f"--sentence {sentence}: the folder {sentence.parent} does not exist")
    from nmt_cli.evaluation.significance import compare_systems, significance_lines  # sacreBLEU

    tests = compare_systems(systems, refs, names, lc_tok, paired_bs, paired_ar, sentence)
    if plot is not None and by_length:
        from nmt_cli.translation.plots import bleu_by_length_chart  # matplotlib, the plot extra

        bleu_by_length_chart(report, plot)
    if record is not None:
        from nmt_cli.packages.scores_record import record_model_scores

        for m, name in zip(model, report):
            kept = record_model_scores(m, record, directions[m], report[name]["scores"])
            typer.echo(f"recorded {record} scores of {m} in {kept}", err=True)
    if json_out:
        payload = report if len(report) > 1 else next(iter(report.values()))
        if tests:
            payload = {**payload, "significance": tests}
        typer.echo(json.dumps(payload, indent=1))
        return
    for name, entry in report.items():
        if len(report) > 1:
            typer.echo(f"== {name}")
        for s in entry["scores"]:
            typer.echo(
                s["text"] if s["metric"] == "bleu" else f"{s['metric'].upper()} = {s['score']:.2f}"
            )
        if s and entry["scores"]:
            typer.echo(f"signature: {entry['scores'][0]['signature']}")
    for line in significance_lines(tests):
        typer.echo(line)
    if by_length:
        typer.echo("BLEU by source length (words):")
        header = "bucket   sents  " + "  ".join(f"{n[-24:]:>24}" for n in report)
        typer.echo(header)
        buckets = next(iter(report.values()))["by_length"]
        for i, row in enumerate(buckets):
            cells = "  ".join(
                f"{'-' if e['by_length'][i]['bleu'] is None else e['by_length'][i]['bleu']:>24}"
                for e in report.values()
            )
            typer.echo(f"{row['bucket']:<8} {row['sentences']:>5}  {cells}")


def _unique(systems: dict, name: str) -> str:
    """``name``, or ``name (2)``, ``name (3)``... where a system of that name is already in: the
    same file or run given twice is still two systems."""
    k, unique = 1, name
    while unique in systems:
        k += 1
        unique = f"{name} ({k})"
    return unique
