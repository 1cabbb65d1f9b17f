"""The `nmt` command line. Each command parses its options and calls library functions; how it
starts (torch's import, threads, what an interruption leaves unfinished) is declared with
nmt_cli.startup.command, and main() turns errors and signals into one line and an exit code."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from nmt_cli import __version__, startup
from nmt_cli.errors import UserError

app = typer.Typer(
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    help="Attentional RNN encoder-decoder translation: preprocess, train, translate, evaluate.",
)

SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="KEY=VALUE",
        help="Override a recipe key by dotted path, e.g. model.hidden_dim=128 "
        "(repeatable; checked like the file).",
    ),
]
RunDirOption = Annotated[
    Path | None,
    typer.Option("--run-dir", help="Where the run's files go (default: runs/<recipe name>)."),
]
ModelOption = Annotated[
    list[str] | None,
    typer.Option(
        "-m",
        "--model",
        metavar="RUN",
        help="Run dir or checkpoint file; repeat to ensemble several models.",
    ),
]
# How nmt_cli.device.resolve_threads decides, spelled out so that --help does not import torch.
ThreadsOption = Annotated[
    int | None,
    typer.Option(
        "--threads",
        min=1,
        metavar="N",
        help="CPU threads for torch (also $NMT_THREADS). Default: the cores "
        "not already busy with other processes, so that a busy machine does not slow nmt down many "
        "times over; OMP_NUM_THREADS, when set, is used as given.",
    ),
]


# The decoding options of translate, eval and serve. Each overrides the recipe key of its name in
# decode.* (None: not given, the recipe's value stands); see _decode_changes.
DeviceOption = Annotated[str, typer.Option(help="auto, cpu, cuda or mps.")]
BeamSizeOption = Annotated[
    int | None,
    typer.Option(min=1, help="Beam width; 1 = greedy (default: the recipe's decode.beam_size)."),
]
LengthPenaltyOption = Annotated[
    float | None,
    typer.Option(
        min=0.0, help="GNMT length penalty alpha (default: the recipe's decode.length_penalty)."
    ),
]
BatchSizeOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Sentences per batch (default: the recipe's decode.batch_size; 0 there = "
        "128 for greedy search, 192 decoding in bf16 on the CPU, 64 for beam search).",
    ),
]
BatchTokensOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Source tokens per batch, instead of --batch-size (default: the recipe's "
        "decode.batch_tokens).",
    ),
]
PrecisionOption = Annotated[
    str | None,
    typer.Option(
        help="auto, fp32 or bf16: the weights' and matrix products' precision; auto = bf16 on a "
        "CPU with bf16 hardware (AVX512-BF16/AMX), else fp32 (default: the recipe's "
        "decode.precision)."
    ),
]
ShortlistPerSourceOption = Annotated[
    int | None,
    typer.Option(
        min=0,
        help="Candidates per source piece the shortlist adds; 0 = all it learned (default: the "
        "recipe's decode.shortlist_per_source).",
    ),
]
ShortlistFrequentOption = Annotated[
    int | None,
    typer.Option(
        min=0,
        help="Most common target pieces the shortlist adds; 0 = all it learned (default: the "
        "recipe's decode.shortlist_frequent).",
    ),
]
ShortlistOption = Annotated[
    bool | None,
    typer.Option(
        "--shortlist/--no-shortlist",
        help="Decode over the vocabulary shortlist learned from the training data (default: the "
        "recipe's decode.shortlist).",
    ),
]
WorkersOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="CPU: decode this many batches side by side, one core each (default: the recipe's "
        "decode.workers; 0 there = one per CPU thread, see --threads).",
    ),
]


def _decode_changes(ctx: typer.Context) -> dict:
    """The command's options named after decode.* keys that were given, for load_translator to lay
    over the recipe's decode section (None: not given, the recipe's value stands)."""
    from nmt_cli.config import DecodeConfig

    keys = {f.name for f in dataclasses.fields(DecodeConfig)}
    return {key: value for key, value in ctx.params.items() if key in keys and value is not None}


def _option_name(key: str) -> str:
    """The option that sets decode.``key``, as errors name it (``--beam-size``)."""
    return "--" + key.replace("_", "-")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"nmt {__version__}")
        raise typer.Exit()


@app.callback(invoke_without_command=True)
def main_options(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    if ctx.invoked_subcommand is None:  # a bare `nmt`: the help is the answer
        typer.echo(ctx.get_help(), err=True)
        raise typer.Exit(2)


def _recipe(path: Path, overrides: list[str] | None, extra: list[str] = ()):
    from nmt_cli.recipes import load_recipe

    return load_recipe(path, list(overrides or []) + list(extra))


def _run_dir(recipe, run_dir: Path | None) -> Path:
    return run_dir if run_dir is not None else Path("runs") / recipe.name


@app.command()
@startup.command("preprocessing stopped before it began; nothing was written", uses_torch=False)
def preprocess(
    recipe: Annotated[Path, typer.Argument(help="YAML recipe, e.g. recipes/en-fr.yaml")],
    run_dir: RunDirOption = None,
    set_: SetOption = None,
) -> None:
    """Fetch the corpus, clean and filter it, learn SentencePiece, and store encoded splits in
    the run dir."""
    from nmt_cli.interrupts import task
    from nmt_cli.preprocess import preprocess as run_preprocess

    r = _recipe(recipe, set_)
    out = _run_dir(r, run_dir)
    with task(f"preprocessing into {out} did not finish; run nmt preprocess again"):
        run_preprocess(r, out, log=lambda m: typer.echo(m, err=True))
    typer.echo(f"preprocessed into {out}", err=True)


@app.command()
@startup.command(
    "training stopped before its first step; the run dir's checkpoints are as they were"
)
def train(
    recipe: Annotated[Path, typer.Argument(help="YAML recipe, e.g. recipes/en-fr.yaml")],
    run_dir: RunDirOption = None,
    max_steps: Annotated[
        int | None, typer.Option(help="Stop after this many steps (train.max_steps).")
    ] = None,
    max_minutes: Annotated[
        float | None,
        typer.Option(help="Stop after this much wall-clock time (train.max_minutes)."),
    ] = None,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or mps.")] = "auto",
    restart: Annotated[
        bool, typer.Option("--restart", help="Ignore existing checkpoints and start over.")
    ] = False,
    threads: ThreadsOption = None,
    init_from: Annotated[
        str | None,
        typer.Option(
            "--init-from",
            metavar="RUN|CHECKPOINT",
            help="Fine-tune: start from this model's weights and tokenizer, with a fresh "
            "optimiser and schedule (train.init_from).",
        ),
    ] = None,
    set_: SetOption = None,
) -> None:
    """Train a model; resumes from the run dir's last checkpoint when there is one.

    Runs preprocessing first if the run dir has no data. Ctrl-C or SIGTERM writes a checkpoint and
    stops; running the same command again resumes exactly.
    """
    from nmt_cli.device import pick_device, resolve_precision
    from nmt_cli.interrupts import task
    from nmt_cli.preprocess import ensure_preprocessed
    from nmt_cli.training import train as run_train

    extra = (
        ([f"train.max_steps={max_steps}"] if max_steps is not None else [])
        + ([f"train.max_minutes={max_minutes}"] if max_minutes is not None else [])
        + ([f"train.init_from={init_from}"] if init_from is not None else [])
    )
    r = _recipe(recipe, set_, extra)
    out = _run_dir(r, run_dir)
    # a device mismatch fails before preprocessing, and so does an initial model that cannot be used
    resolve_precision(r.train.precision, pick_device(device))
    if r.train.init_from:
        from nmt_cli.finetune import initial_tokenizer

        initial_tokenizer(r)
    with task(f"preprocessing into {out} did not finish; run the same command again"):
        ensure_preprocessed(r, out, log=lambda m: typer.echo(m, err=True))
    summary = run_train(r, out, device=device, restart=restart)
    typer.echo(
        json.dumps(
            {
                k: summary[k]
                for k in ("steps", "final_step", "wall_s", "tgt_tokens_per_s", "peak_rss_mb")
            }
        )
    )


def _translation_unfinished(output: Path | None, **_) -> str:
    written = "nothing was written" if output is None else f"{output} was not written"
    return f"translation stopped before it began; {written}"


@app.command()
@startup.command(_translation_unfinished)
def translate(
    ctx: typer.Context,
    model: ModelOption = None,
    input: Annotated[
        Path | None, typer.Option("-i", "--input", help="Read this file instead of stdin.")
    ] = None,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write here instead of stdout.")
    ] = None,
    beam_size: BeamSizeOption = None,
    length_penalty: LengthPenaltyOption = None,
    batch_size: BatchSizeOption = None,
    batch_tokens: BatchTokensOption = None,
    nbest: Annotated[
        int,
        typer.Option(
            min=1, help="Print the K best as 'i ||| text ||| score ||| normalised score'."
        ),
    ] = 1,
    scores: Annotated[
        bool, typer.Option("--scores", help="Append the log-probability after a tab.")
    ] = False,
    alignments: Annotated[
        bool,
        typer.Option("--alignments", help="Append hard word alignments (Pharaoh i-j) after a tab."),
    ] = False,
    attention_plot: Annotated[
        Path | None,
        typer.Option(
            help="Save a heatmap PNG of the attention per sentence here (needs the plot extra)."
        ),
    ] = None,
    show_attention: Annotated[
        bool,
        typer.Option(
            "--show-attention", help="Print the attention as a Unicode heatmap on stderr."
        ),
    ] = False,
    quantize: Annotated[
        str, typer.Option(help="none or int8 (dynamic int8 quantisation for CPU decoding).")
    ] = "none",
    precision: PrecisionOption = None,
    shortlist: ShortlistOption = None,
    shortlist_per_source: ShortlistPerSourceOption = None,
    shortlist_frequent: ShortlistFrequentOption = None,
    workers: WorkersOption = None,
    threads: ThreadsOption = None,
    device: DeviceOption = "auto",
) -> None:
    """Translate lines from stdin (or -i) to stdout (or -o): one output line per input line, in
    order.

    With -o the translation goes to a temporary file renamed to FILE once complete. On a terminal,
    progress (lines, lines/s, and with -i the total and time left) is shown on stderr.
    """
    from nmt_cli.interrupts import task
    from nmt_cli.lines import OutputOptions, count_lines, translate_stream
    from nmt_cli.output_file import atomic_text_output
    from nmt_cli.translate import load_translator

    if attention_plot is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise UserError("--attention-plot needs matplotlib: pip install 'nmt[plot]'") from None
        from nmt_cli.plots import plot_dir

        plot_dir(attention_plot)  # before the model loads: a bad folder should not cost a load
    translator = load_translator(
        model, _decode_changes(ctx), device=device, quantize=quantize, name_of=_option_name
    )
    if nbest > translator.config.beam_size:
        raise UserError(f"--nbest {nbest} exceeds the beam size {translator.config.beam_size}")
    out_opts = OutputOptions(
        scores=scores,
        alignments=alignments,
        nbest=nbest,
        attention_plot=str(attention_plot) if attention_plot else None,
        show_attention=show_attention,
    )
    try:
        in_stream = open(input, "rb") if input is not None else sys.stdin.buffer
    except OSError as exc:
        raise UserError(f"{input}: cannot read ({exc.strerror})") from None
    interactive = input is None and sys.stdin.isatty()
    progress = None
    if sys.stderr.isatty() and not interactive and not show_attention:
        from tqdm import tqdm

        progress = tqdm(
            total=count_lines(input) if input is not None else None,
            unit="line",
            file=sys.stderr,
            dynamic_ncols=True,
        )
    done = [0]

    def left() -> str:
        where = (
            f"{output} was not written"
            if output is not None
            else "the lines before it are on stdout"
        )
        return f"translation stopped after {done[0]} lines; {where}"

    try:
        with task(left), atomic_text_output(output) as out_stream:
            translate_stream(
                translator,
                in_stream,
                out_stream or sys.stdout,
                interactive=interactive,
                out=out_opts,
                progress=progress,
                done=done,
                chunk_lines=256 if progress is not None else 2000,
            )
    finally:
        if progress is not None:
            progress.close()
        if input is not None:
            in_stream.close()


@app.command()
@startup.command("the server stopped before it began listening")
def serve(
    model: Annotated[
        list[str] | None,
        typer.Option(
            "-m",
            "--model",
            metavar="RUN",
            help="Run dir or checkpoint file to serve; repeat to serve several models "
            "(each its recipe's language pair).",
        ),
    ] = None,
    host: Annotated[
        str, typer.Option(help="Address to listen on; the default answers this machine only.")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="TCP port (0: any free one, printed at start).")
    ] = 5000,
    api_key: Annotated[
        str | None,
        typer.Option(
            help="Translation requests must carry this key (api_key in the body, or an X-API-Key "
            "header); others get 403."
        ),
    ] = None,
    max_batch_tokens: Annotated[
        int,
        typer.Option(
            min=0,
            help="Source subwords decoded together at most; a full batch goes at once. 0: no "
            "batching, one request at a time.",
        ),
    ] = 1024,
    max_wait_ms: Annotated[
        float,
        typer.Option(
            min=0.0, help="How long a batch waits for more requests after its first one arrived."
        ),
    ] = 5.0,
    max_chars: Annotated[
        int, typer.Option(min=1, help="Characters of text in one request at most (more: 413).")
    ] = 5000,
    max_queue: Annotated[
        int,
        typer.Option(
            min=1,
            help="Sentences waiting or decoding at most; a request that would pass it gets 503.",
        ),
    ] = 1024,
    timeout: Annotated[
        float,
        typer.Option(min=0.001, help="Seconds a request may wait for its translation (more: 504)."),
    ] = 30.0,
    threads: Annotated[
        int | None,
        typer.Option(
            min=1,
            metavar="N",
            help="CPU threads for decoding (also $NMT_THREADS); with batching, one decoding "
            "thread per CPU thread. Default: the cores not already busy.",
        ),
    ] = None,
    shortlist: Annotated[
        bool | None,
        typer.Option(
            "--shortlist/--no-shortlist",
            help="Decode over the vocabulary shortlist (default: the recipe's "
            "decode.shortlist); each sentence keeps its own candidates, so an answer never "
            "depends on its batch.",
        ),
    ] = None,
    device: DeviceOption = "auto",
) -> None:
    """Serve models over HTTP: a LibreTranslate-compatible API, a native one, and a web page at /.

    Each -m serves its recipe's language pair with its recipe's decoding settings. Concurrent
    requests are decoded together in batches. SIGTERM or Ctrl-C stops accepting requests, finishes
    those in flight and exits 0. Needs the serve extra (pip install 'nmt[serve]').
    """
    from nmt_cli.serve import ServeSettings
    from nmt_cli.serve import serve as run_serve

    run_serve(
        model,
        ServeSettings(
            host=host,
            port=port,
            api_key=api_key,
            max_batch_tokens=max_batch_tokens,
            max_wait_ms=max_wait_ms,
            max_chars=max_chars,
            max_queue=max_queue,
            timeout_s=timeout,
            threads=threads,
            shortlist=shortlist,
        ),
        device=device,
    )


def _read(path: Path) -> list[str]:
    from nmt_cli.corpora import read_lines

    return read_lines(path)


@app.command("eval")
@startup.command(
    "evaluation stopped; nothing was scored", uses_torch=lambda model, **_: bool(model)
)
def evaluate(
    ctx: typer.Context,
    hyp: Annotated[Path | None, typer.Option(help="Hypotheses, one per line.")] = None,
    ref: Annotated[
        Path | None, typer.Option(help="References, one per line (plain or .gz).")
    ] = None,
    model: Annotated[
        list[str] | None,
        typer.Option(
            "-m",
            "--model",
            metavar="RUN",
            help="Run dir or checkpoint file; repeat to score several models side by side "
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
            "Moses-tokenize the hypotheses for LANG; give the official tokenized references."
        ),
    ] = None,
    beam_size: BeamSizeOption = None,
    length_penalty: LengthPenaltyOption = None,
    plot: Annotated[
        Path | None,
        typer.Option(help="With --by-length: save the BLEU-by-length chart here (plot extra)."),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
    threads: ThreadsOption = None,
    device: DeviceOption = "auto",
) -> None:
    """Score hypotheses against references with sacreBLEU (BLEU, chrF, TER, with signatures).

    Either --hyp and --ref, or -m RUN --src FILE --ref FILE to translate and then score. Several
    -m with --by-length compare the models side by side.
    """
    from nmt_cli import scoring

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
    if model:
        if sources is None:
            raise UserError("--src: give the source file to translate with -m")
        # Checked before translating: a mismatch found afterwards would waste the whole translation.
        if len(sources) != len(refs):
            raise UserError(
                f"--src and --ref differ in length: {len(sources)} vs {len(refs)} lines"
            )
        from nmt_cli.interrupts import task
        from nmt_cli.translate import load_translator  # torch is imported only to translate

        changes = _decode_changes(ctx)
        for m in model:
            translator = load_translator([m], changes, device=device, name_of=_option_name)
            if translator.lowercase and not lc_tok:
                typer.echo(
                    f"note: {m} was trained with data.lowercase and writes lowercase; against "
                    "cased references use --lc-tok LANG with the tokenized ones",
                    err=True,
                )
            with task(f"stopped while translating {src} with {m}; nothing was scored"):
                systems[m] = [t.text for t in translator.translate(sources)]
    elif hyp is not None:
        systems[str(hyp)] = _read(hyp)
    else:
        raise UserError("give --hyp FILE, or -m RUN with --src FILE")
    report = {}
    for name, hyps in systems.items():
        entry = {"scores": [s.as_dict() for s in scoring.score(hyps, refs, names, lc_tok)]}
        if by_length:
            entry["by_length"] = scoring.bleu_by_length(sources, hyps, refs, lc_tok)
        report[name] = entry
    if plot is not None and by_length:
        from nmt_cli.plots import bleu_by_length_chart

        bleu_by_length_chart(report, plot)
    if json_out:
        typer.echo(json.dumps(report if len(report) > 1 else next(iter(report.values())), indent=1))
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


@app.command()
@startup.command("scoring stopped before any score was printed")
def score(
    model: Annotated[
        list[str] | None,
        typer.Option(
            "-m", "--model", metavar="RUN", help="Run dir or checkpoint file (one model)."
        ),
    ] = None,
    src: Annotated[Path | None, typer.Option(help="Source sentences.")] = None,
    tgt: Annotated[Path | None, typer.Option(help="Target sentences to force-decode.")] = None,
    threads: ThreadsOption = None,
    device: DeviceOption = "auto",
) -> None:
    """Print log p(target | source) for each pair (forced decoding), one number per line."""
    from nmt_cli.checkpoint import load_model
    from nmt_cli.device import pick_device
    from nmt_cli.interrupts import task
    from nmt_cli.translate import force_decode

    if not model or src is None or tgt is None:
        raise UserError("give -m RUN, --src FILE and --tgt FILE")
    if len(model) > 1:
        raise UserError("-m: nmt score force-decodes with one model; give -m once")
    dev = pick_device(device)
    loaded = load_model(model[0], dev)
    sources, targets = _read(src), _read(tgt)
    if len(sources) != len(targets):
        raise UserError(f"{src} has {len(sources)} lines but {tgt} has {len(targets)}")
    with task(f"scoring stopped before any score was printed ({len(sources)} pairs)"):
        values = force_decode(
            loaded.model,
            loaded.tokenizer,
            sources,
            targets,
            dev,
            lowercase=loaded.recipe.data.lowercase,
        )
    for value in values:
        typer.echo(f"{value:.4f}")


def _averaging_unfinished(output: Path, **_) -> str:
    return f"averaging stopped; {output} was not written"


@app.command()
@startup.command(_averaging_unfinished)
def average(
    run_dir: Annotated[Path, typer.Argument(help="Run dir whose numbered checkpoints to average.")],
    last: Annotated[int, typer.Option(min=1, help="Average the N newest checkpoints.")] = 5,
    output: Annotated[
        Path, typer.Option("-o", "--output", help="Where to write the averaged checkpoint.")
    ] = Path("averaged.pt"),
) -> None:
    """Average the weights of the last N checkpoints into one checkpoint that translate can use."""
    from nmt_cli.checkpoint import average as run_average
    from nmt_cli.checkpoint import step_checkpoints

    paths = step_checkpoints(run_dir)[-last:]
    if not paths:
        raise UserError(f"{run_dir}: no numbered checkpoints (checkpoints/step-N.pt) to average")
    if len(paths) < last:
        typer.echo(f"note: only {len(paths)} checkpoints found, averaging those", err=True)
    out = run_average(paths, output)
    typer.echo(f"averaged {len(paths)} checkpoints into {out}", err=True)


def _close_stdout() -> None:
    """Flush what the command wrote to stdout, so that a reader who closed the pipe early is met
    here (BrokenPipeError, exit 141) rather than in the interpreter's teardown."""
    sys.stdout.flush()


