"""Sentence pairs as a stream: where a corpus's pairs come from, how each is cleaned and filtered,
exact duplicates dropped in small memory, and a bounded random sample kept for SentencePiece.

Nothing here holds a corpus: pairs flow through in chunks, and what stays in memory is bounded by
the configuration (the reservoir) or is eight bytes a kept pair (the duplicate hashes).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Iterator

import numpy as np

from nmt_cli import corpora
from nmt_cli.errors import DataError


def normalize(line: str, lowercase: bool = False) -> str:
    """Collapse all whitespace runs (tabs, no-break spaces, ...) to one space and strip the ends;
    lowercase too for a recipe with data.lowercase. Training data and every line a trained model
    reads (translate, score) go through it alike."""
    line = " ".join(line.split())
    return line.lower() if lowercase else line


@dataclass(frozen=True)
class PairSource:
    """One corpus: two line-aligned files (``files``: source, target) or one ``source<TAB>target``
    file (``tsv``). ``label`` is how counts and messages name it."""
    label: str
    files: tuple[Path, ...]
    tsv: bool = False

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter_tsv(self.files[0]) if self.tsv else iter_aligned(*self.files)

    @property
    def paths(self) -> list[str]:
        return [str(p) for p in self.files]


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
        raise DataError(f"{src_path} has {n + extra_src} lines but {tgt_path} has {n + extra_tgt}; "
                        "line i of one must translate line i of the other")


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


def filter_reason(src: str, tgt: str, max_len: int, max_ratio: float) -> str | None:
    """Why a normalised training pair is dropped, or None to keep it."""
    ns, nt = src.count(" ") + 1 if src else 0, tgt.count(" ") + 1 if tgt else 0
    if ns == 0 or nt == 0:
        return "empty side"
    if ns > max_len or nt > max_len:
        return f"longer than {max_len} words"
    if max(ns, nt) > max_ratio * min(ns, nt) and max(ns, nt) > 3:
        return f"length ratio over {max_ratio:g}"
    return None


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


class Reservoir:
    """A uniform random sample of at most ``capacity`` items from a stream of unknown length
    (Li 1994, Algorithm L: skips drawn from the geometric law, so a long stream costs few draws).
    While the stream is shorter than the capacity the sample is the whole stream, in order."""

    def __init__(self, capacity: int, seed: int = 0):
        self.capacity = capacity
        self.items: list = []
        self.rng = random.Random(seed)
        self.seen = 0
        self._w = 1.0
        self._next = 0

    def _draw_skip(self) -> None:
        self._w *= math.exp(math.log(self.rng.random() or 1e-300) / self.capacity)
        skip = math.floor(math.log(self.rng.random() or 1e-300) / math.log1p(-self._w)) if self._w < 1 else 0
        self._next = self.seen + skip

    def offer(self, items: list) -> None:
        for item in items:
            if len(self.items) < self.capacity:
                self.items.append(item)
                self.seen += 1
                if len(self.items) == self.capacity:
                    self._draw_skip()
                continue
            if self.seen == self._next:
                self.items[self.rng.randrange(self.capacity)] = item
                self.seen += 1
                self._draw_skip()
            else:
                self.seen += 1
