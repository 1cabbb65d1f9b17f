"""Corpus text -> filtered pairs -> SentencePiece ids stored as flat arrays; length-bucketed
token batches read straight from those arrays.

A split is stored as four ``.npy`` files (``{split}.{src,tgt}.{ids,offsets}.npy``): all token ids
of a side concatenated (uint16 while the vocabulary fits, else int32), and where each sentence
starts. Preprocessing streams: a first pass over the training corpora only decompresses and
counts lines, drawing SentencePiece's training sample; once SentencePiece is learned, one pass
reads every corpus in blocks of lines and hands each block to a worker process (one per core,
nmt_cli/workers.py), which cleans, filters and encodes it; this process deduplicates (optionally)
and stores the kept text and the ids in corpus order. Memory is bounded by the block and sample
sizes, whatever the corpus size.
``data/meta.json`` is removed first and written last, so a preprocess stopped at any moment
leaves nothing training takes for complete.
Training memory-maps the arrays, so a large corpus never becomes a list of Python objects.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import re
import shutil
import time
import weakref
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from nmt_cli import corpora
from nmt_cli.arrays import SideWriter, id_dtype
from nmt_cli.config import Recipe, save_recipe
from nmt_cli.errors import DataError
from nmt_cli.pairs import (
    CleanChunk,
    Cleaning,
    Deduplicator,
    PairSource,
    Reservoir,
    chunks,
    clean_raw_pairs,
    encoded_lines,
    split_block,
)
from nmt_cli.shortlist import Shortlist, count_shortlist
from nmt_cli.tokenizer import BOS, EOS, PAD, Tokenizer, normalize, seed_sampling, train_tokenizer
from nmt_cli.workers import ordered_map, usable_cores

if TYPE_CHECKING:
    import torch

DATA_FORMAT = 1


def _local_path(entry: str) -> str:
    path = os.path.expanduser(os.path.expandvars(entry))
    if "$" in path:
        unset = re.search(r"\$\{?(\w+)", path).group(1)
        raise DataError(
            f"data: '{entry}' needs the environment variable {unset}, which is not set "
            "(export it, or give the path with --set)"
        )
    return path


def pair_source(recipe: Recipe, entry: str) -> PairSource:
    """Where one corpus entry of ``data.train``/``valid``/``test`` reads from: a path with {lang}
    (one file per language), a split of the registered corpus, or, with ``data.format: tsv``, a
    file of ``source<TAB>target`` lines."""
    corpus = corpora.get_corpus(recipe.data.corpus) if recipe.data.corpus else None
    if "{lang}" in entry:
        template = _local_path(entry)
        return PairSource(
            entry, (Path(template.format(lang=recipe.src)), Path(template.format(lang=recipe.tgt)))
        )
    if corpus is not None and (entry in corpus.splits or recipe.data.format != "tsv"):
        return PairSource(
            f"{corpus.name}:{entry}",
            (
                corpora.fetch(corpus.name, corpus.filename(entry, recipe.src)),
                corpora.fetch(corpus.name, corpus.filename(entry, recipe.tgt)),
            ),
        )
    if recipe.data.format == "tsv":
        return PairSource(entry, (Path(_local_path(entry)),), tsv=True)
    raise DataError(
        f"data: '{entry}' must contain {{lang}} (e.g. /data/train.{{lang}}.gz) "
        "when data.corpus is null, or be a source<TAB>target file with data.format: tsv"
    )


def split_files(recipe: Recipe, split: str) -> tuple[Path, ...]:
    """The files a split reads: (source, target), or (the TSV file,)."""
    return pair_source(recipe, split).files


def train_entries(recipe: Recipe) -> list[str]:
    train = recipe.data.train
    return [train] if isinstance(train, str) else list(train)


# --------------------------------------------------------------------------- stored arrays


def _flat(seqs: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    ids = np.fromiter((t for s in seqs for t in s), dtype=np.int32, count=int(offsets[-1]))
    return ids, offsets


def encode_flat(encode, lines: Sequence[str], chunk: int = 50_000) -> tuple[np.ndarray, np.ndarray]:
    """Encode in chunks straight into int32 arrays: Python lists of ints cost ~36 bytes an id,
    which on a 10M-pair corpus would be most of the memory preprocessing needs."""
    parts = [_flat(encode(lines[i : i + chunk])) for i in range(0, len(lines), chunk)] or [
        _flat([])
    ]
    ids = np.concatenate([p[0] for p in parts])
    lengths = np.concatenate([np.diff(p[1]) for p in parts])
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return ids, offsets


def _atomic_save(path: Path, array: np.ndarray) -> None:
    tmp = path.with_name(path.name + ".part")
    with open(tmp, "wb") as fh:
        np.save(fh, array)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


PREAD_FROM = 64 << 20  # bytes of stored ids from which batches read them with pread (Side.take)


@dataclass
class Side:
    ids: np.ndarray
    offsets: np.ndarray
    _fds: tuple[int, int] | None = field(
        default=None, repr=False, compare=False
    )  # (offsets, ids) for pread

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def get(self, i: int) -> np.ndarray:
        return self.ids[self.offsets[i] : self.offsets[i + 1]]

    def take(self, rows: Sequence[int]) -> list[np.ndarray]:
        """The sentences at ``rows``. Stored ids of more than PREAD_FROM bytes are read with
        ``pread``: read through the mapping, each sentence maps the kernel's 64 KB fault-around
        window of each array, about 11 MB a batch of a 40M-pair corpus, which the process's
        resident memory counts until it is unmapped. Smaller arrays (which can count no more than
        their size) are read through plain views of the mapping, three times faster: 0.29 ms a
        batch of 40 Multi30k sentences against 0.88 ms with pread."""
        if (
            self.ids.nbytes > PREAD_FROM
            and isinstance(self.ids, np.memmap)
            and isinstance(self.offsets, np.memmap)
            and hasattr(os, "pread")
        ):  # no pread on Windows
            return self._pread(rows)
        ids, offsets = (
            np.asarray(self.ids),
            np.asarray(self.offsets),
        )  # np.memmap's slicing costs twice as much
        return [ids[offsets[i] : offsets[i + 1]] for i in rows]

    def _pread(self, rows: Sequence[int]) -> list[np.ndarray]:
        if self._fds is None:
            self._fds = tuple(os.open(a.filename, os.O_RDONLY) for a in (self.offsets, self.ids))
            for fd in self._fds:
                weakref.finalize(self, os.close, fd)
        off_fd, ids_fd = self._fds
        off_dtype, ids_dtype = self.offsets.dtype, self.ids.dtype
        off_start, ids_start = (
            self.offsets.offset,
            self.ids.offset,
        )  # where the data starts in the .npy
        out = []
        for i in rows:
            a, b = np.frombuffer(
                os.pread(off_fd, 2 * off_dtype.itemsize, off_start + int(i) * off_dtype.itemsize),
                off_dtype,
            )
            out.append(
                np.frombuffer(
                    os.pread(
                        ids_fd,
                        int(b - a) * ids_dtype.itemsize,
                        ids_start + int(a) * ids_dtype.itemsize,
                    ),
                    ids_dtype,
                )
            )
        return out

    def release_pages(self) -> None:
        """See :meth:`EncodedSplit.release_pages`."""
        for array in (self.ids, self.offsets):
            mapping = getattr(array, "_mmap", None)  # np.memmap's mapping of the file
            if mapping is not None and hasattr(mmap, "MADV_DONTNEED"):
                mapping.madvise(mmap.MADV_DONTNEED)


@dataclass
class EncodedSplit:
    src: Side
    tgt: Side

    def __len__(self) -> int:
        return len(self.src)

    def release_pages(self) -> None:
        """Unmap the pages of the memory-mapped arrays read so far (the lengths of an epoch's
        shards are read through the mapping). They stay in the page cache (the next read of them
        costs no disk access); the process stops counting them in its resident memory."""
        self.src.release_pages()
        self.tgt.release_pages()


def load_split(run_dir: Path, split: str) -> EncodedSplit:
    """Memory-map a stored split and check it against the lengths recorded at preprocess time."""
    data_dir = run_dir / "data"
    meta = load_meta(run_dir)
    expected = meta.get("splits", {}).get(split)
    if expected is None:
        raise DataError(f"{data_dir}: no preprocessed split '{split}'; re-run nmt preprocess")
    sides = []
    for side in ("src", "tgt"):
        arrays = []
        for part in ("ids", "offsets"):
            path = data_dir / f"{split}.{side}.{part}.npy"
            try:
                arrays.append(np.load(path, mmap_mode="r", allow_pickle=False))
            except FileNotFoundError:
                raise DataError(f"{path}: missing; re-run nmt preprocess") from None
            except (ValueError, OSError, EOFError) as exc:
                raise DataError(f"{path}: corrupt ({exc}); re-run nmt preprocess") from None
        ids, offsets = arrays
        want = expected[side]
        if (
            len(offsets) != want["sentences"] + 1
            or len(ids) != want["tokens"]
            or (len(offsets) and int(offsets[-1]) != len(ids))
        ):
            raise DataError(
                f"{data_dir / f'{split}.{side}.ids.npy'}: does not match its recorded "
                "length (truncated?); re-run nmt preprocess"
            )
        sides.append(Side(ids, offsets))
    return EncodedSplit(*sides)


def sampled_split(
    src_lines: Sequence[str],
    tgt_lines: Sequence[str],
    tokenizer,
    alpha: float,
    seed: int,
    epoch: int,
) -> EncodedSplit:
    """The training pairs re-segmented by sampling (``train.subword_alpha``), one draw per epoch;
    the same (seed, epoch) gives the same draw."""
    seed_sampling(int(np.random.default_rng([seed, epoch]).integers(1, 2**31)))
    src = encode_flat(lambda lines: tokenizer.encode_sampled("src", lines, alpha), src_lines)
    tgt = encode_flat(lambda lines: tokenizer.encode_sampled("tgt", lines, alpha), tgt_lines)
    return EncodedSplit(Side(*src), Side(*tgt))


SHORTLIST_PAIRS = 300_000  # a split up to this size is counted whole, as learn_shortlist does
SHORTLIST_SAMPLE = 100_000  # pairs sampled from a larger one


def learn_split_shortlist(data_dir: Path, tokenizer) -> Shortlist:
    """The vocabulary shortlist of the stored training split (nmt_cli/shortlist.py)."""
    import torch

    frequent, table = count_split_shortlist(data_dir, tokenizer)
    return Shortlist(torch.from_numpy(frequent), torch.from_numpy(table))


def count_split_shortlist(data_dir: Path, tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """The shortlist's arrays (``count_shortlist``) for the stored training split. A larger
    split gives a random sample of its pairs, read row by row (:func:`read_rows`), so counting
    never copies a whole side into memory. Counting co-occurrences holds every (source piece,
    target piece) pair of each sampled sentence pair: 300k pairs of a 1M-pair corpus of 25-piece
    sentences peaked at 1.65 GB, 100k at 0.8 GB (docs/lab/corpora.md)."""
    paths = [
        data_dir / f"train.{side}.{part}.npy"
        for side in ("src", "tgt")
        for part in ("ids", "offsets")
    ]
    n = len(np.load(paths[1], mmap_mode="r")) - 1
    if n > SHORTLIST_PAIRS:
        rows = np.unique(np.random.default_rng(0).integers(0, n, SHORTLIST_SAMPLE))
        arrays = [*read_rows(paths[0], paths[1], rows), *read_rows(paths[2], paths[3], rows)]
    else:
        arrays = [np.load(path, mmap_mode="r") for path in paths]
    return count_shortlist(
        *arrays, tokenizer.src_vocab_size, tokenizer.tgt_vocab_size, max_pairs=SHORTLIST_PAIRS
    )


def read_rows(
    ids_path: Path, offsets_path: Path, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The sentences ``rows`` of one stored side as a small (ids as int64, offsets) pair of its
    own, read as batches read them (:meth:`Side.take`): arrays past PREAD_FROM with positioned
    reads, as the pages a map touches count in the process's resident memory, and 100k rows spread
    over a 40M-pair split touch most pages of its 2.5 GB of arrays (a 2.1 GB peak in
    docs/lab/corpora.md)."""
    side = Side(np.load(ids_path, mmap_mode="r"), np.load(offsets_path, mmap_mode="r"))
    parts = side.take(rows.tolist())
    new_offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in parts], out=new_offsets[1:])
    return (np.concatenate(parts) if parts else np.zeros(0, side.ids.dtype)).astype(
        np.int64
    ), new_offsets


