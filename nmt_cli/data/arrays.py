""".npy files written in chunks, for encoded splits of any size.

An array is appended to a temporary file (nmt_cli/runtime/output_file.py) behind a fixed-size
placeholder
header; closing writes the real header (the shape is known only then), fsyncs and renames the
file into place. So a writer holds one chunk at a time, and a file with the final name is always
complete.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nmt_cli.runtime.output_file import AtomicFile

HEADER_BYTES = 128  # magic (6) + version (2) + length (2) + the dict padded with spaces and '\n'


def id_dtype(vocab_size: int) -> np.dtype:
    """uint16 ids while the vocabulary fits (half the disk and page cache of int32)."""
    return np.dtype(np.uint16) if vocab_size <= np.iinfo(np.uint16).max + 1 else np.dtype(np.int32)


def _header(dtype: np.dtype, length: int) -> bytes:
    descr = np.lib.format.dtype_to_descr(dtype)
    fields = f"{{'descr': {descr!r}, 'fortran_order': False, 'shape': ({length},), }}"
    body = fields.ljust(HEADER_BYTES - 10 - 1) + "\n"
    header = b"\x93NUMPY\x01\x00" + (len(body)).to_bytes(2, "little") + body.encode("latin1")
    assert len(header) == HEADER_BYTES, "a shape too long for the fixed header"
    return header


class ArrayWriter:
    """A 1-D array of ``dtype`` appended chunk by chunk into ``path`` (see module doc)."""

    def __init__(self, path: Path, dtype):
        self.path, self.dtype = Path(path), np.dtype(dtype)
        self.out = AtomicFile(self.path)
        self.fh = self.out.file
        self.fh.write(_header(self.dtype, 0))
        self.length = 0

    def append(self, values: np.ndarray) -> None:
        values = np.ascontiguousarray(values, dtype=self.dtype)
        self.fh.write(values.tobytes())
        self.length += len(values)

    def close(self) -> None:
        self.fh.seek(0)
        self.fh.write(_header(self.dtype, self.length))
        self.out.commit()

    def abort(self) -> None:
        self.out.abort()


class SideWriter:
    """One side of a split: all token ids concatenated, and where each sentence starts."""

    def __init__(self, data_dir: Path, split: str, side: str, dtype):
        self.ids = ArrayWriter(data_dir / f"{split}.{side}.ids.npy", dtype)
        self.offsets = ArrayWriter(data_dir / f"{split}.{side}.offsets.npy", np.int64)
        self.offsets.append(np.zeros(1, dtype=np.int64))
        self.tokens = 0
        self.limit = np.iinfo(self.ids.dtype).max

    def append(self, ids: np.ndarray, lengths: np.ndarray) -> None:
        if len(ids) and int(ids.max()) > self.limit:
            raise ValueError(f"id {int(ids.max())} does not fit {self.ids.dtype}")
        self.ids.append(ids)
        self.offsets.append(self.tokens + np.cumsum(lengths, dtype=np.int64))
        self.tokens += int(lengths.sum())

    @property
    def sentences(self) -> int:
        return self.offsets.length - 1

    def close(self) -> dict:
        self.ids.close()
        self.offsets.close()
        return {"sentences": self.sentences, "tokens": self.tokens}

    def abort(self) -> None:
        self.ids.abort()
        self.offsets.abort()
