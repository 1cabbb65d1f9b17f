"""Translating lines: batching by length, decoding, restoring order, streaming from a file.

N lines in give N lines out, in order. An empty (or all-whitespace) line gives an empty line
without touching the model. Lines
longer than the model's source limit are cut to it, with one warning. Input bytes that are not
UTF-8 are replaced; one warning at the end names the lines that had them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import torch

from nmt_cli.interrupts import deferred
from nmt_cli.model.fast_decoding import (
    prepare_for_decoding,
    prepared_for_decoding,
    setup_of,
    unprepared,
)
from nmt_cli.plots import attention_heatmap, plot_dir
from nmt_cli.search import Hypothesis, search
from nmt_cli.tokenizer import Tokenizer, normalize
from nmt_cli.words import WordAttention, word_attention

MAX_SOURCE_TOKENS = 250
GREEDY_BATCH, GREEDY_BATCH_BF16, BEAM_BATCH = (
    128,
    192,
    64,
)  # sentences per batch by default (auto_batch_size)
TAIL_ROWS = 32  # the smallest batch, in rows a step (sentences x beam), that _batches tapers to


@dataclass
class DecodeOptions:
    beam_size: int = 5
    length_penalty: float = 0.6
    max_len_ratio: float = 1.5
    max_len_const: int = 10
    min_len: int = 1  # tokens before EOS may be chosen
    batch_size: int = 0  # sentences per batch; 0 = auto_batch_size()
    batch_tokens: int = 0  # if > 0: source tokens per batch instead
    nbest: int = 1
    attention: bool = False
    shortlist: bool = False  # decode over the model's vocabulary shortlist, if it has one
    shortlist_per_source: int = 0  # the shortlist's candidates per source piece (0 = all)
    shortlist_frequent: int = 0  # the shortlist's most common pieces (0 = all)
    workers: int = 1  # CPU: batches decoded side by side, one thread each


def auto_batch_size(opts: DecodeOptions, bf16: bool = False) -> int:
    """Sentences per batch when none is given: 128 for greedy search (192 for a model decoding
    in bf16 on the CPU), 64 for beam search. A greedy step has one row per sentence, and on the
    CPU 128 rows a step decoded test_2016 in 2.40-3.28 s against 2.93-4.01 s with 64 (two
    workers, six rounds, in process); bf16's products gain more from rows (test_2016 and
    test_2017 warm: 1.23 s with 192, 1.27 s with 128, 1.26 s with 256), fp32's do not (2.13 s
    with 192 against 2.03 s). Beam search already has K rows per sentence (docs/lab/beam-step.md)."""
    if opts.batch_size > 0:
        return opts.batch_size
    if opts.beam_size == 1 and opts.nbest == 1:
        return GREEDY_BATCH_BF16 if bf16 else GREEDY_BATCH
    return BEAM_BATCH


def _batches(
    order: Sequence[int],
    lengths: Sequence[int],
    opts: DecodeOptions,
    bf16: bool = False,
    workers: int = 1,
) -> Iterator[list[int]]:
    """Length-sorted ``order`` in batches of the options' size (or token budget). With several
    workers the last batches taper: none takes more than its share, 1/workers, of the sentences
    still left, down to TAIL_ROWS rows a step. Workers take batches in turn as they come free,
    and the one that takes the last full batch would otherwise decode it while the others wait
    (0.15-0.23 s of test_2016's greedy 1.9 s on two workers). The sizes depend on the count left
    alone, never on timing, so a given input is always cut the same way."""
    size = auto_batch_size(opts, bf16)
    floor = -(-TAIL_ROWS // max(opts.beam_size, 1))
    left = len(order)

    def cap() -> int:  # the sentences the next batch may take
        most = size if opts.batch_tokens <= 0 else left
        return most if workers <= 1 else min(most, max(floor, -(-left // workers)))

    batch: list[int] = []
    longest, limit = 0, cap()
    for i in order:
        longest_if = max(longest, lengths[i], 1)
        too_big = len(batch) >= limit or (
            opts.batch_tokens > 0 and longest_if * (len(batch) + 1) > opts.batch_tokens
        )
        if batch and too_big:
            yield batch
            left -= len(batch)
            batch, longest_if, limit = [], max(lengths[i], 1), cap()
        batch.append(i)
        longest = longest_if
    if batch:
        yield batch


@contextmanager
def _single_threaded_pool(workers: int):
    """A pool of ``workers`` threads, each running torch ops on one core. On two cores, decoding
    two batches side by side this way beat one batch at a time on both cores (beam 5 on
    test_2016: 6.10 s against 6.71 s, docs/benchmarks.md). Grad mode is per thread: the search
    functions turn gradients off themselves."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    pool = ThreadPoolExecutor(workers, initializer=torch.set_num_threads, initargs=(1,))
    try:
        yield pool
    except BaseException:
        # Ctrl-C: the batches not yet started are dropped rather than decoded before exiting.
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    else:
        pool.shutdown(wait=True)
    finally:
        torch.set_num_threads(before)


def decode_ids(
    model, sources: Sequence[Sequence[int]], opts: DecodeOptions, device: torch.device | str = "cpu"
) -> list[list[Hypothesis]]:
    """Decode token-id sources (non-empty) in length-sorted batches; results in input order."""
    if unprepared(model):  # prepared for this call only (validation: the weights move on)
        with prepared_for_decoding(model):
            return decode_ids(model, sources, opts, device)
    shortlist = getattr(model, "shortlist", None) if opts.shortlist else None
    lengths = [len(s) for s in sources]
    order = sorted(range(len(sources)), key=lambda i: -lengths[i])
    results: list[list[Hypothesis] | None] = [None] * len(sources)

    def run(batch: list[int]) -> tuple[list[int], list[list[Hypothesis]]]:
        width = max(max(lengths[i] for i in batch), 1)
        src = torch.zeros(len(batch), width, dtype=torch.long)
        for row, i in enumerate(batch):
            src[row, : lengths[i]] = torch.as_tensor(sources[i], dtype=torch.long)
        src_lengths = torch.tensor([max(lengths[i], 1) for i in batch])
        return batch, search(
            model,
            src.to(device),
            src_lengths,
            beam_size=opts.beam_size,
            alpha=opts.length_penalty,
            max_len_ratio=opts.max_len_ratio,
            max_len_const=opts.max_len_const,
            min_len=opts.min_len,
            nbest=opts.nbest,
            attention=opts.attention,
            vocab=None
            if shortlist is None
            else shortlist.candidates(
                src, src_lengths, opts.shortlist_per_source, opts.shortlist_frequent
            ).to(device),
        )

    on_cpu = torch.device(device).type == "cpu"
    side_by_side = opts.workers if on_cpu else 1
    batches = list(_batches(order, lengths, opts, setup_of(model).bf16_on_cpu, side_by_side))
    if side_by_side > 1 and len(batches) > 1:
        with _single_threaded_pool(min(opts.workers, len(batches))) as pool:
            decoded = list(pool.map(run, batches))
    else:
        decoded = map(run, batches)
    for batch, hyps in decoded:
        for i, h in zip(batch, hyps):
            results[i] = h
    return results  # type: ignore[return-value]


@dataclass
class Alternative:
    """One of the n best translations of a sentence."""

    text: str
    score: float  # total log-probability, EOS included
    norm_score: float  # the length-penalised score the search ranked by


@dataclass
class Translation:
    """The result for one input line; ``alignment`` and ``attention`` are filled when asked for."""

    source: str
    text: str
    hypotheses: list[Hypothesis]
    src_ids: list[int]
    truncated: bool = False
    alternatives: list[Alternative] = field(default_factory=list)  # the n best, best first
    alignment: list[tuple[int, int]] | None = None  # (source word, target word), as --alignments
    attention: WordAttention | None = None

    @property
    def score(self) -> float:
        """The best translation's log-probability (0 for an empty line)."""
        return self.hypotheses[0].score if self.hypotheses else 0.0


class Translator:
    """Lines in, translations out, with one model (or several averaged in log space).

    The Python API: ``Translator.load("runs/en-fr").translate(["A dog runs."])`` gives one
    :class:`Translation` per line with the recipe's decoding settings, as `nmt translate` writes it.
    """

    def __init__(
        self,
        model,
        tokenizer: Tokenizer,
        opts: DecodeOptions,
        device="cpu",
        max_source_tokens: int = MAX_SOURCE_TOKENS,
        warn: Callable[[str], None] | None = None,
        lowercase: bool = False,
    ):
        self.model, self.tokenizer, self.opts, self.device = model, tokenizer, opts, device
        self.lowercase = lowercase  # the model was trained on lowercased text (data.lowercase)
        self.max_source_tokens = max_source_tokens
        self.warn = warn or (lambda msg: print(msg, file=sys.stderr))
        self.warned_truncation = False
        self.recipe = None  # set by load(): the checkpoint's recipe
        self.checkpoint = None  # set by load(): the checkpoint file

    @property
    def precision(self) -> str:
        """bf16 where the model's weights are (``load``'s ``precision``), else fp32."""
        first = next(self.model.parameters(), None)
        return "bf16" if first is not None and first.dtype == torch.bfloat16 else "fp32"

    @classmethod
    def load(
        cls,
        model: str | os.PathLike | Sequence[str | os.PathLike],
        *,
        device: str = "auto",
        beam_size: int | None = None,
        threads: int | None = None,
        **options,
    ) -> Translator:
        """A Translator for a run dir or checkpoint file (a list of them: their ensemble).
        ``threads``: CPU threads torch may use; other options as :func:`load_translator`'s,
        each defaulting to the recipe's ``decode.*``."""
        models = [model] if isinstance(model, (str, os.PathLike)) else list(model)
        if threads is not None:
            if threads < 1:
                from nmt_cli.errors import UserError

                raise UserError(f"threads: {threads} is not a positive number of threads")
            torch.set_num_threads(threads)
        return load_translator(
            [str(m) for m in models], device=device, beam_size=beam_size, **options
        )

    def translate(
        self,
        lines: Sequence[str],
        *,
        nbest: int | None = None,
        alignments: bool = False,
        attention: bool = False,
        beam_size: int | None = None,
    ) -> list[Translation]:
        """One Translation per line, in order. ``nbest``, ``beam_size``: this call's, instead of the
        loaded ones; ``alignments``, ``attention``: fill those fields."""
        opts = self.opts
        if nbest is not None or beam_size is not None or alignments or attention:
            opts = replace(
                opts,
                nbest=opts.nbest if nbest is None else nbest,
                beam_size=opts.beam_size if beam_size is None else beam_size,
                attention=opts.attention or alignments or attention,
            )
            if opts.nbest > opts.beam_size or opts.nbest < 1 or opts.beam_size < 1:
                from nmt_cli.errors import UserError

                raise UserError(
                    f"nbest {opts.nbest} must be between 1 and the beam size {opts.beam_size}"
                )
        cleaned = [normalize(line, self.lowercase) for line in lines]
        ids = self.tokenizer.encode_src(cleaned)
        truncated = [len(x) > self.max_source_tokens for x in ids]
        if any(truncated) and not self.warned_truncation:
            self.warned_truncation = True
            self.warn(
                f"warning: a line is longer than {self.max_source_tokens} subwords; "
                "overlong lines are cut to that length"
            )
        ids = [x[: self.max_source_tokens] for x in ids]
        todo = [i for i, x in enumerate(ids) if x]
        hyps = decode_ids(self.model, [ids[i] for i in todo], opts, self.device) if todo else []
        out = [Translation(lines[i], "", [], ids[i], truncated[i]) for i in range(len(lines))]
        flat = [h for sentence in hyps for h in sentence]
        texts = iter(self.tokenizer.decode_tgt([h.tokens for h in flat]))
        for i, sentence in zip(todo, hyps):
            tr = out[i]
            tr.hypotheses = sentence
            tr.alternatives = [Alternative(next(texts), h.score, h.norm_score) for h in sentence]
            tr.text = tr.alternatives[0].text if sentence else ""
            if (alignments or attention) and sentence and sentence[0].attention is not None:
                src_p = self.tokenizer.src_pieces(tr.src_ids)
                tgt_p = self.tokenizer.tgt_pieces(sentence[0].tokens)
                if alignments:
                    tr.alignment = alignment_pairs(sentence[0], src_p, tgt_p)
                if attention:
                    tr.attention = word_attention(
                        sentence[0].attention, src_p, tgt_p, tr.source, tr.text
                    )
        return out


def count_lines(path) -> int:
    """Lines in a file as read_lines_stream will yield them (a last line without a newline counts)."""
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


def alignment_pairs(
    hyp: Hypothesis, src_pieces: Sequence[str], tgt_pieces: Sequence[str]
) -> list[tuple[int, int]]:
    """Hard word alignment i-j from subword attention: weights summed per (source word, target word),
    each target word aligned to its argmax source word. Words start at pieces beginning with '▁'."""
    if hyp.attention is None:
        return []

    def word_index(pieces: Sequence[str]) -> list[int]:
        idx, w = [], -1
        for k, p in enumerate(pieces):
            if p.startswith("\u2581") or k == 0:
                w += 1
            idx.append(w)
        return idx

    src_w, tgt_w = word_index(src_pieces), word_index(tgt_pieces)
    if not src_w or not tgt_w:
        return []
    att = hyp.attention[: len(tgt_pieces), : len(src_pieces)].float()
    n_src, n_tgt = src_w[-1] + 1, tgt_w[-1] + 1
    words = torch.zeros(n_tgt, n_src)
    words.index_add_(
        0,
        torch.tensor(tgt_w),
        torch.zeros(len(tgt_w), n_src).index_add_(1, torch.tensor(src_w), att),
    )
    best = words.argmax(dim=1).tolist()
    return sorted({(best[j], j) for j in range(n_tgt)})


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
    scores: bool = False
    alignments: bool = False
    nbest: int = 1
    attention_plot: str | None = None
    show_attention: bool = False


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
    if out.alignments:
        if best is None:
            fields.append("")
        else:
            src_p = tokenizer.src_pieces(tr.src_ids)
            tgt_p = tokenizer.tgt_pieces(best.tokens)
            fields.append(" ".join(f"{i}-{j}" for i, j in alignment_pairs(best, src_p, tgt_p)))
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
) -> int:
    """Translate a binary line stream into a text stream; returns the number of lines.
    ``done[0]``, when given, follows the lines written so far (for a message on interruption).
    Lines are length-sorted into batches within chunks of ``chunk_lines``; a progress bar moves
    once per chunk."""
    import pathlib

    pictures = plot_dir(pathlib.Path(out.attention_plot)) if out.attention_plot else None
    invalid: list[int] = []
    try:
        return _translate_chunks(
            translator,
            read_lines_stream(in_stream, interactive, chunk_lines, invalid),
            out_stream,
            out,
            pictures,
            progress,
            done,
        )
    finally:
        if invalid:
            translator.warn(invalid_utf8_warning(invalid))


