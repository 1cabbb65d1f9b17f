"""The installed models: one package per model name in ``NMT_HOME/models/NAME.nmt``.

``NMT_HOME`` defaults to the platform's folder for a user's application data:
``$XDG_DATA_HOME/nmt`` (else ``~/.local/share/nmt``) on Linux and other Unixes,
``~/Library/Application Support/nmt`` on macOS, ``%LOCALAPPDATA%\\nmt`` on Windows. Installing
verifies the whole package first, then renames it onto its name's file, so a model is replaced
by a newer version in place and a reader sees the old package or the new one, never a mix.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from nmt_cli.packages.archive import SUFFIX, read_package
from nmt_cli.packages.card import NAME, check_name, check_version, version_key
from nmt_cli.runtime.errors import UserError
from nmt_cli.runtime.output_file import fsync_dir, temporary_name


def nmt_home() -> Path:
    """Where nmt keeps installed models (module docstring)."""
    env = os.environ.get("NMT_HOME")
    if env:
        return Path(env).expanduser()
    home = Path.home()
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA") or home / "AppData" / "Local") / "nmt"
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / "nmt"
    return Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share") / "nmt"


def models_dir() -> Path:
    return nmt_home() / "models"


@dataclass
class InstalledModel:
    """An installed package: its name, file, card (None: unreadable, ``problem`` says why)."""

    name: str
    path: Path
    card: dict | None
    problem: str | None = None

    @property
    def version(self) -> str | None:
        return None if self.card is None else self.card.get("version")

    @property
    def size(self) -> int:
        return self.path.stat().st_size


def installed_path(name: str) -> Path | None:
    """The package of the installed model ``name``, or None."""
    if not NAME.fullmatch(name):
        return None
    path = models_dir() / f"{name}{SUFFIX}"
    return path if path.is_file() else None


def installed() -> list[InstalledModel]:
    """Every installed model, by name; a package that no longer reads is listed with why."""
    folder = models_dir()
    out = []
    for path in sorted(folder.glob(f"*{SUFFIX}")) if folder.is_dir() else []:
        try:
            card = read_package(path, names=()).card
            out.append(InstalledModel(path.stem, path, card))
        except UserError as exc:
            out.append(InstalledModel(path.stem, path, None, str(exc)))
    return out


def install_file(
    package: Path, *, keep_source: bool = True, shown: str | None = None
) -> tuple[InstalledModel, str | None]:
    """Install the package file ``package`` (verified whole first) under its card's name; the
    installed model and the version it replaced (None: none was installed). A package older than
    the installed one is refused; ``keep_source`` False moves the file instead of copying it;
    ``shown``: what refusals call the package (default: its path)."""
    label = shown or str(package)
    card = read_package(package, shown=label).card
    name = check_name(str(card.get("name", "")), f"{label}: card name")
    version = check_version(str(card.get("version", "")), f"{label}: card version")
    folder = models_dir()
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{name}{SUFFIX}"
    replaced = None
    if target.is_file():
        try:
            replaced = str(read_package(target, names=()).card.get("version"))
            newer = version_key(replaced) > version_key(version)
        except (UserError, ValueError):
            replaced, newer = "unreadable", False
        if newer:
            raise UserError(
                f"{name} {replaced} is installed, newer than {version}; "
                f"nmt models remove {name} first to go back"
            )
    tmp = temporary_name(target)
    try:
        if keep_source:
            shutil.copyfile(package, tmp)
        else:
            os.replace(package, tmp)
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UserError(f"{target}: cannot install ({exc.strerror})") from None
    fsync_dir(folder)
    return InstalledModel(name, target, card), replaced


def remove(name: str) -> Path:
    """Remove the installed model ``name``; the file removed."""
    path = installed_path(name)
    if path is None:
        names = ", ".join(m.name for m in installed()) or "none"
        raise UserError(f"no installed model {name[:80]!r}; installed: {names}")
    path.unlink()
    return path
