"""Sentence pairs as a stream: where a corpus's pairs come from, how each is cleaned and filtered,
and exact duplicates dropped in small memory (the bounded sample SentencePiece learns from is
nmt_cli/data/reservoir.py).

Nothing here holds a corpus: pairs flow through in chunks, and what stays in memory is eight bytes
a kept pair (the duplicate hashes).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from itertools import compress, islice, repeat
from pathlib import Path

import numpy as np

from nmt_cli.data import corpora
from nmt_cli.runtime.errors import DataError

# Whitespace other than the space and the line break: normalize() (nmt_cli.data.tokenizer) replaces
# every character of it. Python's regular expressions and str.split() share one idea of
# whitespace. A character class alone is scanned in one pass; alternatives would be tried at
# every position.
_OTHER_SPACE = re.compile(r"[^\S \n]")


def _abnormal_positions(text: str) -> list[int]:
    """Positions in ``text`` (lines joined by "\n") of every place where normalize() would change
    a line: other whitespace, a double space, a space at a line's start or end."""
    found = [m.start() for m in _OTHER_SPACE.finditer(text)]
    for needle, shift in (("  ", 0), (" \n", 0), ("\n ", 1)):
        at = text.find(needle)
        while at >= 0:
            found.append(at + shift)
            at = text.find(needle, at + 1)
    if text.startswith(" "):
        found.append(0)
    if text.endswith(" "):
        found.append(len(text) - 1)
    return found


def normalize_lines(lines: Sequence[str], lowercase: bool = False) -> list[str]:
    """:func:`normalize` of every line (lines hold no line break), in a few passes over their
    joined text instead of a Python step per line: a scan finds the lines not in normal form
    already (most corpora have few), and only those are normalised one by one."""
    lines = list(lines)
    found = _abnormal_positions("\n".join(lines))
    if found:
        starts = np.zeros(len(lines), dtype=np.int64)
        np.cumsum(
            np.fromiter(map(len, lines), dtype=np.int64, count=len(lines))[:-1] + 1, out=starts[1:]
        )
        for i in np.unique(np.searchsorted(starts, found, side="right") - 1):
            lines[i] = " ".join(lines[i].split())
    return list(map(str.lower, lines)) if lowercase else lines


def split_block(raw: bytes) -> list[str]:
    """The lines of a block of whole lines (see corpora.LineBlocks), decoded as
    :func:`corpora.iter_lines` decodes them; a trailing ``\r`` is left for normalisation to
    strip."""
    if not raw:
        return []
    text = raw.decode("utf-8", errors="replace")
    return (text[:-1] if text.endswith("\n") else text).split("\n")


@dataclass(frozen=True)
class PairSource:
    """One corpus: two line-aligned files (``files``: source, target) or one ``source<TAB>target``
    file (``tsv``). ``label`` is how counts and messages name it."""

    label: str
    files: tuple[Path, ...]
    tsv: bool = False
    # Tokens its sources start with, its direction, and whether it is back-translated
    # (nmt_cli/data/directions.py); none for a plain pair's corpus.
    tags: tuple[str, ...] = ()
    direction: str = ""
    back_translated: bool = False

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter_tsv(self.files[0]) if self.tsv else iter_aligned(*self.files)

    @property
    def paths(self) -> list[str]:
        return [str(p) for p in self.files]

    def blocks(self, n: int) -> Iterator[tuple[bytes, ...]]:
        """The raw text ``n`` lines at a time: (source block, target block), or (TSV block,)."""
        for block, _ in self.blocks_with_starts(n):
            yield block

    def raw_pairs(self, n: int) -> Iterator[RawPairs]:
        """The same blocks as :meth:`blocks`, as RawPairs that know where their lines start."""
        for block, starts in self.blocks_with_starts(n):
            yield RawPairs(block, starts)

    def blocks_with_starts(
        self, n: int
    ) -> Iterator[tuple[tuple[bytes, ...], tuple[np.ndarray, ...]]]:
        """Each block of :meth:`blocks` with each side's line starts (LineBlocks.take_lines)."""
        if self.tsv:
            with corpora.LineBlocks(self.files[0]) as tsv:
                while len((block := tsv.take_lines(n))[1]) > 1:
                    yield block[:1], block[1:]
            return
        src_path, tgt_path = self.files
        # The target side is read on a thread while this one reads the source: decompression
        # releases the GIL, so the two files take one core each where cores are free.
        with (
            corpora.LineBlocks(src_path) as src,
            corpora.LineBlocks(tgt_path) as tgt,
            ThreadPoolExecutor(1) as reader,
        ):
            lines = 0
            while True:
                pending = reader.submit(tgt.take_lines, n)
                (src_block, src_starts), (tgt_block, tgt_starts) = (
                    src.take_lines(n),
                    pending.result(),
                )
                n_src, n_tgt = len(src_starts) - 1, len(tgt_starts) - 1
                if n_src != n_tgt:
                    raise DataError(
                        f"{src_path} has {lines + n_src + src.count_rest()} lines but {tgt_path} "
                        f"has {lines + n_tgt + tgt.count_rest()}; line i of one must translate "
                        "line i of the other"
                    )
                if not n_src:
                    return
                lines += n_src
                yield (src_block, tgt_block), (src_starts, tgt_starts)


