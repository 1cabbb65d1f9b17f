"""`nmt translate` and `nmt score`: a trained model's translations, and its log-probabilities of
given ones."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from nmt_cli.cli.app import DeviceOption, ModelOption, ThreadsOption, _read, app
from nmt_cli.cli.decode_options import (
    BatchSizeOption,
    BatchTokensOption,
    BeamSizeOption,
    GlossaryOption,
    LanguageVocabularyOption,
    LengthPenaltyOption,
    NumbersOption,
    PrecisionOption,
    PrefixTabOption,
    RestoreCaseOption,
    SampleOption,
    SamplingTopkOption,
    SeedOption,
    ShortlistFrequentOption,
    ShortlistOption,
    ShortlistPerSourceOption,
    SourceOption,
    TargetOption,
    TemperatureOption,
    WorkersOption,
    _decode_changes,
    _option_name,
)
from nmt_cli.documents.numbers import check_style
from nmt_cli.documents.protect import Protector
from nmt_cli.runtime import startup
from nmt_cli.runtime.errors import UserError, failure_reason


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
            min=1,
            help="Print the K best as 'i ||| text ||| score ||| normalised score', then "
            "' ||| confidence' with --scores and ' ||| alignment' with --alignments.",
        ),
    ] = 1,
    scores: Annotated[
        bool,
        typer.Option(
            "--scores",
            help="Append the log-probability and the confidence (0 to 1) after tabs; with "
            "--nbest, each alternative's confidence as one more ' ||| ' field.",
        ),
    ] = False,
    alignments: Annotated[
        bool,
        typer.Option(
            "--alignments",
            help="Append hard word alignments (Pharaoh i-j) after a tab; with --nbest, each "
            "alternative's own as the last ' ||| ' field.",
        ),
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
    language_vocabulary: LanguageVocabularyOption = None,
    workers: WorkersOption = None,
    threads: ThreadsOption = None,
    device: DeviceOption = "auto",
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="text: each line a paragraph, cut into sentences; html: the whole input is one "
            "HTML document (read whole, at most 16 MiB), its markup kept; docx, pptx, odt, epub, "
            "srt, vtt, md: a file of that kind, its formatting kept (docs/translate.md#files). "
            "Default: the one -i's extension names, else text.",
        ),
    ] = None,
    split_sentences: Annotated[
        bool | None,
        typer.Option(
            "--split-sentences/--no-split-sentences",
            help="Cut paragraphs into sentences (the default), or translate each line as one "
            "sentence (sentence-per-line test sets; implied by --prefix-tab).",
        ),
    ] = None,
    protect: Annotated[
        list[str] | None,
        typer.Option(
            "--protect",
            metavar="REGEX",
            help="Copy text matching REGEX untranslated (repeatable), besides the built-in "
            "placeholders, URLs and e-mail addresses.",
        ),
    ] = None,
    target: TargetOption = None,
    source: SourceOption = None,
    shard: Annotated[
        str | None,
        typer.Option(
            help="I/N: translate only the I-th of N equal parts of -i FILE (0-based), so that N "
            "processes share a file and their outputs, concatenated in order, are its "
            "translation; 'rank' takes I/N from torchrun's RANK/WORLD_SIZE; {shard} in -o is "
            "replaced by I."
        ),
    ] = None,
    glossary: GlossaryOption = None,
    prefix_tab: PrefixTabOption = False,
    restore_case: RestoreCaseOption = True,
    numbers: NumbersOption = "keep",
    sample: SampleOption = False,
    sampling_topk: SamplingTopkOption = 0,
    temperature: TemperatureOption = 1.0,
    seed: SeedOption = 0,
) -> None:
    """Translate lines from stdin (or -i) to stdout (or -o): one output line per input line, in
    order; each line is a paragraph, cut into sentences that are translated and put back with
    its spacing. With --format html the input is one HTML document; a .docx, .pptx, .odt, .epub,
    .srt, .vtt or .md file (-i FILE, or --format) is translated with its formatting kept.

    With -o the translation goes to a temporary file renamed to FILE once complete. On a terminal,
    progress (lines, lines/s, and with -i the total and time left) is shown on stderr.
    """
    # Imported here, not at the top: `nmt --help` and the commands that do not translate need
    # not load torch.
    from tqdm import tqdm

    from nmt_cli.documents.lines import OutputOptions, count_lines, translate_stream
    from nmt_cli.runtime.interrupts import task
    from nmt_cli.runtime.output_file import atomic_text_output
    from nmt_cli.translation.contract import TranslateOptions
    from nmt_cli.translation.controlled import command_glossary, sampling_of
    from nmt_cli.translation.plots import check_plotting
    from nmt_cli.translation.shards import ShardReader, parse_shard, shard_output, shard_range
    from nmt_cli.translation.translator import load_translator

    if attention_plot is not None:
        check_plotting(attention_plot)  # before the model loads: a bad folder should not cost one
    out_opts = OutputOptions(
        scores=scores,
        alignments=alignments,
        nbest=nbest,
        attention_plot=str(attention_plot) if attention_plot else None,
        show_attention=show_attention,
    )
    fmt = _input_format(input, fmt)
    documents = _document_options(fmt, split_sentences, protect, out_opts, prefix_tab)
    if shard is not None and fmt != "text":
        raise UserError(f"--shard: it splits lines of text, and a {fmt} file is translated whole")
    check_style(numbers, "--numbers")
    translator = load_translator(
        model, _decode_changes(ctx), device=device, quantize=quantize, name_of=_option_name
    )
    if nbest > translator.config.beam_size:
        raise UserError(f"--nbest {nbest} exceeds the beam size {translator.config.beam_size}")
    route = translator.routing.route(target, source)  # a language it lacks: refused before reading
    if route is not None and route.zero_shot:
        typer.echo(_zero_shot_note(translator, route), err=True)
    options = TranslateOptions(
        target=target,
        source=source,
        glossary=command_glossary(glossary, translator),
        sampling=sampling_of(
            sample,
            sampling_topk,
            temperature,
            seed,
            nbest=nbest,
            forcing=bool(glossary) or prefix_tab,
        ),
        restore_case=restore_case,
        numbers=numbers,
    )
    try:
        in_stream = open(input, "rb") if input is not None else sys.stdin.buffer
    except OSError as exc:
        raise UserError(f"{input}: cannot read ({exc.strerror})") from None
    if fmt == "html":
        _translate_html(translator, in_stream, input, output, options, documents)
        return
    if fmt not in ("text", "html"):
        _translate_file(translator, in_stream, input, output, fmt, options, documents)
        return
    if shard is not None:
        if input is None:
            raise UserError("--shard: give the file with -i (each shard counts its lines)")
        index, count = parse_shard(shard)
        output = shard_output(output, index, count, from_rank=shard == "rank")
        in_stream = ShardReader(in_stream, *shard_range(count_lines(input), index, count))
    interactive = input is None and sys.stdin.isatty()
    progress = None
    if sys.stderr.isatty() and not interactive and not show_attention:
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
                options=options,
                documents=documents,
                prefix_tab=prefix_tab,
                progress=progress,
                done=done,
                chunk_lines=256 if progress is not None else 2000,
            )
    finally:
        if progress is not None:
            progress.close()
        if input is not None:
            in_stream.close()


def _zero_shot_note(translator, route) -> str:
    through = translator.routing.pivots(route.source, route.target)
    return f"note: {route.source}-{route.target} is zero-shot: the model was not trained on it" + (
        f"; it was on {route.source}-{through[0]} and {through[0]}-{route.target}: "
        f"translating --target {through[0]} and then --source {through[0]} is a pivot"
        if through
        else ""
    )


def _document_options(fmt, split_sentences, protect, out, prefix_tab: bool):
    """The document layer's options (nmt_cli/documents/layer.py's DocumentOptions) from
    translate's, ``out`` its OutputOptions; an option that cannot apply with another is a
    one-line error."""
    from nmt_cli.documents.formats import FILE_FORMATS
    from nmt_cli.documents.layer import DocumentOptions  # as translate's: no torch yet
    from nmt_cli.documents.plan import FORMATS

    if fmt not in FORMATS + FILE_FORMATS:
        raise UserError(f"--format: '{fmt}' is not one of {', '.join(FORMATS + FILE_FORMATS)}")
    per_line = [
        name
        for name, given in (
            ("--nbest", out.nbest > 1),
            ("--scores", out.scores),
            ("--alignments", out.alignments),
            ("--prefix-tab", prefix_tab),
            ("--attention-plot", out.attention_plot is not None),
            ("--show-attention", out.show_attention),
        )
        if given
    ]
    if fmt != "text" and per_line:
        raise UserError(
            f"--format {fmt}: {per_line[0]} describes input lines, and a document is "
            "translated whole; use --format text"
        )
    if prefix_tab and split_sentences:
        raise UserError(
            "--prefix-tab: a prefix begins its whole line, which is translated as one sentence; "
            "drop --split-sentences"
        )
    Protector(protect or ())  # a bad pattern is refused before the model loads
    return DocumentOptions(fmt, split_sentences is not False, list(protect or ()))


def _translate_html(
    translator, in_stream, input: Path | None, output: Path | None, options, documents
):
    """One HTML document from -i (or stdin) to -o (or stdout), written once complete."""
    from nmt_cli.documents.lines import translate_html_stream  # as translate's: no torch yet
    from nmt_cli.runtime.interrupts import task
    from nmt_cli.runtime.output_file import atomic_text_output

    where = f"{output} was not written" if output is not None else "nothing was written"
    try:
        with task(lambda: f"translation stopped; {where}"), atomic_text_output(output) as out:
            translate_html_stream(
                translator, in_stream, out or sys.stdout, options, documents, str(input or "stdin")
            )
    finally:
        if input is not None:
            in_stream.close()


def _input_format(input: Path | None, fmt: str | None) -> str:
    """--format, else the format -i's extension names (.txt, .html, .docx, ...), else text."""
    from nmt_cli.documents.formats import format_of  # no torch or parsers yet

    return format_of(input, fmt) or "text"