def save_shortlist(data_dir: Path, shortlist: Shortlist) -> None:
    save_shortlist_arrays(
        data_dir, shortlist.frequent.numpy(), shortlist.table.numpy(), shortlist.ranked
    )


def save_shortlist_arrays(
    data_dir: Path, frequent: np.ndarray, table: np.ndarray, ranked: bool = True
) -> None:
    # Ranked frequent pieces get their own file name, so an older id-sorted one is never misread.
    name = "shortlist.ranked.npy" if ranked else "shortlist.frequent.npy"
    _atomic_save(data_dir / name, frequent.astype(np.int32))
    _atomic_save(data_dir / "shortlist.table.npy", table.astype(np.int32))


def load_shortlist(run_dir: Path) -> Shortlist | None:
    """The run's shortlist, or None for data preprocessed before shortlists existed."""
    data_dir = run_dir / "data"
    ranked = (data_dir / "shortlist.ranked.npy").exists()
    try:
        frequent = np.load(
            data_dir / ("shortlist.ranked.npy" if ranked else "shortlist.frequent.npy"),
            allow_pickle=False,
        )
        table = np.load(data_dir / "shortlist.table.npy", allow_pickle=False)
    except (FileNotFoundError, ValueError, OSError, EOFError):
        return None
    import torch

    return Shortlist(
        torch.from_numpy(frequent.astype(np.int64)),
        torch.from_numpy(table.astype(np.int64)),
        ranked=ranked,
    )