def main() -> None:
    """Entry point: user errors become one line on stderr and exit code 2, never a traceback; a
    signal exits 128 + its number with one line saying what was left incomplete."""
    from nmt_cli.errors import TrainingInterrupted
    from nmt_cli.interrupts import Interrupted

    startup.prepare_process()
    try:
        code = app(standalone_mode=False, prog_name="nmt")
        _close_stdout()
    except UserError as exc:
        print(f"nmt: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except typer.TyperException as exc:  # a bad option or value on the command line
        where = getattr(getattr(exc, "ctx", None), "command_path", "nmt")
        print(f"nmt: error: {exc.format_message()} (see {where} --help)", file=sys.stderr)
        sys.exit(exc.exit_code)
    except TrainingInterrupted as exc:
        print(f"nmt: {exc}; checkpoint written, run the same command to resume", file=sys.stderr)
        sys.exit(exc.exit_code)
    except Interrupted as exc:
        print(f"nmt: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("nmt: interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:
        # the reader is gone: what is still buffered for stdout goes nowhere, not into an error
        # at exit (the signal module's documentation on SIGPIPE)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        print("nmt: aborted", file=sys.stderr)
        sys.exit(1)
    if isinstance(code, int) and code:  # typer hands back an Exit's code (130 for a stray Ctrl-C)
        if code == 130:
            print("nmt: interrupted", file=sys.stderr)
        sys.exit(code)
