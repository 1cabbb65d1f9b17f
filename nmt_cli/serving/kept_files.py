"""Translated files kept for their download (``POST /translate_file``, ``GET /download_file``).

Each file is kept under a random id, with its name cleaned of control characters, for
:data:`KEPT_S` seconds at most. Each client (its api key, else its address) keeps at most
:data:`PER_CLIENT` files, its own oldest going first, so that one client's uploads never evict
another's; all clients together keep at most :data:`KEPT_FILES` files and :data:`KEPT_BYTES`
bytes, past which the oldest file of the client holding most goes first. The download URL
carries the id and the name percent-encoded (``/download_file/{id}.{name}``); a download is
found by its id alone.
"""

from __future__ import annotations

import time
import unicodedata
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from urllib.parse import quote

KEPT_S = 30 * 60
PER_CLIENT = 16
KEPT_BYTES = 256 * 1024 * 1024
KEPT_FILES = 4096


@dataclass
class KeptFile:
    name: str
    content: bytes
    client: str
    expires: float


def clean_name(name: str) -> str:
    """A file name as given, but its directories and its control and format characters
    (NUL, line ends, bidirectional overrides)."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    return "".join(c for c in base if unicodedata.category(c) not in ("Cc", "Cf", "Cs"))


def url_path(file_id: str, name: str) -> str:
    """The path segment of a kept file's download URL: its id and its name percent-encoded."""
    return f"{file_id}.{quote(name, safe='')}"


class KeptFiles:
    """The kept files, oldest first, and each client's, oldest first."""

    def __init__(
        self,
        seconds: float = KEPT_S,
        per_client: int = PER_CLIENT,
        most_bytes: int = KEPT_BYTES,
        most_files: int = KEPT_FILES,
    ):
        self.seconds, self.per_client = seconds, per_client
        self.most_bytes, self.most_files = most_bytes, most_files
        self.files: OrderedDict[str, KeptFile] = OrderedDict()
        self.of_client: dict[str, OrderedDict[str, int]] = {}  # client -> id -> bytes
        self.size = 0

    def keep(self, client: str, name: str, content: bytes, now: float | None = None) -> str:
        """Keep ``content`` for ``client``; its id."""
        now = time.monotonic() if now is None else now
        self.expire(now)
        file_id = uuid.uuid4().hex
        self.files[file_id] = KeptFile(name, content, client, now + self.seconds)
        own = self.of_client.setdefault(client, OrderedDict())
        own[file_id] = len(content)
        self.size += len(content)
        while len(own) > self.per_client:
            self.drop(next(iter(own)))
        while len(self.files) > 1 and (
            self.size > self.most_bytes or len(self.files) > self.most_files
        ):
            by_bytes = self.size > self.most_bytes
            largest = max(
                self.of_client.values(), key=lambda f: sum(f.values()) if by_bytes else len(f)
            )
            self.drop(next(iter(largest)))
        return file_id

    def get(self, path: str, now: float | None = None) -> KeptFile | None:
        """The file a download path names (its id, then anything), None if gone or never kept."""
        self.expire(time.monotonic() if now is None else now)
        return self.files.get(path.split(".", 1)[0])

    def expire(self, now: float) -> None:
        """Drop the files kept past their time (the oldest are first)."""
        while self.files:
            first = next(iter(self.files))
            if self.files[first].expires > now:
                break
            self.drop(first)

    def drop(self, file_id: str) -> None:
        kept = self.files.pop(file_id)
        self.size -= len(kept.content)
        own = self.of_client[kept.client]
        del own[file_id]
        if not own:
            del self.of_client[kept.client]