def load_meta(run_dir: Path) -> dict:
    path = run_dir / "data" / "meta.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: missing; run nmt preprocess first") from None
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: unreadable ({exc}); re-run nmt preprocess") from None


def load_text(run_dir: Path, split: str, side: str) -> list[str]:
    return corpora.read_lines(run_dir / "data" / f"{split}.{side}.txt")


def _write_text(path: Path, lines: Sequence[str]) -> None:
    tmp = path.with_name(path.name + ".part")
    tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    os.replace(tmp, path)


# --------------------------------------------------------------------------- preprocess

TEXT_CHUNK = 20_000  # training pairs a worker cleans and encodes at a time
ENCODE_CHUNK = (
    20_000  # lines a worker encodes at a time: ~16 MB of Python ints, whatever the corpus size
)


def split_names(recipe: Recipe) -> dict[str, str | list[str]]:
    """Storage name -> split name or path (a list for several training corpora); the first test
    set is also 'test'."""
    names = {"train": recipe.data.train, "valid": recipe.data.valid}
    for i, test in enumerate(recipe.data.test):
        names[f"test{i}" if i else "test"] = test
    return names


def save_tok_references(recipe: Recipe, data_dir: Path, log=print) -> dict[str, str]:
    """Copy the corpus's official tokenized references of the held-out splits into the run dir as
    ``{name}.ref.lc-tok.txt``, for ``nmt eval --lc-tok``. They only serve comparison with papers,
    so one that cannot be had is reported and skipped rather than failing preprocessing."""
    if not recipe.data.corpus:
        return {}
    corpus = corpora.get_corpus(recipe.data.corpus)
    saved = {}
    for name, split in split_names(recipe).items():
        if (
            name == "train"
            or corpus.tok_reference_name(split, recipe.tgt) not in corpus.tok_references
        ):
            continue
        try:
            lines = corpora.read_lines(corpora.fetch_tok_reference(corpus.name, split, recipe.tgt))
        except DataError as exc:
            log(
                f"note: no tokenized reference for {split} ({exc}); lc-tok scores will be unavailable"
            )
            continue
        path = data_dir / f"{name}.ref.lc-tok.txt"
        _write_text(path, lines)
        saved[name] = path.name
    return saved


class _TextPairs:
    """``{name}.src.txt`` and ``{name}.tgt.txt`` written side by side, renamed into place on close."""

    def __init__(self, data_dir: Path, name: str):
        self.paths = [data_dir / f"{name}.{side}.txt" for side in ("src", "tgt")]
        self.files = [open(p.with_name(p.name + ".part"), "wb") for p in self.paths]

    def write(self, pairs: list[tuple[str, str]]) -> None:
        # Normalised lines hold no line break, so one line stays one line.
        self.write_text(
            "".join(s + "\n" for s, _ in pairs).encode("utf-8"),
            "".join(t + "\n" for _, t in pairs).encode("utf-8"),
        )

    def write_text(self, src: bytes, tgt: bytes) -> None:
        """Lines already joined and encoded, each ending in a line break."""
        self.files[0].write(src)
        self.files[1].write(tgt)

    def close(self) -> None:
        for fh, path in zip(self.files, self.paths):
            fh.flush()
            os.fsync(fh.fileno())
            fh.close()
            os.replace(fh.name, path)

    def abort(self) -> None:
        for fh in self.files:
            fh.close()
            Path(fh.name).unlink(missing_ok=True)


