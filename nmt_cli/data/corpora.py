"""Corpus registry, fetching and reading: pinned sha256, a local mirror, atomic writes.

A file is looked up as ``<cache>/<corpus>/<file>``. A cached file is used when its hash matches;
otherwise it is copied from ``NMT_DATA_MIRROR/<corpus>/<file>`` when that variable is set, or
downloaded from the registry URL. Either way it lands in a temporary file beside the target, is
hashed, and is renamed into place only when the hash matches, so nothing half-written can later
pass for good.

A corpus may also register reference files for comparable scoring (Multi30k's official
lowercased, Moses-tokenized references). Their pinned hash is of the text itself: upstream serves
them uncompressed, while a mirror may hold them gzipped as ``<mirror>/<corpus>/tok/<file>.gz``.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import http.client
import io
import lzma
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nmt_cli.runtime.errors import DataError, failure_reason
from nmt_cli.runtime.output_file import AtomicFile

MULTI30K_URL = "https://github.com/multi30k/dataset/raw/master/data/task1/raw/{file}"
MULTI30K_TOK_URL = "https://github.com/multi30k/dataset/raw/master/data/task1/tok/{file}"


@dataclass(frozen=True)
class Corpus:
    name: str
    url: str
    sha256: dict[str, str]
    languages: tuple[str, ...]
    # Official tokenized references: file name -> sha256 of its (uncompressed) text.
    tok_references: dict[str, str] = field(default_factory=dict)
    tok_url: str = ""
    source: str = ""  # where the corpus comes from, for a model card
    licence: str = "not stated"

    def filename(self, split: str, lang: str) -> str:
        return f"{split}.{lang}.gz"

    def tok_reference_name(self, split: str, lang: str) -> str:
        return f"{split}.lc.norm.tok.{lang}"

    @property
    def splits(self) -> list[str]:
        return sorted({f.rsplit(".", 2)[0] for f in self.sha256})


def _sums(text: str) -> dict[str, str]:
    """File name -> sha256 from lines as ``sha256sum`` prints them."""
    return {name: digest for digest, name in (line.split() for line in text.strip().splitlines())}


_MULTI30K_SHA256 = """
d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f  train.en.gz
726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6  train.de.gz
622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c  train.fr.gz
14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28  val.en.gz
f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a  val.de.gz
ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9  val.fr.gz
611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9  test_2016_flickr.en.gz
9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8  test_2016_flickr.de.gz
6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90  test_2016_flickr.fr.gz
76a444ee25172e72695cddb13ae4a3bda59430617be88e0bb46b60504f054074  test_2017_flickr.en.gz
a2c89666db00c495cd8513b9d708d5a3acc205d7de312ef2bf5fb7ebc1540aee  test_2017_flickr.de.gz
3ba671ceb2299f3304ffafefea7a833d08632fbaf0ba18546f8a2ec2391af496  test_2017_flickr.fr.gz
aab300bfb4427697987e02cd0aacd44bfe8aa50456231b6474c08038bbed2b58  test_2017_mscoco.en.gz
799e4854c25d601cb6cb6be29eabe5667734c61ace2f495e03e429031a0bc338  test_2017_mscoco.de.gz
754f3072ba9f124569ba5258b32730fc1d214bbf8e0c6dfb2b74401676220db0  test_2017_mscoco.fr.gz
"""
_MULTI30K_TOK_REFERENCES = """
46573ce391ae227f1c72f873392436a20ef18e0a6d518098cfbd70b77c8572ec  val.lc.norm.tok.en
97232bd273eceb7207f689527386a97e4be2616b18ada47576bdaf96c8ae1f00  val.lc.norm.tok.de
b303e301aa21fe7822a846b2b3fb2d5a1121ec807cd5b1d006fb7b2b5507168a  val.lc.norm.tok.fr
5b7f32627cf99eced828311b955dae9800bb52bc8b91cf8b6526829e605b29d2  test_2016_flickr.lc.norm.tok.en
c6a33d39d48f9f510de147651316cd9d918e09ad0219df734a2f16b6baccacc4  test_2016_flickr.lc.norm.tok.de
1463bd5960f9bfe098ec3cd752d3df0c49c84dc646fb518964a29232658cd836  test_2016_flickr.lc.norm.tok.fr
c9d1dfd7a26add989382e534af235af9f0f658b2a30e7eb0efdaf142496ee54f  test_2017_flickr.lc.norm.tok.en
02067e4a9402786a4fcb8c1b6f4307e4a5073ced64800abead5273b54f5f31f6  test_2017_flickr.lc.norm.tok.de
c0583117a47b31e8a6c6a97cfe8de153e462074668f4e994764fcc80b21d33b4  test_2017_flickr.lc.norm.tok.fr
fe69ae004d71c42ead0301e70c57de5b1b6b5fb7f52210d42b22801e98e656f3  test_2017_mscoco.lc.norm.tok.en
e2825990b8a4e5289d2cdba801d57c187810bab9b4f5d87a30c35800a0d871b6  test_2017_mscoco.lc.norm.tok.de
0b6a4620f02b6b9acf7811fda23f90fed9c6baa0b96aa224db50a273078c84d1  test_2017_mscoco.lc.norm.tok.fr
"""


REGISTRY: dict[str, Corpus] = {
    "multi30k": Corpus(
        name="multi30k",
        url=MULTI30K_URL,
        languages=("en", "de", "fr"),
        sha256=_sums(_MULTI30K_SHA256),
        tok_url=MULTI30K_TOK_URL,
        tok_references=_sums(_MULTI30K_TOK_REFERENCES),
        source="https://github.com/multi30k/dataset (Elliott et al. 2016, from Flickr30K)",
        licence="not stated upstream; Flickr30K's descriptions are for research use",
    ),
}


def cache_dir() -> Path:
    env = os.environ.get("NMT_DATA_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "nmt" / "data"


def get_corpus(name: str) -> Corpus:
    try:
        return REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(REGISTRY))
        raise DataError(
            f"data.corpus: unknown corpus '{name}' (known: {known}; "
            "or set data.corpus: null and give file paths)"
        ) from None


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _copy_stream(src, dst_dir: Path, name: str, expected: str, what: str) -> Path:
    """Write ``src`` (a binary file object) to ``dst_dir/name`` only if its sha256 matches."""
    dst_dir.mkdir(parents=True, exist_ok=True)
    out = AtomicFile(dst_dir / name)
    digest = hashlib.sha256()
    try:
        for chunk in iter(lambda: src.read(1 << 20), b""):
            digest.update(chunk)
            out.file.write(chunk)
        actual = digest.hexdigest()
        if actual != expected:
            raise DataError(
                f"{what}: sha256 mismatch (expected {expected[:12]}…, got {actual[:12]}…); "
                "the file was not kept"
            )
    except BaseException:
        out.abort()
        raise
    return out.commit()


def _obtain(
    target: Path, expected: str, mirror_sources: list[tuple[Path, object]], url: str, timeout: float
) -> Path:
    """``target`` if its hash is ``expected``; else the first existing (path, opener) of the mirror
    when NMT_DATA_MIRROR is set, else ``url``. What arrives is kept only if its hash matches."""
    if target.is_file() and sha256_of(target) == expected:
        return target
    if os.environ.get("NMT_DATA_MIRROR"):
        for source, opener in mirror_sources:
            if source.is_file():
                try:
                    with opener(source, "rb") as fh:
                        return _copy_stream(fh, target.parent, target.name, expected, str(source))
                except (OSError, EOFError) as exc:
                    raise DataError(f"{source}: cannot read ({failure_reason(exc)})") from None
        raise DataError(f"{mirror_sources[0][0]}: not found in NMT_DATA_MIRROR")
    return download(url, target.parent, target.name, expected, timeout=timeout)


def _mirror() -> Path:
    return Path(os.environ.get("NMT_DATA_MIRROR", "")).expanduser()


def fetch(corpus_name: str, filename: str, *, timeout: float = 60.0) -> Path:
    """Return a local, hash-verified path for ``filename`` of a registered corpus."""
    corpus = get_corpus(corpus_name)
    expected = corpus.sha256.get(filename)
    if expected is None:
        raise DataError(
            f"{corpus_name}: no file '{filename}' in the registry "
            f"(splits: {', '.join(corpus.splits)}; languages: {', '.join(corpus.languages)})"
        )
    return _obtain(
        cache_dir() / corpus_name / filename,
        expected,
        [(_mirror() / corpus_name / filename, open)],
        corpus.url.format(file=filename),
        timeout,
    )


def fetch_tok_reference(corpus_name: str, split: str, lang: str, *, timeout: float = 60.0) -> Path:
    """Return a local, hash-verified, uncompressed copy of a split's official tokenized
    reference."""
    corpus = get_corpus(corpus_name)
    filename = corpus.tok_reference_name(split, lang)
    expected = corpus.tok_references.get(filename)
    if expected is None:
        raise DataError(f"{corpus_name}: no tokenized reference '{filename}' in the registry")
    in_mirror = _mirror() / corpus_name / "tok" / filename
    return _obtain(
        cache_dir() / corpus_name / "tok" / filename,
        expected,
        [(in_mirror.with_name(filename + ".gz"), gzip.open), (in_mirror, open)],
        corpus.tok_url.format(file=filename),
        timeout,
    )


def download(url: str, dst_dir: Path, name: str, expected: str, *, timeout: float = 60.0) -> Path:
    """Download ``url`` into ``dst_dir/name``, keeping it only if its sha256 is ``expected``."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return _copy_stream(response, dst_dir, name, expected, url)
    except DataError:
        raise
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise DataError(
            f"{url}: download failed ({reason}); set NMT_DATA_MIRROR to a local copy "
            "to work offline"
        ) from None


