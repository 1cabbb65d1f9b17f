"""Lines in and out of `nmt translate`: read from a binary stream (bad UTF-8 replaced and
reported), translated a chunk at a time through the document layer, written in the output
format the options ask for (a line cut into several segments is one Translation again:
nmt_cli/documents/plan.py's DocumentPlan.joined)."""

from __future__ import annotations

import pathlib
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import torch

from nmt_cli.data.tokenizer import Tokenizer
from nmt_cli.documents.layer import DocumentOptions, DocumentTranslation, translate_documents
from nmt_cli.runtime.errors import UserError
from nmt_cli.runtime.interrupts import deferred
from nmt_cli.translation.contract import TranslateOptions, Translating
from nmt_cli.translation.controlled import split_prefixes
from nmt_cli.translation.plots import attention_heatmap, plot_dir
from nmt_cli.translation.results import Alternative, Translation


def count_lines(path) -> int:
    """Lines in a file as read_lines_stream will yield them (a last line without a newline
    counts)."""
    n, last = 0, b"\n"
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            n += block.count(b"\n")
            last = block[-1:]
    return n + (last != b"\n")


def read_lines_stream(
    stream, interactive: bool, buffer_lines: int = 2000, invalid: list[int] | None = None
) -> Iterator[list[str]]:
    """Chunks of decoded lines from a binary stream: one line at a time when interactive. Bytes
    that are not UTF-8 become U+FFFD; the 1-based numbers of such lines go to ``invalid``."""
    chunk: list[str] = []
    limit = 1 if interactive else buffer_lines
    for number, raw in enumerate(iter(stream.readline, b""), 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            line = raw.decode("utf-8", errors="replace")
            if invalid is not None:
                invalid.append(number)
        if line.endswith("\n"):
            line = line[:-1]
        chunk.append(line.rstrip("\r"))
        if len(chunk) >= limit:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def invalid_utf8_warning(numbers: Sequence[int], shown: int = 5) -> str:
    """One line naming the input lines that were not valid UTF-8, the first few by number."""
    listed = ", ".join(map(str, numbers[:shown]))
    more = f" and {len(numbers) - shown} more" if len(numbers) > shown else ""
    which = f"line {listed}" if len(numbers) == 1 else f"{len(numbers)} lines ({listed}{more})"
    return (
        f"warning: input {which} {'is' if len(numbers) == 1 else 'are'} not valid UTF-8; "
        "the bad bytes were replaced by U+FFFD and translated as such"
    )


def shade_rows(weights: torch.Tensor, src_pieces: Sequence[str], tgt_pieces: Sequence[str]) -> str:
    """A Unicode heatmap of attention: one row per target piece, one column per source piece, as
    wide as the piece so that every piece is shown whole."""
    shades = " ░▒▓█"
    widths = [max(len(p), 1) for p in src_pieces]
    label = max([len(p) for p in tgt_pieces] + [1])
    lines = [" " * label + " " + " ".join(f"{p:>{w}}" for p, w in zip(src_pieces, widths))]
    for j, piece in enumerate(tgt_pieces):
        row = weights[j, : len(src_pieces)].tolist() if j < weights.size(0) else []
        cells = " ".join(
            shades[min(int(w * len(shades)), len(shades) - 1)] * width
            for w, width in zip(row, widths)
        )
        lines.append(f"{piece:>{label}} {cells}")
    return "\n".join(lines)


@dataclass
class OutputOptions:
    """What `nmt translate` writes for each line besides the translation."""

    scores: bool = False
    alignments: bool = False
    nbest: int = 1
    attention_plot: str | None = None
    show_attention: bool = False

    @property
    def weights(self) -> bool:
        """Whether the hypotheses must keep their attention weights (to align or draw them)."""
        return self.alignments or self.attention_plot is not None or self.show_attention

    def translate_options(self, options: TranslateOptions) -> TranslateOptions:
        """``options`` asking for what these outputs need."""
        return replace(
            options,
            nbest=self.nbest,
            alignments=self.alignments,
            weights=self.weights,
            warn_cut=False,  # the stream names the lines cut instead
        )


def format_translation(index: int, tr: Translation, out: OutputOptions) -> list[str]:
    """The output lines of one input line's translation (the document layer's whole of it)."""
    if out.nbest > 1:
        if not tr.alternatives:  # a line without words (blank, a number, a URL): nothing was
            # decoded, and the line comes back as it was, as without --nbest
            return [_nbest_line(index, Alternative(tr.text, 0.0, 0.0), out)]
        return [_nbest_line(index, a, out) for a in tr.alternatives]
    fields = [tr.text]
    if out.scores:
        fields.append(f"{tr.score:.4f}" if tr.hypotheses else "0.0000")
        fields.append(f"{tr.confidence:.4f}" if tr.confidence is not None else "0.0000")
    if out.alignments:
        fields.append(" ".join(f"{i}-{j}" for i, j in tr.alignment or []))
    return ["\t".join(fields)]


def _nbest_line(index: int, a: Alternative, out: OutputOptions) -> str:
    """One n-best line, Moses-style: 'i ||| text ||| score ||| length-penalised score', then
    with --scores ' ||| confidence', then with --alignments ' ||| ' and that alternative's
    alignment, as the tab-separated fields of one best come in that order."""
    fields = [str(index), a.text, f"{a.score:.4f}", f"{a.norm_score:.4f}"]
    if out.scores:
        fields.append(f"{a.confidence:.4f}" if a.confidence is not None else "0.0000")
    if out.alignments:
        fields.append(" ".join(f"{i}-{j}" for i, j in a.alignment or []))
    return " ||| ".join(fields)


def line_attention(
    segments: Sequence[Translation], tokenizer: Tokenizer
) -> tuple[torch.Tensor, list[str], list[str]] | None:
    """The piece attention of one line as (weights, source pieces, target pieces with each
    segment's end of sentence): its segments' side by side on the diagonal; None where a
    segment kept none."""
    parts = []
    for tr in segments:
        best = tr.hypotheses[0] if tr.hypotheses else None
        if best is None:
            continue
        if best.attention is None:
            return None
        src_p = tokenizer.src_pieces(tr.src_ids)
        tgt_p = tokenizer.tgt_pieces(best.tokens) + ["</s>"]
        parts.append((best.attention, src_p, tgt_p))
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    weights = torch.block_diag(*(w[: len(t), : len(s)].float() for w, s, t in parts))
    return weights, [p for _, s, _ in parts for p in s], [p for _, _, t in parts for p in t]


@dataclass
class _Stream:
    """What writing one stream's translations needs, besides its lines."""

    translator: Translating
    options: TranslateOptions
    documents: DocumentOptions
    out: OutputOptions
    prefix_tab: bool
    pictures: pathlib.Path | None
    done: list[int] | None
    cut: list[int]


def translate_stream(
    translator: Translating,
    in_stream,
    out_stream,
    *,
    interactive: bool,
    out: OutputOptions,
    options: TranslateOptions | None = None,
    documents: DocumentOptions | None = None,
    prefix_tab: bool = False,
    progress=None,
    done: list[int] | None = None,
    chunk_lines: int = 2000,
) -> int:
    """Translate a binary line stream into a text stream through the document layer, each line
    a paragraph (cut into sentences, protected spans kept; ``documents``), with the per-line
    outputs of ``out``; returns the number of lines. ``prefix_tab``: lines are
    'source<TAB>target prefix'. ``done[0]``, when given, follows the lines written so far (for a
    message on interruption). Lines are length-sorted into batches within chunks of
    ``chunk_lines``; a progress bar moves once per chunk."""
    pictures = plot_dir(pathlib.Path(out.attention_plot)) if out.attention_plot else None
    invalid: list[int] = []
    stream = _Stream(
        translator,
        out.translate_options(options or TranslateOptions()),
        documents or DocumentOptions(),
        out,
        prefix_tab,
        pictures,
        done,
        [],
    )
    count = 0
    try:
        for chunk in read_lines_stream(in_stream, interactive, chunk_lines, invalid):
            count = _write_chunk(stream, chunk, out_stream, count)
            if progress is not None:
                progress.update(len(chunk))
        return count
    finally:
        if invalid:
            translator.warn(invalid_utf8_warning(invalid))
        if stream.cut:
            translator.warn(cut_lines_warning(stream.cut, translator.max_source_tokens))


def _translated(stream: _Stream, chunk: list[str], count: int) -> list[DocumentTranslation]:
    options = stream.options
    if not stream.prefix_tab:
        return translate_documents(stream.translator, chunk, options, stream.documents)
    sources, prefixes = split_prefixes(chunk, count + 1)
    try:
        return translate_documents(
            stream.translator, sources, replace(options, prefixes=prefixes), stream.documents
        )
    except UserError as exc:  # name the input line, not the line of this chunk
        message = re.sub(
            r"^prefix of line (\d+)",
            lambda m: f"--prefix-tab: input line {int(m[1]) + count}",
            str(exc),
        )
        raise UserError(message) from None


def _write_chunk(stream: _Stream, chunk: list[str], out_stream, count: int) -> int:
    """One chunk of lines translated and written, one output line per input line (n per line
    with --nbest); the numbers of lines with a segment cut at the source limit go to the
    stream's ``cut``."""
    results = _translated(stream, chunk, count)
    tokenizer = stream.translator.tokenizer
    with deferred():  # a chunk's lines are written whole, and counted, before a signal stops it
        for result in results:
            for line in format_translation(count, result.translation, stream.out):
                out_stream.write(line + "\n")
            drawn = line_attention(result.segments, tokenizer) if stream.out.weights else None
            if drawn is not None:
                if stream.pictures:
                    attention_heatmap(*drawn, stream.pictures / f"{count:06d}.png")
                if stream.out.show_attention:
                    print(shade_rows(*drawn), file=sys.stderr)
            count += 1
            if result.cut:
                stream.cut.append(count)
        out_stream.flush()
        if stream.done is not None:
            stream.done[0] = count
    return count


def cut_lines_warning(numbers: Sequence[int], limit: int, shown: int = 5) -> str:
    """One line naming the input lines of which a part was cut at the source limit."""
    listed = ", ".join(map(str, numbers[:shown]))
    more = f" and {len(numbers) - shown} more" if len(numbers) > shown else ""
    which = f"line {listed} has" if len(numbers) == 1 else f"lines {listed}{more} have"
    return (
        f"warning: input {which} a sentence part longer than {limit} subwords, cut to that "
        "length (decode.max_segment_tokens cuts long sentences at clauses first)"
    )


MAX_HTML_BYTES = 16 << 20  # an HTML document is read whole; larger ones are refused


def translate_html_stream(
    translator: Translating,
    in_stream,
    out_stream,
    options: TranslateOptions,
    documents: DocumentOptions,
    name: str = "stdin",
) -> None:
    """Translate one HTML document read whole from a binary stream (at most MAX_HTML_BYTES)
    into a text stream. Bytes that are not UTF-8 become U+FFFD, with a warning."""
    data = in_stream.read(MAX_HTML_BYTES + 1)
    if len(data) > MAX_HTML_BYTES:
        raise UserError(
            f"{name}: over {MAX_HTML_BYTES >> 20} MiB; an HTML document is translated whole, "
            "so split it into smaller documents"
        )
    try:
        document = data.decode("utf-8")
    except UnicodeDecodeError:
        document = data.decode("utf-8", errors="replace")
        translator.warn(f"warning: {name} is not valid UTF-8; the bad bytes became U+FFFD")
    html = replace(documents, fmt="html")
    quiet = replace(options, warn_cut=False)  # one warning below, for the document
    (result,) = translate_documents(translator, [document], quiet, html)
    if result.cut:
        translator.warn("warning: a sentence was cut at the model's source limit")
    out_stream.write(result.text)
    out_stream.flush()