def _prepare_data_dir(data_dir: Path, log) -> None:
    """Remove the completion mark (meta.json) before anything else changes, and leftovers of a
    stopped run; say which of the two this is."""
    meta = data_dir / "meta.json"
    if meta.exists():
        log(f"{data_dir}: replacing the preprocessed data there")
        meta.unlink()
    elif data_dir.is_dir() and any(data_dir.iterdir()):
        log(f"{data_dir}: an earlier nmt preprocess stopped before it finished; starting over")
    data_dir.mkdir(parents=True, exist_ok=True)
    for part in data_dir.glob("*.part"):
        part.unlink()


def _without_rows(chunk: CleanChunk, encoded: list, keep: np.ndarray) -> tuple[CleanChunk, list]:
    """A cleaned and encoded chunk less the pairs ``keep`` is False for (duplicates)."""
    pairs = list(compress(chunk.pairs(), keep.tolist()))
    chunk.src, chunk.src_starts = encoded_lines([s for s, _ in pairs])
    chunk.tgt, chunk.tgt_starts = encoded_lines([t for _, t in pairs])
    chunk.kept = len(pairs)
    return chunk, [(ids[np.repeat(keep, lengths)], lengths[keep]) for ids, lengths in encoded]


def _stream_train(
    recipe: Recipe,
    sources: list[PairSource],
    data_dir: Path,
    tokenizer: Tokenizer,
    dtype,
    log,
    workers: int | None = None,
) -> tuple[list[dict], dict]:
    """The one pass over every training corpus: clean, filter, encode, deduplicate, store the
    text and the arrays. Blocks of TEXT_CHUNK pairs are cleaned and encoded on ``workers``
    processes (every usable core by default) while this one decompresses and stores, in corpus
    order. Returns the counts per corpus and the split's sizes."""
    d = recipe.data
    workers = usable_cores() if workers is None else workers
    dedup = Deduplicator() if d.dedup else None
    encoders = BlockEncoder(tokenizer.src_proto, dtype), BlockEncoder(tokenizer.tgt_proto, dtype)
    report = []
    text = _TextPairs(data_dir, "train")
    sides = [SideWriter(data_dir, "train", side, dtype) for side in ("src", "tgt")]
    try:
        for source in sources:
            work = CleanAndEncode(
                Cleaning(d.lowercase, d.max_len, d.max_ratio, tsv=source.tsv), *encoders
            )
            read, kept, dropped = 0, 0, Counter()
            for chunk, *encoded in ordered_map(work, source.blocks(TEXT_CHUNK), workers):
                read += chunk.read
                dropped.update(chunk.dropped)
                if dedup is not None and chunk.kept:
                    fresh = np.array(dedup.fresh(chunk.pairs()), dtype=bool)
                    if not fresh.all():
                        dropped["duplicate pair"] += int((~fresh).sum())
                        chunk, encoded = _without_rows(chunk, encoded, fresh)
                text.write_text(chunk.src, chunk.tgt)
                for writer, (ids, lengths) in zip(sides, encoded):
                    writer.append(ids, lengths)
                kept += chunk.kept
            report.append(
                {
                    "corpus": source.label,
                    "files": source.paths,
                    "read": read,
                    "kept": kept,
                    "dropped": dict(sorted(dropped.items())),
                }
            )
            log(f"train {source.label}: {read} pairs read, {kept} kept, {read - kept} dropped")
            for reason, count in sorted(dropped.items()):
                log(f"  dropped {count}: {reason}")
    except BaseException:
        text.abort()
        for writer in sides:
            writer.abort()
        raise
    text.close()
    sizes = {"src": sides[0].close(), "tgt": sides[1].close()}
    if len(report) > 1:
        read, kept = sum(r["read"] for r in report), sum(r["kept"] for r in report)
        log(
            f"train: {read} pairs read from {len(report)} corpora, {kept} kept, {read - kept} dropped"
        )
    return report, sizes


def _stream_heldout(recipe: Recipe, data_dir: Path, name: str, entry: str) -> PairSource:
    """A valid or test split, cleaned but not filtered: N lines in, N lines stored."""
    source = pair_source(recipe, entry)
    out = _TextPairs(data_dir, name)
    try:
        line = 0
        for chunk in chunks(iter(source), TEXT_CHUNK):
            pairs = []
            for pair in chunk:
                line += 1
                if pair is None:
                    raise DataError(
                        f"{source.files[0]}: line {line} has no tab (data.format: tsv reads "
                        "source<TAB>target lines)"
                    )
                pairs.append(
                    (
                        normalize(pair[0], recipe.data.lowercase),
                        normalize(pair[1], recipe.data.lowercase),
                    )
                )
            out.write(pairs)
    except BaseException:
        out.abort()
        raise
    out.close()
    return source


def _sample_capacity(recipe: Recipe) -> int:
    """Pairs to sample: tokenizer.sample_sentences lines per SentencePiece model."""
    k = recipe.tokenizer.sample_sentences
    return (k + 1) // 2 if recipe.tokenizer.joint else k