def iter_aligned(src_path: Path, tgt_path: Path) -> Iterator[tuple[str, str]]:
    """Line i of one file with line i of the other; files of different lengths are an error."""
    src, tgt = corpora.iter_lines(src_path), corpora.iter_lines(tgt_path)
    n = 0
    for s in src:
        t = next(tgt, None)
        if t is None:
            extra_src, extra_tgt = 1 + sum(1 for _ in src), 0
            break
        n += 1
        yield s, t
    else:
        extra_src, extra_tgt = 0, sum(1 for _ in tgt)
    if extra_src or extra_tgt:
        raise DataError(
            f"{src_path} has {n + extra_src} lines but {tgt_path} has {n + extra_tgt}; "
            "line i of one must translate line i of the other"
        )


def iter_tsv(path: Path) -> Iterator[tuple[str, str] | None]:
    """``source<TAB>target`` lines (further columns, as some exports carry scores, are ignored);
    a line without a tab yields None, which the caller counts or refuses."""
    for line in corpora.iter_lines(path):
        fields = line.split("\t", 2)
        yield (fields[0], fields[1]) if len(fields) >= 2 else None


def chunks(pairs: Iterator, size: int) -> Iterator[list]:
    it = iter(pairs)
    while chunk := list(islice(it, size)):
        yield chunk


FILTER_REASONS = (
    "empty side",
    "longer than {max_len} words",
    "length ratio over {max_ratio:g}",
    "numbers differ",
)
_DIGITS = re.compile(r"\d+")


def numbers_differ(src: Sequence[str], tgt: Sequence[str]) -> np.ndarray:
    """``data.filter_numbers``: whether each pair's runs of digits differ between its sides, as
    multisets, so that 1,234 and 1 234, 3.5 and 3,5, 10:30 and 10 h 30 agree and 2 and deux do
    not."""
    return np.fromiter(
        (sorted(_DIGITS.findall(a)) != sorted(_DIGITS.findall(b)) for a, b in zip(src, tgt)),
        dtype=bool,
        count=len(src),
    )


def reason_text(code: int, max_len: int, max_ratio: float) -> str:
    """The words of a :func:`filter_codes` code (1 and up) as counts and messages show them."""
    return FILTER_REASONS[code - 1].format(max_len=max_len, max_ratio=max_ratio)


def filter_reason(src: str, tgt: str, max_len: int, max_ratio: float) -> str | None:
    """Why a normalised training pair is dropped, or None to keep it (:func:`filter_codes` of one
    pair)."""
    code = int(filter_codes([src], [tgt], max_len, max_ratio)[0])
    return reason_text(code, max_len, max_ratio) if code else None


def word_counts(lines: Sequence[str]) -> np.ndarray:
    """Words of each normalised line (its spaces + 1; none when empty)."""
    spaces = np.fromiter(map(str.count, lines, repeat(" ")), dtype=np.int64, count=len(lines))
    nonempty = np.fromiter(map(bool, lines), dtype=bool, count=len(lines))
    return np.where(nonempty, spaces + 1, 0)


def filter_codes(
    src: Sequence[str], tgt: Sequence[str], max_len: int, max_ratio: float
) -> np.ndarray:
    """:func:`filter_reason` of many normalised pairs at once: 0 to keep a pair, i for the i-th of
    FILTER_REASONS (checked in that order, as filter_reason does)."""
    return codes_of_counts(word_counts(src), word_counts(tgt), max_len, max_ratio)


