"""Lines in and out of `nmt translate`: read from a binary stream (bad UTF-8 replaced and
reported), translated a chunk at a time, written in the output format the options ask for."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from nmt_cli.data.tokenizer import Tokenizer
from nmt_cli.documents.layer import DocumentOptions, translate_documents
from nmt_cli.runtime.interrupts import deferred
from nmt_cli.translation.plots import attention_heatmap, plot_dir
from nmt_cli.translation.translator import Translation, Translator
from nmt_cli.translation.words import alignment_pairs


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


def format_translation(
    index: int, tr: Translation, tokenizer: Tokenizer, out: OutputOptions
) -> list[str]:
    if out.nbest > 1:
        lines = []
        texts = tokenizer.decode_tgt([h.tokens for h in tr.hypotheses])
        for h, text in zip(tr.hypotheses, texts):
            lines.append(f"{index} ||| {text} ||| {h.score:.4f} ||| {h.norm_score:.4f}")
        return lines or [f"{index} ||| ||| 0.0000 ||| 0.0000"]
    fields = [tr.text]
    best = tr.hypotheses[0] if tr.hypotheses else None
    if out.scores:
        fields.append(f"{best.score:.4f}" if best else "0.0000")
        fields.append(f"{tr.confidence:.4f}" if tr.confidence is not None else "0.0000")
    if out.alignments:
        if best is None:
            fields.append("")
        else:
            src_p = tokenizer.src_pieces(tr.src_ids)
            tgt_p = tokenizer.tgt_pieces(best.tokens)
            pairs = alignment_pairs(best.attention, src_p, tgt_p)
            fields.append(" ".join(f"{i}-{j}" for i, j in pairs))
    return ["\t".join(fields)]


def translate_stream(
    translator: Translator,
    in_stream,
    out_stream,
    *,
    interactive: bool,
    out: OutputOptions,
    progress=None,
    done: list[int] | None = None,
    chunk_lines: int = 2000,
    documents: DocumentOptions | None = None,
) -> int:
    """Translate a binary line stream into a text stream; returns the number of lines.
    ``done[0]``, when given, follows the lines written so far (for a message on interruption).
    Lines are length-sorted into batches within chunks of ``chunk_lines``; a progress bar moves
    once per chunk. ``documents``: each line is a paragraph of the document layer (cut into
    sentences, protected spans kept) instead of one segment with the per-line outputs of
    ``out``."""
    import pathlib

    pictures = plot_dir(pathlib.Path(out.attention_plot)) if out.attention_plot else None
    invalid: list[int] = []
    cut: list[int] = []  # lines with a segment cut at the source limit (document layer)
    if documents is not None:
        translator.warned_truncation = True  # the lines are named below instead
    try:
        return _translate_chunks(
            translator,
            read_lines_stream(in_stream, interactive, chunk_lines, invalid),
            out_stream,
            out,
            pictures,
            progress,
            done,
            documents,
            cut,
        )
    finally:
        if invalid:
            translator.warn(invalid_utf8_warning(invalid))
        if cut:
            translator.warn(cut_lines_warning(cut, translator.max_source_tokens))


def _translate_chunks(
    translator,
    chunks,
    out_stream,
    out: OutputOptions,
    pictures,
    progress,
    done,
    documents=None,
    cut=None,
) -> int:
    tokenizer = translator.tokenizer
    count = 0
    for chunk in chunks:
        if documents is not None:
            count = _write_paragraphs(translator, chunk, out_stream, documents, count, done, cut)
            if progress is not None:
                progress.update(len(chunk))
            continue
        translations = translator.translate(chunk, nbest=out.nbest, weights=out.weights)
        with deferred():  # a chunk's lines are written whole, and counted, before a signal stops it
            for tr in translations:
                for line in format_translation(count, tr, tokenizer, out):
                    out_stream.write(line + "\n")
                best = tr.hypotheses[0] if tr.hypotheses else None
                if best is not None and best.attention is not None:
                    src_p = tokenizer.src_pieces(tr.src_ids)
                    tgt_p = tokenizer.tgt_pieces(best.tokens) + ["</s>"]
                    if pictures:
                        attention_heatmap(
                            best.attention, src_p, tgt_p, pictures / f"{count:06d}.png"
                        )
                    if out.show_attention:
                        print(shade_rows(best.attention, src_p, tgt_p), file=sys.stderr)
                count += 1
            out_stream.flush()
            if done is not None:
                done[0] = count
        if progress is not None:
            progress.update(len(chunk))
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


def _write_paragraphs(translator, chunk, out_stream, documents: DocumentOptions, count, done, cut):
    """One chunk of lines through the document layer, one output line per input line; the
    numbers of lines with a segment cut at the source limit go to ``cut``."""
    results = translate_documents(translator, chunk, **vars(documents))
    with deferred():
        for result in results:
            out_stream.write(result.text + "\n")
            count += 1
            if result.cut and cut is not None:
                cut.append(count)
        out_stream.flush()
        if done is not None:
            done[0] = count
    return count