def _draw_sample(recipe: Recipe, sources: list[PairSource]) -> tuple[list[str], list[str], str]:
    """SentencePiece's training sample: a uniform random sample of the training pairs (every
    corpus as one stream, Reservoir) drawn in a pass that only decompresses and counts lines,
    then cleaned, filtered and deduplicated as the corpus will be. Cleaning the whole corpus
    waits for the pass that also encodes it, so the corpus is cleaned once and never re-read
    from a stored copy. While the corpus fits the sample, the sample is the whole corpus in order."""
    d = recipe.data
    sample = Reservoir(_sample_capacity(recipe), recipe.train.seed)
    for source in sources:
        for block in source.raw_pairs(TEXT_CHUNK):
            if sample.wants(len(block)):
                sample.offer(block)
            else:
                sample.pass_over(len(block))
    pairs = clean_raw_pairs(sample.items, Cleaning(d.lowercase, d.max_len, d.max_ratio)).pairs()
    if d.dedup:
        pairs = list(compress(pairs, Deduplicator().fresh(pairs)))
    if not pairs:
        raise _nothing_kept(recipe, sources)
    dropped = len(sample.items) - len(pairs)
    origin = f"a sample of {len(pairs)} of the {sample.seen} training pairs" + (
        f" ({dropped} more drawn, and dropped by the filters)" if dropped else ""
    )
    return [s for s, _ in pairs], [t for _, t in pairs], origin


def _sample_file_lines(recipe: Recipe) -> tuple[list[str], list[str]]:
    template = _local_path(recipe.tokenizer.sample_file)
    if "{lang}" not in template:
        raise DataError(
            f"tokenizer.sample_file: '{recipe.tokenizer.sample_file}' must contain {{lang}} "
            "(one file of sentences per language)"
        )
    sides = []
    for lang in (recipe.src, recipe.tgt):
        sample = Reservoir(recipe.tokenizer.sample_sentences, recipe.train.seed)
        for chunk in chunks(corpora.iter_lines(Path(template.format(lang=lang))), TEXT_CHUNK):
            sample.offer([normalize(line, recipe.data.lowercase) for line in chunk])
        sides.append(sample.items)
    return sides[0], sides[1]


def _learn_tokenizer(recipe: Recipe, sources: list[PairSource], log) -> Tokenizer:
    """SentencePiece learned from tokenizer.sample_file, or from a sample of the training pairs."""
    cfg = recipe.tokenizer
    started = time.perf_counter()
    if cfg.sample_file:
        (src, tgt), origin = _sample_file_lines(recipe), cfg.sample_file
    else:
        src, tgt, origin = _draw_sample(recipe, sources)
        log(f"sample drawn in {time.perf_counter() - started:.1f} s")
        started = time.perf_counter()
    log(
        f"training SentencePiece ({cfg.type}, {cfg.vocab_size} pieces, "
        f"{'joint' if cfg.joint else 'one per side'}) on {origin}"
    )
    tokenizer = train_tokenizer(cfg, src, tgt, seed=recipe.train.seed)
    log(f"SentencePiece learned in {time.perf_counter() - started:.1f} s")
    return tokenizer


_PROCESSORS: dict[
    str, object
] = {}  # in each process: digest of a model's bytes -> the loaded model


class BlockEncoder:
    """A block of stored lines (corpora.LineBlocks) -> its ids, flat, and each line's length,
    with one side's SentencePiece model. Picklable (it carries the model's bytes, loaded once per
    process), so worker processes can encode blocks side by side."""

    def __init__(self, proto: bytes, dtype):
        self.proto, self.dtype = proto, np.dtype(dtype)
        self.key = hashlib.sha1(proto).hexdigest()

    def __call__(self, raw: bytes) -> tuple[np.ndarray, np.ndarray]:
        sp = _PROCESSORS.get(self.key)
        if sp is None:
            sp = _PROCESSORS[self.key] = Tokenizer(self.proto).src
        seqs = sp.encode(split_block(raw), num_threads=1)
        lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
        return np.fromiter(
            chain.from_iterable(seqs), dtype=self.dtype, count=int(lengths.sum())
        ), lengths


@dataclass(frozen=True)
class CleanAndEncode:
    """A raw training block (PairSource.blocks) cleaned and filtered (pairs.Cleaning), then each
    side's kept lines encoded: one worker call per block, so reading, cleaning and encoding
    share one pass. Gives (chunk, (source ids, lengths), (target ids, lengths))."""

    cleaning: Cleaning
    src: BlockEncoder
    tgt: BlockEncoder

    def __call__(self, block: tuple[bytes, ...]) -> tuple[CleanChunk, tuple, tuple]:
        chunk = self.cleaning(block)
        return chunk, self.src(chunk.src), self.tgt(chunk.tgt)


def _line_blocks(path: Path, n: int) -> Iterator[bytes]:
    with corpora.LineBlocks(path) as text:
        while (block := text.take(n))[1]:
            yield block[0]


def encode_text_file(tokenizer: Tokenizer, data_dir: Path, name: str, dtype, workers: int) -> dict:
    """A stored split's text, ``{name}.{side}.txt`` -> ids and offsets arrays, ENCODE_CHUNK lines
    at a time, on ``workers`` processes with one SentencePiece thread each, stored in line order
    (the held-out splits; the training split is encoded as it is read, see CleanAndEncode)."""
    meta = {}
    for side in ("src", "tgt"):
        encode = BlockEncoder(tokenizer.src_proto if side == "src" else tokenizer.tgt_proto, dtype)
        writer = SideWriter(data_dir, name, side, dtype)
        text = data_dir / f"{name}.{side}.txt"
        # A held-out split is one block: starting processes for it would cost more than it saves.
        single = text.stat().st_size < 2 * ENCODE_CHUNK * 100
        try:
            for ids, lengths in ordered_map(
                encode, _line_blocks(text, ENCODE_CHUNK), 1 if single else workers
            ):
                writer.append(ids, lengths)
        except BaseException:
            writer.abort()
            raise
        meta[side] = writer.close()
    return meta