def codes_of_counts(ns: np.ndarray, nt: np.ndarray, max_len: int, max_ratio: float) -> np.ndarray:
    """:func:`filter_codes` from the pairs' word counts."""
    longest, shortest = np.maximum(ns, nt), np.minimum(ns, nt)
    codes = np.zeros(len(ns), dtype=np.int8)
    codes[(longest > max_ratio * shortest) & (longest > 3)] = 3
    codes[(ns > max_len) | (nt > max_len)] = 2
    codes[shortest == 0] = 1
    return codes


@dataclass
class CleanChunk:
    """What cleaning made of one block of pairs: the kept lines of each side as UTF-8 text ready
    to store (each line ending in ``\n``; bytes, which cross between processes without a
    re-encoding), where each line starts in it, and the counts."""

    read: int
    kept: int
    src: bytes
    tgt: bytes
    dropped: dict[str, int]
    src_starts: np.ndarray  # kept + 1 offsets: line i is src[src_starts[i]:src_starts[i + 1] - 1]
    tgt_starts: np.ndarray

    def pairs(self) -> list[tuple[str, str]]:
        return list(zip(split_block(self.src), split_block(self.tgt)))


def _line_starts(raw: bytes) -> np.ndarray:
    """Where each line of a block of whole lines starts, and one more: line i is
    ``raw[starts[i]:starts[i + 1] - 1]`` (a last line without a line end included)."""
    ends = np.flatnonzero(np.frombuffer(raw, dtype=np.uint8) == 10) + 1
    tail = [len(raw) + 1] if raw and not raw.endswith(b"\n") else []
    return np.concatenate([[0], ends, tail]).astype(np.int64)


class RawPairs(Sequence):
    """The pairs of a raw block from :meth:`PairSource.blocks`, cut out only when asked for:
    SentencePiece's sample (a Reservoir) takes a few of each block. A pair is (source, target) as
    raw bytes, before any cleaning; a TSV line is split at its first tab, and one without a tab is
    ``None`` (cleaning would drop it)."""

    def __init__(self, block: tuple[bytes, ...], starts: Sequence[np.ndarray] | None = None):
        self.block = block
        # where each side's lines start: given by a reader that has already scanned the block
        self.starts = list(starts) if starts is not None else [_line_starts(side) for side in block]
        self.tsv = len(block) == 1

    def __len__(self) -> int:
        return len(self.starts[0]) - 1

    def take(self, indices: np.ndarray) -> list[tuple[bytes, bytes] | None]:
        """The pairs at ``indices``, cut out together."""
        sides = []
        for side, starts in zip(self.block, self.starts):
            begins, ends = starts[indices].tolist(), (starts[indices + 1] - 1).tolist()
            sides.append([side[b:e] for b, e in zip(begins, ends)])
        if not self.tsv:
            return list(zip(*sides))
        return [(f[0], f[1]) if len(f := line.split(b"\t", 2)) >= 2 else None for line in sides[0]]

    def __getitem__(self, i):
        """Pair ``i`` (from 0, no negative indices), or a list of pairs for a slice."""
        if isinstance(i, slice):
            return self.take(np.arange(*i.indices(len(self))))
        if i < 0 or i >= len(self):
            raise IndexError(i)
        return self.take(np.array([i]))[0]


def clean_raw_pairs(raw: Sequence[tuple[bytes, bytes] | None], cleaning: Cleaning) -> CleanChunk:
    """:class:`RawPairs` items cleaned and filtered as the blocks they came from would be."""
    present = [pair for pair in raw if pair is not None]
    block = tuple(b"".join(line + b"\n" for line in side) for side in zip(*present)) or (b"", b"")
    chunk = replace(cleaning, tsv=False)(block)  # TSV lines were split at their tab already
    if len(present) < len(raw):
        chunk.read = len(raw)
        chunk.dropped[NO_TAB] = len(raw) - len(present)
    return chunk


def encoded_lines(lines: list[str]) -> tuple[bytes, np.ndarray]:
    """Lines as UTF-8 text, each ending in "\n", and the offset where each starts (one more: the
    end)."""
    if not lines:
        return b"", np.zeros(1, dtype=np.int64)
    text = ("\n".join(lines) + "\n").encode("utf-8")
    starts = np.zeros(len(lines) + 1, dtype=np.int64)
    starts[1:] = np.flatnonzero(np.frombuffer(text, dtype=np.uint8) == 10) + 1
    return text, starts


