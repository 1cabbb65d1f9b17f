"""The encoded splits of a run dir: flat arrays of SentencePiece ids, memory-mapped.

A split is stored as four ``.npy`` files (``{split}.{src,tgt}.{ids,offsets}.npy``): all token ids
of a side concatenated (uint16 while the vocabulary fits, else int32), and where each sentence
starts. ``data/meta.json`` records each split's sizes and is written last by preprocessing
(nmt_cli/data/preprocess.py), so a split is only read once it is complete. Training maps the arrays
(:func:`map_array`), so a large corpus never becomes a list of Python objects. The vocabulary
shortlist learned from the training split is stored beside it.
"""

from __future__ import annotations

import json
import mmap
import os
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nmt_cli.data import corpora
from nmt_cli.data.shortlist_counts import count_shortlist
from nmt_cli.data.tokenizer import seed_sampling
from nmt_cli.runtime.errors import DataError
from nmt_cli.runtime.output_file import atomic_write

DATA_FORMAT = 1


def _flat(seqs: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    ids = np.fromiter((t for s in seqs for t in s), dtype=np.int32, count=int(offsets[-1]))
    return ids, offsets


def encode_flat(encode, lines: Sequence[str], chunk: int = 50_000) -> tuple[np.ndarray, np.ndarray]:
    """Encode in chunks straight into int32 arrays: a Python list of ints costs several times the
    bytes of an id, which on a large corpus would be most of the memory preprocessing needs."""
    parts = [_flat(encode(lines[i : i + chunk])) for i in range(0, len(lines), chunk)] or [
        _flat([])
    ]
    ids = np.concatenate([p[0] for p in parts])
    lengths = np.concatenate([np.diff(p[1]) for p in parts])
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return ids, offsets


def _save_array(path: Path, array: np.ndarray) -> None:
    with atomic_write(path) as fh:
        np.save(fh, array)


PREAD_FROM = 64 << 20  # bytes of stored ids from which batches read them with pread (Side.take)


@dataclass(frozen=True)
class MappedArray:
    """A 1-D ``.npy`` file mapped read-only: the array reads straight from ``mapping``, whose data
    begins ``start`` bytes into the file at ``path``."""

    path: Path
    start: int
    mapping: mmap.mmap = field(repr=False)
    array: np.ndarray = field(repr=False)

    def release_pages(self) -> None:
        """Drop the pages read so far from this process's mapping (see
        :meth:`EncodedSplit.release_pages`); the data stays readable."""
        if hasattr(mmap, "MADV_DONTNEED"):
            self.mapping.madvise(mmap.MADV_DONTNEED)


def map_array(path: Path) -> MappedArray:
    """Map the 1-D array of a ``.npy`` file read-only (what ``np.load(mmap_mode="r")`` gives, with
    the mapping kept in hand). A file that is not such an array raises ValueError or EOFError."""
    with open(path, "rb") as fh:
        version = np.lib.format.read_magic(fh)
        read_header = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        shape, fortran_order, dtype = read_header(fh)
        if len(shape) != 1 or fortran_order or dtype.hasobject:
            raise ValueError(f"not a 1-D array of numbers ({dtype}, shape {shape})")
        start = fh.tell()
        mapping = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    array = np.frombuffer(mapping, dtype=dtype, count=shape[0], offset=start)
    return MappedArray(Path(path), start, mapping, array)


@dataclass
class Side:
    """One side of a split: all token ids concatenated, and where each sentence starts. ``files``
    holds the mappings of (ids, offsets) when the side was read from a run dir (:meth:`open`)."""

    ids: np.ndarray
    offsets: np.ndarray
    files: tuple[MappedArray, MappedArray] | None = field(default=None, repr=False, compare=False)
    _fds: tuple[int, int] | None = field(default=None, repr=False, compare=False)  # for pread

    @classmethod
    def open(cls, ids_path: Path, offsets_path: Path) -> Side:
        ids, offsets = map_array(ids_path), map_array(offsets_path)
        return cls(ids.array, offsets.array, (ids, offsets))

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def get(self, i: int) -> np.ndarray:
        return self.ids[self.offsets[i] : self.offsets[i + 1]]

    def take(self, rows: Sequence[int]) -> list[np.ndarray]:
        """The sentences at ``rows``. Stored ids of more than PREAD_FROM bytes are read with
        ``pread``: read through the mapping, each sentence maps the kernel's fault-around window
        of each array, which the process's resident memory counts until it is unmapped. Smaller
        arrays (which can count no more than their size) are read through the mapping, which
        costs less per sentence (docs/results.md)."""
        if self.files is not None and self.ids.nbytes > PREAD_FROM and hasattr(os, "pread"):
            return self._pread(rows)  # (no pread on Windows)
        ids, offsets = self.ids, self.offsets
        return [ids[offsets[i] : offsets[i + 1]] for i in rows]

    def _pread(self, rows: Sequence[int]) -> list[np.ndarray]:
        ids_file, off_file = self.files
        if self._fds is None:
            self._fds = tuple(os.open(f.path, os.O_RDONLY) for f in (off_file, ids_file))
            for fd in self._fds:
                weakref.finalize(self, os.close, fd)
        off_fd, ids_fd = self._fds
        off_dtype, ids_dtype = self.offsets.dtype, self.ids.dtype
        out = []
        for i in rows:
            where = off_file.start + int(i) * off_dtype.itemsize
            a, b = np.frombuffer(os.pread(off_fd, 2 * off_dtype.itemsize, where), off_dtype)
            where = ids_file.start + int(a) * ids_dtype.itemsize
            out.append(
                np.frombuffer(os.pread(ids_fd, int(b - a) * ids_dtype.itemsize, where), ids_dtype)
            )
        return out

    def release_pages(self) -> None:
        """See :meth:`EncodedSplit.release_pages`."""
        for mapped in self.files or ():
            mapped.release_pages()


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
        files = []
        for part in ("ids", "offsets"):
            path = data_dir / f"{split}.{side}.{part}.npy"
            try:
                files.append(map_array(path))
            except FileNotFoundError:
                raise DataError(f"{path}: missing; re-run nmt preprocess") from None
            except (ValueError, OSError, EOFError) as exc:
                raise DataError(f"{path}: corrupt ({exc}); re-run nmt preprocess") from None
        ids, offsets = (f.array for f in files)
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
        sides.append(Side(ids, offsets, tuple(files)))
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


def encoded_split(src_lines: Sequence[str], tgt_lines: Sequence[str], tokenizer) -> EncodedSplit:
    """The training pairs encoded as preprocessing encodes them (one segmentation per line),
    for an epoch whose text differs from the stored one (``data.augment_case``)."""
    src = encode_flat(tokenizer.encode_src, src_lines)
    tgt = encode_flat(tokenizer.encode_tgt, tgt_lines)
    return EncodedSplit(Side(*src), Side(*tgt))


SHORTLIST_PAIRS = 300_000  # a split up to this size is counted whole, as learn_shortlist does
SHORTLIST_SAMPLE = 100_000  # pairs sampled from a larger one


def count_split_shortlist(data_dir: Path, tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """The shortlist's arrays (``count_shortlist``) for the stored training split. A larger
    split gives a random sample of its pairs, read row by row (:func:`read_rows`), so counting
    never copies a whole side into memory. Counting co-occurrences holds every (source piece,
    target piece) pair of each sampled sentence pair, so the sample bounds the memory it takes
    (docs/results.md)."""
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
    reads, as the pages a map touches count in the process's resident memory, and rows spread over
    a large split would touch most pages of its arrays (docs/results.md)."""
    side = Side.open(ids_path, offsets_path)
    parts = side.take(rows.tolist())
    new_offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in parts], out=new_offsets[1:])
    return (np.concatenate(parts) if parts else np.zeros(0, side.ids.dtype)).astype(
        np.int64
    ), new_offsets


def save_shortlist_arrays(
    data_dir: Path, frequent: np.ndarray, table: np.ndarray, ranked: bool = True
) -> None:
    # Ranked frequent pieces get their own file name, so an older id-sorted one is never misread.
    name = "shortlist.ranked.npy" if ranked else "shortlist.frequent.npy"
    _save_array(data_dir / name, frequent.astype(np.int32))
    _save_array(data_dir / "shortlist.table.npy", table.astype(np.int32))


def load_shortlist_arrays(run_dir: Path) -> tuple[np.ndarray, np.ndarray, bool] | None:
    """The run's shortlist arrays (frequent pieces, table, whether the frequent ones are ranked),
    or None for data preprocessed before shortlists existed."""
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
    return frequent, table, ranked


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