def preprocess(recipe: Recipe, run_dir: Path, log=print) -> dict:
    """Preprocess ``recipe``'s corpora into ``run_dir`` (see _preprocess). When it fails or is
    interrupted, the folders it created are removed: no run dir that looks started is left behind."""
    run_dir = Path(run_dir)
    created = [d for d in (run_dir, run_dir / "data") if not d.exists()]
    try:
        return _preprocess(recipe, run_dir, log)
    except BaseException:
        if created:
            shutil.rmtree(created[0], ignore_errors=True)
        raise


def _nothing_kept(recipe: Recipe, sources: list[PairSource]) -> DataError:
    return DataError(
        f"{sources[0].files[0]}: no training pair survives filtering "
        f"(data.max_len={recipe.data.max_len}, data.max_ratio={recipe.data.max_ratio})"
    )


def _sizes_text(sizes: dict) -> str:
    return (
        f"{sizes['src']['sentences']} pairs, {sizes['src']['tokens']} source and "
        f"{sizes['tgt']['tokens']} target subwords"
    )


def _preprocess(recipe: Recipe, run_dir: Path, log) -> dict:
    """Store the held-out splits' cleaned text; learn SentencePiece on a sample of the training
    pairs (or take the initial model's, with ``train.init_from``); then read, clean, filter and
    encode the training corpora in one streaming pass, and encode the held-out splits."""
    data_dir = run_dir / "data"
    _prepare_data_dir(data_dir, log)
    inherited = None
    if recipe.train.init_from:  # reading its checkpoint needs torch, which a fresh run never loads
        from nmt_cli.finetune import initial_tokenizer

        inherited = initial_tokenizer(recipe)
    sources = [pair_source(recipe, entry) for entry in train_entries(recipe)]
    for path in (
        path for source in sources for path in source.files
    ):  # fail now, not after a long pass
        if not path.is_file():
            raise DataError(f"{path}: file not found")
    files = {}
    for name, entry in split_names(recipe).items():  # small, and checked before the long pass
        if name != "train":
            files[name] = _stream_heldout(recipe, data_dir, name, entry).paths
    if inherited:
        tokenizer = inherited[0]
        log(f"using the tokenizer of {inherited[1]} ({tokenizer.src_vocab_size} pieces)")
    else:
        tokenizer = _learn_tokenizer(recipe, sources, log)
    tokenizer.save(run_dir)

    dtype = id_dtype(max(tokenizer.src_vocab_size, tokenizer.tgt_vocab_size))
    threads = usable_cores()
    started = time.perf_counter()
    report, sizes = _stream_train(recipe, sources, data_dir, tokenizer, dtype, log, threads)
    seconds = time.perf_counter() - started
    read = sum(r["read"] for r in report)
    if not sizes["src"]["sentences"]:
        raise _nothing_kept(recipe, sources)
    log(
        f"train: {_sizes_text(sizes)} (read, cleaned and encoded in {seconds:.1f} s on {threads} cores, "
        f"{2 * read / max(seconds, 1e-9):.0f} lines/s)"
    )
    dropped = Counter()
    for r in report:
        dropped.update(r["dropped"])
    files = {"train": [f for r in report for f in r["files"]], **files}
    meta = {
        "format": DATA_FORMAT,
        "src": recipe.src,
        "tgt": recipe.tgt,
        "splits": {"train": sizes},
        "files": files,
        "dropped": dict(dropped),
        "corpora": report,
        "id_dtype": dtype.name,
        "src_vocab": tokenizer.src_vocab_size,
        "tgt_vocab": tokenizer.tgt_vocab_size,
        "tokenizer_from": str(inherited[1]) if inherited else None,
    }
    for name in split_names(recipe):
        if name != "train":
            meta["splits"][name] = encode_text_file(tokenizer, data_dir, name, dtype, threads)
            log(f"{name}: {_sizes_text(meta['splits'][name])}")
    started = time.perf_counter()
    save_shortlist_arrays(data_dir, *count_split_shortlist(data_dir, tokenizer))
    log(f"shortlist learned in {time.perf_counter() - started:.1f} s")
    meta["tok_references"] = save_tok_references(recipe, data_dir, log)
    save_recipe(recipe, run_dir / "recipe.yaml")
    tmp = data_dir / "meta.json.part"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(meta, indent=1))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, data_dir / "meta.json")
    return meta


# --------------------------------------------------------------------------- batches


@dataclass
class Batch:
    src: torch.Tensor  # (B, S) source ids, padded with PAD
    src_lengths: torch.Tensor  # (B,) int64, on CPU (pack_padded_sequence wants them there)
    tgt_in: torch.Tensor  # (B, T) BOS y_1 .. y_{T-1}
    tgt_out: torch.Tensor  # (B, T) y_1 .. y_{T-1} EOS
    tgt_tokens: int  # real target tokens, EOS included, padding not

    def to(self, device: torch.device) -> Batch:
        return Batch(
            self.src.to(device, non_blocking=True),
            self.src_lengths,
            self.tgt_in.to(device, non_blocking=True),
            self.tgt_out.to(device, non_blocking=True),
            self.tgt_tokens,
        )


def make_batch(split: EncodedSplit, indices: Sequence[int], max_src: int | None = None) -> Batch:
    srcs = split.src.take(indices)
    if max_src:
        srcs = [s[:max_src] for s in srcs]
    tgts = split.tgt.take(indices)
    return collate(srcs, tgts)