def _translate_file(
    translator, in_stream, input: Path | None, output: Path | None, fmt, options, documents
):
    """One document of a file format (nmt_cli/documents/files.py) from -i to -o (or stdout),
    written once complete."""
    import io

    from nmt_cli.documents.files import layer_translate, translate_file
    from nmt_cli.documents.formats import PACKAGES
    from nmt_cli.runtime.interrupts import task
    from nmt_cli.runtime.output_file import atomic_write

    if input is None and fmt in PACKAGES:
        raise UserError(f"--format {fmt}: give the file with -i (a zip package is read by parts)")
    if output is None and fmt in PACKAGES and sys.stdout.isatty():
        raise UserError(f"--format {fmt}: give -o FILE (the translation is a zip package)")
    if output is not None and output.is_dir():
        raise UserError(f"{output}: is a folder; give a file name to write")
    translate = layer_translate(translator, fmt, options, documents)
    where = f"{output} was not written" if output is not None else "stdout has a part of it"
    try:
        with task(lambda: f"translation stopped; {where}"):
            if output is None:
                target = io.BytesIO() if fmt in PACKAGES else sys.stdout.buffer
                translate_file(in_stream, target, fmt, translate, str(input or "stdin"))
                if fmt in PACKAGES:
                    sys.stdout.buffer.write(target.getvalue())
                sys.stdout.buffer.flush()
                return
            try:
                with atomic_write(output, "wb", durable=False) as out:
                    translate_file(in_stream, out, fmt, translate, str(input))
            except OSError as exc:
                raise UserError(f"{output}: cannot write ({failure_reason(exc)})") from None
    finally:
        if input is not None:
            in_stream.close()


