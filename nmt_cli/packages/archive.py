"""The model package file (``NAME.nmt``): a zip archive of a few named members, read without
trusting it.

A package holds ``card.json`` (the machine-readable card, nmt_cli/packages/card.py), ``CARD.md``
(the same card for people), ``recipe.yaml``, ``model.safetensors`` (the weights,
nmt_cli/packages/weights.py) and the SentencePiece model(s), ``spm.model`` and, for a model with
separate vocabularies, ``spm.tgt.model``. The card lists every other member with its size and
sha256.

Reading refuses, in one line, anything that is not such a package: a file larger than
:data:`MAX_PACKAGE_BYTES`, a member whose name is not one of :data:`MEMBER_LIMITS` or whose size
passes its limit there, a member the card does not list or lists with another size or sha256, a
truncated or altered archive (zip's own CRC-32 included). Members are only ever read as bytes,
parsed as JSON, YAML (``safe_load``), safetensors or SentencePiece models: nothing in a package is
unpickled or run.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from nmt_cli.runtime.errors import CheckpointError
from nmt_cli.runtime.output_file import atomic_write

SUFFIX = ".nmt"
CARD = "card.json"
READABLE_CARD = "CARD.md"
RECIPE = "recipe.yaml"
WEIGHTS = "model.safetensors"
SOURCE_SPM = "spm.model"
TARGET_SPM = "spm.tgt.model"
MIB = 1024 * 1024
MAX_PACKAGE_BYTES = 8 * 1024 * MIB
# The only member names a package may hold, each with the most bytes it may hold.
MEMBER_LIMITS = {
    CARD: 4 * MIB,
    READABLE_CARD: 4 * MIB,
    RECIPE: 4 * MIB,
    WEIGHTS: MAX_PACKAGE_BYTES,
    SOURCE_SPM: 256 * MIB,
    TARGET_SPM: 256 * MIB,
}
REQUIRED = (CARD, RECIPE, WEIGHTS, SOURCE_SPM)


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(MIB), b""):
            digest.update(block)
    return digest.hexdigest()


def is_package(path: str | os.PathLike) -> bool:
    """Whether ``path`` names a package (by its suffix; its content is checked on reading)."""
    return Path(path).suffix == SUFFIX


def member_entries(members: Mapping[str, bytes]) -> dict[str, dict]:
    """The card's ``members``: each member's size and sha256."""
    return {name: {"size": len(data), "sha256": sha256_of(data)} for name, data in members.items()}


def write_package(path: Path, card: bytes, members: Mapping[str, bytes]) -> None:
    """Write ``card.json`` and ``members`` into the package ``path``, atomically. The weights
    are stored as they are (they do not compress), the text members deflated."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as fh, zipfile.ZipFile(fh, "w") as archive:
        archive.writestr(CARD, card, compress_type=zipfile.ZIP_DEFLATED)
        for name, data in members.items():
            kind = zipfile.ZIP_STORED if name == WEIGHTS else zipfile.ZIP_DEFLATED
            archive.writestr(name, data, compress_type=kind)


@dataclass
class PackageFiles:
    """A package's members as verified bytes, and its card."""

    path: Path
    card: dict
    members: dict[str, bytes]


def _refuse(label: str, why: str) -> CheckpointError:
    return CheckpointError(f"{label}: refused: {why}")


def _read_member(label: str, archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    limit = MEMBER_LIMITS[info.filename]
    if info.file_size > limit:
        raise _refuse(label, f"{info.filename} is {info.file_size} bytes, more than {limit}")
    try:
        with archive.open(info) as fh:
            data = fh.read(limit + 1)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as exc:
        raise _refuse(label, f"{info.filename} cannot be read ({str(exc)[:80]})") from None
    if len(data) != info.file_size:
        raise _refuse(label, f"{info.filename} is not the size the archive says")
    return data


def _card(label: str, data: bytes) -> dict:
    try:
        card = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise _refuse(label, f"{CARD} is not JSON") from None
    members = card.get("members") if isinstance(card, dict) else None
    if not isinstance(members, dict) or not all(
        isinstance(v, dict) and isinstance(v.get("sha256"), str) and isinstance(v.get("size"), int)
        for v in members.values()
    ):
        raise _refuse(label, f"{CARD} lists no members with their size and sha256")
    for key, right, what in _CARD_FIELDS:
        if key in card and not right(card[key]):
            raise _refuse(label, f"{CARD}'s {key} is not {what}")
    return card


def _strings(value) -> bool:
    return isinstance(value, list) and all(isinstance(x, str) for x in value)


# the card's fields that listings, the service and loading read, and what each must be
_CARD_FIELDS = (
    ("name", lambda v: isinstance(v, str), "a string"),
    ("version", lambda v: isinstance(v, str), "a string"),
    ("languages", _strings, "a list of strings"),
    ("directions", _strings, "a list of strings"),
    ("multilingual", lambda v: isinstance(v, bool), "true or false"),
    ("training", lambda v: isinstance(v, dict), "an object"),
)


def read_package(
    path: str | os.PathLike, names: tuple[str, ...] | None = None, *, shown: str | None = None
) -> PackageFiles:
    """The verified card and members of the package ``path``; ``names``: only these members
    (and the card) are read and checked, the others' listing still is; ``shown``: what its
    refusals call it (default: the path), as the URL a downloaded package came from."""
    path = Path(path)
    label = shown or str(path)
    if not path.is_file():
        raise CheckpointError(f"{label}: no such model package")
    size = path.stat().st_size
    if size > MAX_PACKAGE_BYTES:
        raise _refuse(label, f"{size} bytes, more than a package may hold ({MAX_PACKAGE_BYTES})")
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise _refuse(label, f"not a model package, or truncated ({str(exc)[:80]})") from None
    with archive:
        infos = archive.infolist()
        found = [info.filename for info in infos]
        unknown = [n for n in found if n not in MEMBER_LIMITS]
        if unknown or len(set(found)) != len(found):
            what = f"unexpected member {unknown[0][:60]!r}" if unknown else "a repeated member"
            raise _refuse(label, what)
        missing = [n for n in REQUIRED if n not in found]
        if missing:
            raise _refuse(label, f"no {missing[0]} in the package")
        by_name = {info.filename: info for info in infos}
        card = _card(label, _read_member(label, archive, by_name[CARD]))
        listed = set(card["members"])
        if listed != set(found) - {CARD}:
            odd = sorted(listed ^ (set(found) - {CARD}))[0]
            raise _refuse(label, f"the card and the archive disagree about {odd[:60]!r}")
        members = {}
        for name in found:
            if name == CARD or (names is not None and name not in names):
                continue
            data = _read_member(label, archive, by_name[name])
            entry = card["members"][name]
            if len(data) != entry["size"] or sha256_of(data) != entry["sha256"]:
                raise _refuse(label, f"{name} does not match its sha256 on the card")
            members[name] = data
    return PackageFiles(path, card, members)