def _translate_chunks(
    translator, chunks, out_stream, out: OutputOptions, pictures, progress, done
) -> int:
    tokenizer = translator.tokenizer
    count = 0
    for chunk in chunks:
        translations = translator.translate(chunk)
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


@torch.no_grad()
def force_decode(
    model,
    tokenizer: Tokenizer,
    sources: Sequence[str],
    targets: Sequence[str],
    device="cpu",
    batch_size: int = 64,
    lowercase: bool = False,
) -> list[float]:
    """log p(y | x) = Σ_i log p(y_i | y_<i, x), EOS included, for each (source, target) pair;
    ``lowercase`` for a model trained with data.lowercase."""
    import numpy as np

    from nmt_cli.data import collate  # preprocessing's module: only forced decoding needs it

    src_ids = tokenizer.encode_src([normalize(s, lowercase) for s in sources])
    tgt_ids = tokenizer.encode_tgt([normalize(t, lowercase) for t in targets])
    out: list[float] = []
    for start in range(0, len(src_ids), batch_size):
        batch = collate(
            [
                np.asarray(s[:MAX_SOURCE_TOKENS], dtype=np.int64)
                for s in src_ids[start : start + batch_size]
            ],
            [np.asarray(t, dtype=np.int64) for t in tgt_ids[start : start + batch_size]],
        )
        logits, _ = model(batch.src.to(device), batch.src_lengths, batch.tgt_in.to(device))
        logp = torch.log_softmax(logits.float(), dim=-1)
        target = batch.tgt_out.to(device)
        picked = logp.gather(-1, target.unsqueeze(-1)).squeeze(-1).masked_fill(target == 0, 0.0)
        out.extend(picked.sum(-1).tolist())
    return out