try:  # ISA-L's gzip reader where installed (the fast-gzip extra; docs/results.md), else zlib's
    from isal import igzip as gzip_reader
except ImportError:
    gzip_reader = gzip

COMPRESSED_OPENERS = {".gz": gzip_reader.open, ".bz2": bz2.open, ".xz": lzma.open}


def _open_binary(path: Path):
    opener = COMPRESSED_OPENERS.get(Path(path).suffix, open)
    return opener(path, "rb")


def iter_lines(path: Path) -> Iterator[str]:
    """The lines of a plain, .gz, .bz2 or .xz text file one at a time, invalid UTF-8 replaced and
    line ends stripped; only ``\n`` ends a line, as in :func:`read_lines`."""
    try:
        with (
            _open_binary(path) as raw,
            io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="\n") as text,
        ):
            for line in text:
                yield line.rstrip("\n").rstrip("\r")
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except (OSError, EOFError, lzma.LZMAError) as exc:
        raise DataError(f"{path}: cannot read ({failure_reason(exc)})") from None


class LineBlocks:
    """Whole lines of a plain, .gz, .bz2 or .xz file taken ``n`` at a time as raw bytes, for
    readers that decode and split a block at once (one C-level pass instead of a Python step per
    line). The lines are those :func:`iter_lines` yields: only ``\n`` ends a line, and a last line
    without one counts.

    Each byte read is scanned for line ends once, when it is read: a block's line count and where
    its lines start come from that scan, never from searching the buffer again."""

    READ_BYTES = 1 << 20

    def __init__(self, path: Path):
        self.path = Path(path)
        try:
            self.raw = _open_binary(self.path)
        except FileNotFoundError:
            raise DataError(f"{path}: file not found") from None
        except (OSError, EOFError, lzma.LZMAError) as exc:
            raise DataError(f"{path}: cannot read ({failure_reason(exc)})") from None
        self.buffer = bytearray()
        self.ends = np.zeros(0, dtype=np.int64)  # where each line of the buffer ends, past its \n
        self.eof = False

    def _read(self, scan: bool = True) -> None:
        try:
            block = self.raw.read(self.READ_BYTES)
        except (OSError, EOFError, lzma.LZMAError) as exc:
            raise DataError(f"{self.path}: cannot read ({failure_reason(exc)})") from None
        if not block:
            self.eof = True
        if scan:
            found = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10)
            found += len(self.buffer) + 1
            self.ends = np.concatenate([self.ends, found]) if len(self.ends) else found
        self.buffer += block

    def take_lines(self, n: int) -> tuple[bytes, np.ndarray]:
        """The next ``n`` lines (fewer only at the end of the file), line ends included, and
        where each starts, plus one more entry: line i is ``block[starts[i]:starts[i + 1] - 1]``
        (without its ``\n``; a last line without one included)."""
        if n <= 0:
            return b"", np.zeros(1, dtype=np.int64)
        while len(self.ends) < n and not self.eof:
            self._read()
        if len(self.ends) >= n:
            ends, end = self.ends[:n], int(self.ends[n - 1])
            self.ends = self.ends[n:] - end
        else:  # the end of the file: every line left, an unterminated last one too
            ends, end = self.ends, len(self.buffer)
            if self.buffer and not self.buffer.endswith(b"\n"):
                ends = np.append(ends, end + 1)
            self.ends = self.ends[:0]
        with memoryview(self.buffer) as view:
            block = bytes(view[:end])
        del self.buffer[:end]
        return block, np.concatenate([[0], ends]).astype(np.int64, copy=False)

    def take(self, n: int) -> tuple[bytes, int]:
        """The next ``n`` lines (fewer only at the end of the file), line ends included, and how
        many they are."""
        block, starts = self.take_lines(n)
        return block, len(starts) - 1

    def count_rest(self) -> int:
        """How many lines are left (reading through them without keeping them)."""
        total = len(self.ends)
        self.buffer = self.buffer[self.buffer.rfind(b"\n") + 1 :]
        self.ends = self.ends[:0]
        while not self.eof:
            self._read(scan=False)
            total += self.buffer.count(b"\n")
            self.buffer = self.buffer[self.buffer.rfind(b"\n") + 1 :]
        return total + (1 if self.buffer else 0)

    def close(self) -> None:
        self.raw.close()

    def __enter__(self) -> LineBlocks:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_lines(path: Path) -> list[str]:
    """All lines of a plain, .gz, .bz2 or .xz text file, invalid UTF-8 replaced, line ends and
    a byte order mark stripped."""
    try:
        with _open_binary(path) as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except (OSError, EOFError, lzma.LZMAError) as exc:
        raise DataError(f"{path}: cannot read ({failure_reason(exc)})") from None
    text = raw.decode("utf-8", errors="replace").removeprefix("\ufeff")  # a BOM is no text
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.rstrip("\r") for line in lines]
