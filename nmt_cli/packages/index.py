"""Package indexes and installing from them: ``nmt models index DIR`` writes ``DIR/index.json``
for the packages in a folder; ``nmt models install`` takes a package's path or URL, or a model's
name in an index (``--index URL``).

An index is JSON: ``{"format": 1, "models": [entry, ...]}``, each entry the package's name,
version, languages, directions, size, sha256, the licences of its training corpora, and its URL,
relative to the index's own. Sources are paths, ``file://`` or ``http(s)://`` URLs; whatever
arrives is bounded (an index at most :data:`MAX_INDEX_BYTES`, a package at most the size its index
gives, and never more than a package may be), checked against the index's sha256 and size, and
verified whole before it is installed.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from nmt_cli.packages.archive import MAX_PACKAGE_BYTES, MIB, SUFFIX, file_sha256, read_package
from nmt_cli.packages.card import NAME, VERSION, version_key
from nmt_cli.packages.store import InstalledModel, install_file, models_dir
from nmt_cli.runtime.errors import UserError
from nmt_cli.runtime.output_file import temporary_name, write_text_atomic

INDEX_FORMAT = 1
INDEX_FILE = "index.json"
MAX_INDEX_BYTES = 16 * MIB
TIMEOUT_S = 60.0


def index_entry(path: Path) -> dict:
    """The index entry of the package ``path`` (verified whole)."""
    card = read_package(path).card
    return {
        "name": card["name"],
        "version": card["version"],
        "languages": card.get("languages", []),
        "directions": card.get("directions", []),
        "size": path.stat().st_size,
        "sha256": file_sha256(path),
        "licences": sorted({c.get("licence", "not stated") for c in card.get("corpora", [])}),
        "url": urllib.parse.quote(path.name),
    }


def write_index(folder: Path) -> tuple[Path, list[dict]]:
    """Write ``folder/index.json`` for the packages in ``folder``; its path and entries."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"{folder}: no such folder")
    entries = [index_entry(p) for p in sorted(folder.glob(f"*{SUFFIX}"))]
    if not entries:
        raise UserError(f"{folder}: no packages ({SUFFIX} files) to index")
    path = folder / INDEX_FILE
    text = json.dumps({"format": INDEX_FORMAT, "models": entries}, indent=1, ensure_ascii=False)
    write_text_atomic(path, text + "\n")
    return path, entries


def _is_url(source: str) -> bool:
    return urllib.parse.urlsplit(source).scheme in ("file", "http", "https")


def _open(source: str):
    if not _is_url(source):
        raise UserError(f"{source[:120]}: not a file, nor a file://, http:// or https:// URL")
    try:
        return urllib.request.urlopen(source, timeout=TIMEOUT_S)
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise UserError(f"{source[:120]}: cannot fetch ({str(reason)[:120]})") from None


def _read_bounded(response, limit: int, source: str, sink) -> int:
    total = 0
    try:
        while block := response.read(MIB):
            total += len(block)
            if total > limit:
                raise UserError(f"{source[:120]}: refused: larger than {limit} bytes")
            sink(block)
    except (http.client.HTTPException, OSError) as exc:
        raise UserError(f"{source[:120]}: download failed ({str(exc)[:120]})") from None
    return total


def read_index(url: str) -> list[dict]:
    """The entries of the index at ``url`` (a path or URL)."""
    source = Path(url).resolve().as_uri() if not _is_url(url) else url
    chunks: list[bytes] = []
    with _open(source) as response:
        _read_bounded(response, MAX_INDEX_BYTES, url, chunks.append)
    try:
        index = json.loads(b"".join(chunks).decode("utf-8"))
        entries = index["models"]
        if index.get("format") != INDEX_FORMAT or not isinstance(entries, list):
            raise ValueError
    except (ValueError, UnicodeDecodeError, KeyError, TypeError, AttributeError):
        raise UserError(f"{url[:120]}: not an nmt model index") from None
    keys = {"name": str, "version": str, "size": int, "sha256": str, "url": str}
    good = [
        e
        for e in entries
        if isinstance(e, dict)
        and all(isinstance(e.get(k), t) for k, t in keys.items())
        and VERSION.fullmatch(e["version"])
    ]
    return [{**e, "url": urllib.parse.urljoin(source, e["url"])} for e in good]


def _download(source: str, size: int | None, sha256: str | None) -> Path:
    """``source`` fetched into a hidden file of the models folder, its size and sha256 checked
    where given."""
    folder = models_dir()
    folder.mkdir(parents=True, exist_ok=True)
    tmp = temporary_name(folder / "download.nmt")
    limit = min(size, MAX_PACKAGE_BYTES) if size is not None else MAX_PACKAGE_BYTES
    try:
        with _open(source) as response, open(tmp, "wb") as fh:
            got = _read_bounded(response, limit, source, fh.write)
        if size is not None and got != size:
            raise UserError(f"{source[:120]}: refused: {got} bytes, the index says {size}")
        if sha256 is not None and file_sha256(tmp) != sha256:
            raise UserError(f"{source[:120]}: refused: its sha256 is not the index's")
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def install(source: str, index: str | None = None) -> tuple[InstalledModel, str | None]:
    """Install ``source``: with ``index``, the newest version of the model of that name in the
    index; else a package path or URL. The installed model and the version it replaced."""
    if index is not None:
        matches = [e for e in read_index(index) if e["name"] == source]
        if not NAME.fullmatch(source) or not matches:
            raise UserError(f"{index[:120]}: no model {source[:80]!r} in the index")
        entry = max(matches, key=lambda e: version_key(e["version"]))
        downloaded = _download(entry["url"], entry["size"], entry["sha256"])
    elif Path(source).is_file():
        return install_file(Path(source))
    else:
        downloaded = _download(source, None, None)
    shown = (entry["url"] if index is not None else source)[:120]  # not the download's file
    try:
        return install_file(downloaded, keep_source=False, shown=shown)
    finally:
        downloaded.unlink(missing_ok=True)
