"""One shard of an input file for `nmt translate --shard I/N`: the lines of the I-th of N equal,
contiguous parts, so that the shards' outputs concatenated in shard order are the whole file's
translation in input order (``cat out.0 out.1 ... > out``). ``--shard rank`` takes I and N
from torchrun's RANK and WORLD_SIZE, so one command line serves every process of a job; ``-o``
then names each process's own file with ``{shard}`` (``-o bt.en.{shard}``)."""

from __future__ import annotations

import os
from pathlib import Path

from nmt_cli.runtime.errors import UserError

SHARD_FIELD = "{shard}"


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


def shard_output(output: Path | None, index: int, count: int, from_rank: bool) -> Path | None:
    """The file shard ``index`` writes: ``output`` with ``{shard}`` replaced by the index. Under
    ``--shard rank`` every process gets the same command line, so an ``-o`` without the field
    would have them all write one file: that is refused."""
    if output is None:
        return None
    if SHARD_FIELD in str(output):
        return Path(str(output).replace(SHARD_FIELD, str(index)))
    if from_rank and count > 1:
        raise UserError(
            f"-o {output}: under --shard rank every process would write this one file; put "
            f"{SHARD_FIELD} in the name (-o {output}.{SHARD_FIELD}) for one file per shard"
        )
    return output
