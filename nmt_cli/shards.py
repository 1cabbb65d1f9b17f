"""One shard of an input file for `nmt translate --shard I/N`: the lines of the I-th of N equal,
contiguous parts, so that the shards' outputs concatenated in shard order are the whole file's
translation in input order (``cat out.0 out.1 ... > out``). ``--shard rank`` takes I and N
from torchrun's RANK and WORLD_SIZE, so one command line serves every process of a job."""

from __future__ import annotations

import os

from nmt_cli.errors import UserError


def parse_shard(text: str) -> tuple[int, int]:
    """``I/N`` (0 <= I < N), or ``rank`` for torchrun's RANK/WORLD_SIZE."""
    if text == "rank":
        rank, world = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
        if rank is None or world is None:
            raise UserError("--shard rank: RANK and WORLD_SIZE are not set (run under torchrun)")
        text = f"{rank}/{world}"
    index, _, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        raise UserError(f"--shard {text}: expected I/N, e.g. 0/4, or rank") from None
    if n < 1 or not 0 <= i < n:
        raise UserError(f"--shard {text}: I must be from 0 to N-1")
    return i, n


def shard_range(lines: int, index: int, count: int) -> tuple[int, int]:
    """The first line and the line past the last of shard ``index`` of ``count``."""
    return index * lines // count, (index + 1) * lines // count


class ShardReader:
    """A binary stream's lines ``start`` to ``end`` (0-based, end excluded), read with
    ``readline`` as `nmt translate` reads its input."""

    def __init__(self, stream, start: int, end: int):
        self.stream, self.end, self.at = stream, end, 0
        while self.at < start and self.stream.readline():
            self.at += 1

    def readline(self) -> bytes:
        if self.at >= self.end:
            return b""
        self.at += 1
        return self.stream.readline()

    def close(self) -> None:
        self.stream.close()