def collate(srcs: Sequence[np.ndarray], tgts: Sequence[np.ndarray]) -> Batch:
    n = len(srcs)
    src_len = np.array([len(s) for s in srcs], dtype=np.int64)
    tgt_len = np.array([len(t) + 1 for t in tgts], dtype=np.int64)
    src = np.full((n, max(1, int(src_len.max()))), PAD, dtype=np.int64)
    tgt_in = np.full((n, int(tgt_len.max())), PAD, dtype=np.int64)
    tgt_out = np.full_like(tgt_in, PAD)
    for i, (s, t) in enumerate(zip(srcs, tgts)):
        src[i, : len(s)] = s
        tgt_in[i, 0] = BOS
        tgt_in[i, 1 : len(t) + 1] = t
        tgt_out[i, : len(t)] = t
        tgt_out[i, len(t)] = EOS
    # An empty source still gets one (padding) position so attention has something to read.
    import torch  # here, not at the top: preprocessing never loads torch (nmt_cli/shortlist.py)

    return Batch(
        torch.from_numpy(src),
        torch.from_numpy(np.maximum(src_len, 1)),
        torch.from_numpy(tgt_in),
        torch.from_numpy(tgt_out),
        int(tgt_len.sum()),
    )


class Batches(Sequence):
    """One epoch's batches without a Python object per batch: the sentence indices in length
    order (int32 while they fit), where each batch's run of them ends, and the order the batches
    are taken in. Item ``i`` is the i-th batch taken, an array of sentence indices."""

    def __init__(self, order: np.ndarray, bounds: np.ndarray, taken: np.ndarray):
        self.order, self.bounds, self.taken = order, bounds, taken

    def __len__(self) -> int:
        return len(self.taken)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        b = self.taken[i]
        return self.order[self.bounds[b] : self.bounds[b + 1]]


EPOCH_SHARD = 1 << 18  # pairs: a larger split's epoch is built and taken one shard at a time
SHARD_BLOCK = (
    1 << 12
)  # pairs: a shard is made of runs of this many neighbouring pairs, drawn at random


def token_batches(
    src_lengths: np.ndarray,
    tgt_lengths: np.ndarray,
    batch_tokens: int,
    seed: int,
    epoch: int,
    shuffle: bool = True,
    shard: int | None = None,
) -> Batches:
    """Group sentence indices into batches of about ``batch_tokens`` real target tokens.

    Sentences are sorted by (target, source) length with a random tie-break, so a batch holds
    sentences of nearly equal length and padding stays small; batch order is shuffled per epoch
    from ``seed`` and ``epoch`` (and ``shard``, for one shard of a large split's epoch), which
    makes the sequence reproducible for exact resume. A batch takes sentences in that order
    while their tokens fit (the first always).
    """
    rng = np.random.default_rng([seed, epoch] if shard is None else [seed, epoch, shard])
    n = len(src_lengths)
    longest = max(int(src_lengths.max(initial=0)), int(tgt_lengths.max(initial=0)))
    if shard is not None and shuffle and n < 2**21 and longest < 2**21:
        # One sort of one distinct 63-bit key (target length, source length, a random rank):
        # the same kind of order as the lexsort below, in 15 ms instead of 72 for 2^18 pairs.
        key = (
            (tgt_lengths.astype(np.int64) << 42)
            | (src_lengths.astype(np.int64) << 21)
            | rng.permutation(n)
        )
        order = np.argsort(key)
        del key
    else:
        tie = rng.random(n) if shuffle else np.arange(n)
        order = np.lexsort((tie, src_lengths, tgt_lengths))
        del tie
    if n < 2**31:
        order = order.astype(np.int32)
    bounds = _batch_bounds(tgt_lengths, order, batch_tokens)
    taken = rng.permutation(len(bounds) - 1) if shuffle else np.arange(len(bounds) - 1)
    return Batches(order, bounds, taken)


