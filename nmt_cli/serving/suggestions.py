"""The suggestions `nmt serve --suggestions DB` takes at ``POST /suggest``: corrections of its
translations, kept in an SQLite file (the standard library's sqlite3) and served back at once as
a translation memory (nmt_cli/documents/recall.py).

The file is in write-ahead-log mode and every suggestion is committed with a full sync before
the request is answered, so a suggestion that got its 200 survives a kill of the server at any
moment, and other processes (`nmt suggestions list`, a second server) may read it while the
server writes. Lookups read the file through an index on (source, target, sentence), so the
server's memory does not grow with the suggestions it holds; where a sentence was corrected
several times, the newest suggestion wins.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from nmt_cli.documents.recall import memory_key
from nmt_cli.runtime.errors import UserError

SCHEMA = """
CREATE TABLE IF NOT EXISTS suggestions (
    id INTEGER PRIMARY KEY,
    source TEXT NOT NULL,
    target TEXT NOT NULL,
    q TEXT NOT NULL,
    s TEXT NOT NULL,
    sentence TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS suggestions_by_sentence ON suggestions (source, target, sentence);
"""
BUSY_TIMEOUT_S = 10.0  # how long a write waits for another process's


@dataclass(frozen=True)
class Suggestion:
    """One correction: ``q`` the source text, ``s`` its suggested translation."""

    id: int
    source: str
    target: str
    q: str
    s: str
    created: float


class SuggestionStore:
    """The suggestions file at ``path``, created where it does not exist. ``readonly``: open an
    existing file for reading only (`nmt suggestions list` and ``export``)."""

    def __init__(self, path: str | Path, readonly: bool = False):
        self.path = Path(path)
        # Two connections, each used by one thread at a time under its lock: lookups on the
        # event loop never wait for a write's sync (write-ahead log: readers see the last commit).
        self._read_lock, self._write_lock = threading.Lock(), threading.Lock()
        self._writer: sqlite3.Connection | None = None
        try:
            if readonly:
                if not self.path.is_file():
                    raise UserError(f"{self.path}: no such suggestions file")
                self._reader = self._connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True)
            else:
                self._writer = self._connect(str(self.path))
                self._writer.execute("PRAGMA journal_mode=WAL")
                self._writer.executescript(SCHEMA)
                self._writer.execute("BEGIN IMMEDIATE")  # proves the file writable now
                self._writer.execute("COMMIT")
                self._reader = self._connect(str(self.path))
            self._reader.execute("SELECT count(*) FROM suggestions").fetchone()
        except sqlite3.Error as exc:
            raise UserError(f"{self.path}: cannot use it as a suggestions file ({exc})") from None

    @staticmethod
    def _connect(target: str, uri: bool = False) -> sqlite3.Connection:
        db = sqlite3.connect(
            target, timeout=BUSY_TIMEOUT_S, uri=uri, check_same_thread=False, isolation_level=None
        )
        db.execute("PRAGMA synchronous=FULL")
        return db

    def add(self, source: str, target: str, q: str, s: str) -> int:
        """Store a suggestion, durably once this returns; its id."""
        if self._writer is None:
            raise UserError(f"{self.path}: opened for reading only")
        with self._write_lock:
            cursor = self._writer.execute(
                "INSERT INTO suggestions (source, target, q, s, sentence, created) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (source, target, q, s, memory_key(q), time.time()),
            )
            return int(cursor.lastrowid)

    def recall(self, source: str, target: str, key: str) -> str | None:
        """The newest suggestion for the sentence whose memory key is ``key``
        (:class:`nmt_cli.documents.recall.SentenceMemory`)."""
        with self._read_lock:
            row = self._reader.execute(
                "SELECT s FROM suggestions WHERE source = ? AND target = ? AND sentence = ? "
                "ORDER BY id DESC LIMIT 1",
                (source, target, key),
            ).fetchone()
        return None if row is None else row[0]

    def __len__(self) -> int:
        with self._read_lock:
            return int(self._reader.execute("SELECT count(*) FROM suggestions").fetchone()[0])

    def suggestions(self, source: str | None = None, target: str | None = None) -> Iterator:
        """Every suggestion, oldest first, read as it is consumed (one thread: the command
        line's); ``source``, ``target``: of that pair only."""
        query = "SELECT id, source, target, q, s, created FROM suggestions"
        where, args = [], []
        for column, value in (("source", source), ("target", target)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        if where:
            query += " WHERE " + " AND ".join(where)
        return (Suggestion(*row) for row in self._reader.execute(query + " ORDER BY id", args))

    def close(self) -> None:
        with self._read_lock, self._write_lock:
            self._reader.close()
            if self._writer is not None:
                self._writer.close()