@app.command()
@startup.command("scoring stopped before any score was printed")
def score(
    model: Annotated[
        list[str] | None,
        typer.Option(
            "-m",
            "--model",
            metavar="RUN",
            help="Run dir, checkpoint file or package (one model).",
        ),
    ] = None,
    src: Annotated[Path | None, typer.Option(help="Source sentences.")] = None,
    tgt: Annotated[Path | None, typer.Option(help="Target sentences to force-decode.")] = None,
    per_piece: Annotated[
        bool,
        typer.Option(
            "--per-piece",
            help="Divide each log-probability by the target's pieces (end of sentence "
            "included): comparable across lengths, as filtering back-translated pairs needs.",
        ),
    ] = False,
    threads: ThreadsOption = None,
    device: DeviceOption = "auto",
) -> None:
    """Print log p(target | source) for each pair (forced decoding), one number per line."""
    # Imported here, not at the top: `nmt --help` need not load torch.
    from nmt_cli.packages.loading import load_any
    from nmt_cli.runtime.device import pick_device
    from nmt_cli.runtime.interrupts import task
    from nmt_cli.translation.translator import force_decode

    if not model or src is None or tgt is None:
        raise UserError("give -m RUN, --src FILE and --tgt FILE")
    if len(model) > 1:
        raise UserError("-m: nmt score force-decodes with one model; give -m once")
    dev = pick_device(device)
    loaded = load_any(model[0], dev)
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
            per_piece=per_piece,
        )
    for value in values:
        typer.echo(f"{value:.4f}")