# Every character str.split() splits on, as UTF-8: the ASCII ones are bytes below 32 (other
# control bytes are flagged too, which costs only a needless re-normalisation) and the space;
# the others start with byte C2, E1, E2 or E3 and are told apart by the next two
# (tests/data/test_pairs.py checks them against every code point).
def _wide_spaces(arr: np.ndarray) -> np.ndarray:
    """Positions in UTF-8 ``arr`` of U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029,
    U+202F, U+205F and U+3000."""
    lead = np.flatnonzero(((arr & 0xFC) == 0xE0) | (arr == 0xC2))  # E0 too: no case below takes it
    a0 = arr[lead]
    b1, b2 = arr[np.minimum(lead + 1, len(arr) - 1)], arr[np.minimum(lead + 2, len(arr) - 1)]
    general_punctuation = (b1 == 0x80) & (
        ((b2 >= 0x80) & (b2 <= 0x8A)) | (b2 == 0xA8) | (b2 == 0xA9) | (b2 == 0xAF)
    ) | (b1 == 0x81) & (b2 == 0x9F)
    wide = (
        ((a0 == 0xC2) & ((b1 == 0x85) | (b1 == 0xA0)))
        | ((a0 == 0xE1) & (b1 == 0x9A) & (b2 == 0x80))
        | ((a0 == 0xE2) & general_punctuation)
        | ((a0 == 0xE3) & (b1 == 0x80) & (b2 == 0x80))
    )
    return lead[wide]