def epoch_shards(
    split: EncodedSplit, batch_tokens: int, seed: int, epoch: int
) -> Iterator[Batches]:
    """One epoch's batches (of sentence indices into ``split``), a shard at a time.

    A split of up to EPOCH_SHARD pairs is one shard: :func:`token_batches` over all of it. A
    larger one is cut, afresh each epoch, into shards of about EPOCH_SHARD pairs: its pairs
    are taken in runs of SHARD_BLOCK neighbours, the runs shuffled and dealt out to the shards in
    turn, and each shard batched and shuffled on its own. Every pair is seen once an epoch and a
    shard draws from the whole corpus (a list of corpora read one after another is mixed), while
    the memory this takes is a shard's (6 MB held, 9 MB while it is built), not the corpus's: a
    whole-corpus order would hold 4 bytes a pair of a 40M-pair split for the whole epoch, and
    twice that while it is built. Reading runs of neighbours keeps the lengths' reads sequential.
    """
    n = len(split)
    if n <= EPOCH_SHARD:
        yield token_batches(
            side_lengths(split.src), side_lengths(split.tgt), batch_tokens, seed, epoch
        )
        return
    blocks = np.random.default_rng([seed, epoch]).permutation(-(-n // SHARD_BLOCK))
    for shard, members in enumerate(np.array_split(blocks, -(-n // EPOCH_SHARD))):
        starts = members.astype(np.int64) * SHARD_BLOCK
        rows = np.concatenate([np.arange(a, min(a + SHARD_BLOCK, n)) for a in starts.tolist()])
        lengths = [
            np.concatenate(
                [np.diff(side.offsets[a : min(a + SHARD_BLOCK, n) + 1]) for a in starts.tolist()]
            ).astype(np.int32)
            for side in (split.src, split.tgt)
        ]
        split.release_pages()
        batches = token_batches(*lengths, batch_tokens, seed, epoch, shard=shard)
        yield Batches(
            rows[batches.order].astype(np.int32 if n < 2**31 else np.int64),
            batches.bounds,
            batches.taken,
        )


def _batch_bounds(tgt_lengths: np.ndarray, order: np.ndarray, batch_tokens: int) -> np.ndarray:
    """Where each batch ends in ``order`` (a batch takes sentences while their tokens, target
    length + 1 each, fit in ``batch_tokens``; the first always). The order is sorted by target
    length, so it is a few runs of equal cost: the token count before any position is arithmetic
    on the runs, and the work in Python is per batch, not per sentence."""
    n = len(order)
    run_starts, run_costs = _equal_length_runs(tgt_lengths, order)
    run_tokens = np.zeros(len(run_starts), dtype=np.int64)  # tokens before each run
    np.cumsum((np.diff(np.append(run_starts, n)) * run_costs)[:-1], out=run_tokens[1:])
    bounds = [0]
    while bounds[-1] < n:
        start = bounds[-1]
        r = int(np.searchsorted(run_starts, start, side="right")) - 1
        limit = int(run_tokens[r] + (start - run_starts[r]) * run_costs[r]) + batch_tokens
        r = int(np.searchsorted(run_tokens, limit, side="right")) - 1
        run_end = int(run_starts[r + 1]) if r + 1 < len(run_starts) else n
        end = min(run_end, int(run_starts[r]) + (limit - int(run_tokens[r])) // int(run_costs[r]))
        bounds.append(max(end, start + 1))
    return np.asarray(bounds, dtype=np.int64)


def _equal_length_runs(
    tgt_lengths: np.ndarray, order: np.ndarray, chunk: int = 1 << 20
) -> tuple[np.ndarray, np.ndarray]:
    """Where each run of equal target length starts in ``order``, and its cost (length + 1)."""
    starts, costs, last = [], [], None
    for a in range(0, len(order), chunk):
        t = np.asarray(tgt_lengths[order[a : a + chunk]], dtype=np.int64)
        if last is None or t[0] != last:
            starts.append(np.array([a]))
            costs.append(t[:1])
        change = np.flatnonzero(np.diff(t)) + 1
        starts.append(change + a)
        costs.append(t[change])
        last = t[-1]
    if not starts:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(starts).astype(np.int64), np.concatenate(costs) + 1


def side_lengths(side: Side, chunk: int = 1 << 20) -> np.ndarray:
    """Each sentence's length as int16 (int32 if one is longer), computed a chunk at a time: a
    40M-pair split's int64 lengths and their difference temporaries would cost 320 MB each. The
    offsets' pages are unmapped as it goes (they would count 320 MB a side in resident memory)."""
    for dtype in (np.int16, np.int32):
        out = np.empty(len(side), dtype=dtype)
        for i in range(0, len(out), chunk):
            part = np.diff(side.offsets[i : i + chunk + 1])
            if (i // chunk) % 8 == 7:
                side.release_pages()
            if len(part) and part.max() > np.iinfo(dtype).max:
                break
            out[i : i + chunk] = part
        else:
            side.release_pages()
            return out
    raise AssertionError("unreachable: int32 holds any sentence length")


def padding_fraction(split: EncodedSplit, batches: Sequence[np.ndarray]) -> float:
    """Share of padded positions over all source and target positions of the batches."""
    src_len, tgt_len = split.src.lengths, split.tgt.lengths + 1
    real = padded = 0
    for b in batches:
        real += int(src_len[b].sum() + tgt_len[b].sum())
        padded += len(b) * int(src_len[b].max() + tgt_len[b].max())
    return 1.0 - real / max(padded, 1)


def iterate_epoch(
    split: EncodedSplit,
    batch_tokens: int,
    seed: int,
    epoch: int,
    start: int = 0,
    rank: int = 0,
    world: int = 1,
) -> Iterator[tuple[int, Batch]]:
    """Yield (position, batch) for one epoch from ``start``; rank r of w takes every w-th batch
    (of each shard's batches, a multiple of w are used). Resuming builds the shards before
    ``start`` again to count their batches (a fraction of a second each)."""
    first = 0  # position of the shard's first batch
    for batches in epoch_shards(split, batch_tokens, seed, epoch):
        usable = len(batches) - len(batches) % world
        for pos in range(max(start, first), first + usable, world):
            yield pos, make_batch(split, batches[pos - first + rank])
        first += usable


def ensure_preprocessed(recipe: Recipe, run_dir: Path, log=print) -> None:
    """Preprocess when the run dir has no data yet; refuse data made from a different recipe."""
    meta_path = run_dir / "data" / "meta.json"
    if not meta_path.exists():
        log(f"{run_dir}: no preprocessed data yet; running nmt preprocess first")
        preprocess(recipe, run_dir, log)
        return
    saved_path = run_dir / "recipe.yaml"
    if saved_path.exists():
        import yaml

        try:
            saved = yaml.safe_load(saved_path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError:
            raise DataError(f"{saved_path}: unreadable; re-run nmt preprocess") from None
        now, default = recipe.to_dict(), Recipe().to_dict()
        # A key the saved recipe lacks predates that key: it had the default's meaning.
        was = lambda section, k: (saved.get(section) or {}).get(k, default[section][k])
        changed = [
            f"{section}.{k}"
            for section in ("data", "tokenizer")
            for k in now[section]
            if section != "data" or k != "test"
            if was(section, k) != now[section][k]
        ]
        changed += [k for k in ("src", "tgt") if saved.get(k) != now[k]]
        if was("train", "init_from") != now["train"]["init_from"]:
            changed.append("train.init_from (the tokenizer comes from it)")
        if changed:
            raise DataError(
                f"{run_dir}: data was preprocessed with different {', '.join(changed)}; "
                "re-run nmt preprocess (or use another --run-dir)"
            )