def load_translator(
    models: Sequence[str],
    *,
    device: str = "auto",
    quantize: str = "none",
    beam_size: int | None = None,
    batch_size: int | None = None,
    batch_tokens: int | None = None,
    nbest: int = 1,
    attention: bool = False,
    shortlist: bool | None = None,
    length_penalty: float | None = None,
    workers: int | None = None,
    shortlist_per_source: int | None = None,
    shortlist_frequent: int | None = None,
    precision: str | None = None,
) -> Translator:
    """A Translator for one model, or the ensemble of several (run dirs or checkpoint files with
    one vocabulary). Options left as None (or 0) take the first model's recipe's ``decode.*``.
    ``precision`` bf16 (``auto`` on a CPU with bf16 hardware) converts the weights to bf16, so that
    every matrix product runs in bf16; log-probabilities and scores stay fp32."""
    from nmt_cli.checkpoint import load_model
    from nmt_cli.device import pick_device, resolve_decode_precision
    from nmt_cli.errors import UserError
    from nmt_cli.model.ensemble import Ensemble

    if not models:
        raise UserError("-m/--model: give a run dir or checkpoint")
    dev = pick_device(device)
    loaded = [load_model(m, dev) for m in models]
    model, recipe, tokenizer, _ = loaded[0]
    for other in loaded[1:]:
        if other[2].tgt_proto != tokenizer.tgt_proto or other[2].src_proto != tokenizer.src_proto:
            raise UserError(
                f"{other[3]}: uses a different vocabulary than {loaded[0][3]}; cannot ensemble"
            )
        if other[1].data.lowercase != recipe.data.lowercase:
            raise UserError(
                f"{other[3]}: data.lowercase differs from {loaded[0][3]}'s; cannot ensemble"
            )
    if quantize == "int8":
        from nmt_cli.quantize import quantize_int8

        loaded = [(quantize_int8(m), *rest) for m, *rest in loaded]
    elif quantize != "none":
        raise UserError(f"--quantize: '{quantize}' is not one of none, int8")
    if resolve_decode_precision(precision or recipe.decode.precision, dev, quantize) == "bf16":
        loaded = [(m.to(torch.bfloat16), *rest) for m, *rest in loaded]
    model = loaded[0][0] if len(loaded) == 1 else Ensemble([x[0] for x in loaded]).eval()
    if len(loaded) > 1:
        from nmt_cli.shortlist import merge_shortlists

        model.shortlist = merge_shortlists([x[0].shortlist for x in loaded])
    prepare_for_decoding(model)
    d = recipe.decode
    has_shortlist = getattr(model, "shortlist", None) is not None
    if shortlist and not has_shortlist:
        raise UserError(
            f"--shortlist: {loaded[0][3]} has no vocabulary shortlist "
            "(trained before shortlists existed); use --no-shortlist"
        )
    if shortlist is None:  # the recipe's default applies where the checkpoint has a shortlist
        shortlist = d.shortlist and has_shortlist
    opts = DecodeOptions(
        beam_size=beam_size or d.beam_size,
        length_penalty=d.length_penalty if length_penalty is None else length_penalty,
        max_len_ratio=d.max_len_ratio,
        max_len_const=d.max_len_const,
        min_len=d.min_len,
        batch_size=batch_size or d.batch_size,
        batch_tokens=batch_tokens or 0,
        nbest=nbest,
        attention=attention,
        shortlist=shortlist,
        shortlist_per_source=d.shortlist_per_source
        if shortlist_per_source is None
        else shortlist_per_source,
        shortlist_frequent=d.shortlist_frequent
        if shortlist_frequent is None
        else shortlist_frequent,
        workers=workers or d.workers or torch.get_num_threads(),
    )
    if nbest > opts.beam_size:
        raise UserError(f"--nbest {nbest} exceeds the beam size {opts.beam_size}")
    translator = Translator(model, tokenizer, opts, dev, lowercase=recipe.data.lowercase)
    translator.recipe, translator.checkpoint = recipe, loaded[0][3]
    return translator