def _normal_side(raw: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """One side of a raw block with every line :func:`normalize`-d, worked on as UTF-8 bytes: a
    few array passes find the lines not in normal form already (most corpora have few), and only
    those are decoded. Gives the text (uint8, each line ending in a line break), where each line
    ends, and each line's word count; None for text that is not valid UTF-8 (the str path
    replaces bad bytes as :func:`corpora.iter_lines` does)."""
    if raw and not raw.endswith(b"\n"):
        raw += b"\n"
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    arr = np.frombuffer(raw, dtype=np.uint8)
    newline = arr == 10
    if len(arr):
        space = arr == 32
        control = np.flatnonzero(arr < 32)
        found = [
            control[arr[control] != 10],
            np.flatnonzero(
                space[:-1] & (space[1:] | newline[1:])
            ),  # a double space, or one before a line end
            np.flatnonzero(newline[:-1] & space[1:]) + 1,  # a space at a line's start
            np.flatnonzero(space[:1]),
            _wide_spaces(arr),
        ]
        found = np.concatenate(found)
        if len(found):
            lines = raw.split(b"\n")
            for i in np.unique(np.searchsorted(np.flatnonzero(newline), found)).tolist():
                lines[i] = " ".join(lines[i].decode("utf-8").split()).encode("utf-8")
            arr = np.frombuffer(b"\n".join(lines), dtype=np.uint8)
            newline = arr == 10
    ends = np.flatnonzero(newline)
    spaces = np.diff(np.searchsorted(np.flatnonzero(arr == 32), ends), prepend=0)
    lengths = np.diff(ends, prepend=-1) - 1
    return arr, ends, np.where(lengths > 0, spaces + 1, 0)


def _kept_text(
    arr: np.ndarray, ends: np.ndarray, keep: np.ndarray | None
) -> tuple[bytes, np.ndarray]:
    """The kept lines of a side from :func:`_normal_side`, and where each starts (one more: the
    end)."""
    sizes = np.diff(ends, prepend=-1)  # line ends included
    if keep is not None:
        arr, sizes = arr[np.repeat(keep, sizes)], sizes[keep]
    return arr.tobytes(), np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


NO_TAB = "no tab (not source<TAB>target)"


@dataclass(frozen=True)
class Cleaning:
    """Training pairs' cleaning (:func:`normalize`) and filtering (:func:`filter_reason`) applied
    to a raw block from :meth:`PairSource.blocks`; a picklable callable, so worker processes can
    clean blocks while the main process reads the next ones. Gives what the pair-by-pair
    functions give, pair for pair."""

    lowercase: bool
    max_len: int
    max_ratio: float
    tsv: bool = False
    numbers: bool = False  # data.filter_numbers: drop pairs whose digits differ

    def __call__(self, block: tuple[bytes, ...]) -> CleanChunk:
        if not self.tsv and not self.lowercase and not self.numbers:
            sides = [_normal_side(raw) for raw in block]
            if None not in sides:
                return self._filtered(*sides)
        dropped: dict[str, int] = {}
        if self.tsv:
            fields = [line.split("\t", 2) for line in split_block(block[0])]
            read = len(fields)
            with_tab = [f for f in fields if len(f) >= 2]
            if len(with_tab) < read:
                dropped[NO_TAB] = read - len(with_tab)
            src, tgt = [f[0] for f in with_tab], [f[1] for f in with_tab]
        else:
            src, tgt = split_block(block[0]), split_block(block[1])
            read = len(src)
        src, tgt = normalize_lines(src, self.lowercase), normalize_lines(tgt, self.lowercase)
        codes = filter_codes(src, tgt, self.max_len, self.max_ratio)
        if self.numbers:
            codes[(codes == 0) & numbers_differ(src, tgt)] = 4
        counts = np.bincount(codes, minlength=len(FILTER_REASONS) + 1)
        dropped.update(self._reasons(counts))
        if counts[0] < len(src):
            keep = (codes == 0).tolist()
            src, tgt = list(compress(src, keep)), list(compress(tgt, keep))
        (src_text, src_starts), (tgt_text, tgt_starts) = encoded_lines(src), encoded_lines(tgt)
        return CleanChunk(read, len(src), src_text, tgt_text, dropped, src_starts, tgt_starts)

    def _filtered(self, src: tuple, tgt: tuple) -> CleanChunk:
        """Filtering of two sides from :func:`_normal_side` (the bytes path: no tab to split at,
        no lowercasing)."""
        codes = codes_of_counts(src[2], tgt[2], self.max_len, self.max_ratio)
        counts = np.bincount(codes, minlength=len(FILTER_REASONS) + 1)
        keep = codes == 0 if counts[0] < len(codes) else None
        (src_text, src_starts), (tgt_text, tgt_starts) = (
            _kept_text(*src[:2], keep),
            _kept_text(*tgt[:2], keep),
        )
        return CleanChunk(
            len(codes),
            int(counts[0]),
            src_text,
            tgt_text,
            self._reasons(counts),
            src_starts,
            tgt_starts,
        )

    def _reasons(self, counts: np.ndarray) -> dict[str, int]:
        """Pairs dropped per filter reason, from the bincount of :func:`filter_codes`."""
        return {
            reason_text(code, self.max_len, self.max_ratio): int(count)
            for code, count in enumerate(counts[1:], start=1)
            if count
        }


class Deduplicator:
    """Exact duplicate pairs dropped with 8 bytes a distinct pair: 64-bit hashes kept as sorted
    runs whose sizes are distinct powers of two (merged like a binary counter), so inserting is
    amortised O(log n) and a lookup is a binary search per run. Two different pairs share a
    64-bit hash with probability n²/2⁶⁵ (about 1e-4 at 40M pairs), which would drop one pair."""

    def __init__(self) -> None:
        self.runs: list[np.ndarray] = []

    def __len__(self) -> int:
        return sum(len(r) for r in self.runs)

    def fresh(self, pairs: list[tuple[str, str]]) -> list[bool]:
        """For each pair, whether it is the first of its kind (earlier in this chunk included)."""
        if not pairs:
            return []
        # Python's str hash is salted per process, which is enough: duplicates are looked for
        # within one preprocess run.
        hashes = np.fromiter((hash(p) for p in pairs), dtype=np.int64, count=len(pairs))
        unique, first = np.unique(hashes, return_index=True)
        new = np.ones(len(unique), dtype=bool)
        for run in self.runs:
            at = np.searchsorted(run, unique)
            found = at < len(run)
            found[found] = run[at[found]] == unique[found]
            new &= ~found
        keep = np.zeros(len(pairs), dtype=bool)
        keep[first[new]] = True
        self._insert(unique[new])
        return keep.tolist()

    def _insert(self, hashes: np.ndarray) -> None:
        run = hashes
        while self.runs and len(self.runs[-1]) <= len(run):
            run = np.sort(np.concatenate([self.runs.pop(), run]), kind="stable")
        if len(run):
            self.runs.append(run)
