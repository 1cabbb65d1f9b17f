"""Models from packages, wherever a run dir is taken: ``-m NAME.nmt``, or the name of an
installed model (nmt_cli/packages/store.py) where no file or folder has that name.

A package's members are verified (nmt_cli/packages/archive.py), its recipe read with
``yaml.safe_load``, its weights from safetensors (nmt_cli/packages/weights.py); they are laid out
as a checkpoint's payload and built into a model by the same code that builds a checkpoint's
(:func:`nmt_cli.training.checkpoint.model_from_payload`), so a package and its run dir translate
alike.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
import yaml

from nmt_cli.data.tokenizer import Tokenizer
from nmt_cli.packages.archive import (
    RECIPE,
    SOURCE_SPM,
    TARGET_SPM,
    WEIGHTS,
    PackageFiles,
    is_package,
    read_package,
)
from nmt_cli.packages.store import installed_path
from nmt_cli.packages.weights import read_weights
from nmt_cli.runtime.errors import CheckpointError
from nmt_cli.training.checkpoint import (
    FORMAT,
    LoadedModel,
    load_model,
    model_from_payload,
    training_facts,
)


def locate(model: str | os.PathLike) -> Path:
    """The path ``model`` names: itself, or, where nothing has that name, the installed model's
    package."""
    path = Path(model)
    if not path.exists():
        installed = installed_path(str(model))
        if installed is not None:
            return installed
    return path


def recipe_dict(files: PackageFiles) -> dict:
    """A package's recipe, as the mapping a checkpoint embeds."""
    try:
        recipe = yaml.safe_load(files.members[RECIPE].decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError):
        raise CheckpointError(f"{files.path}: refused: its recipe is not YAML") from None
    if not isinstance(recipe, dict):
        raise CheckpointError(f"{files.path}: refused: its recipe is not a mapping")
    return recipe


def package_tokenizer(files: PackageFiles) -> Tokenizer:
    return Tokenizer(files.members[SOURCE_SPM], files.members.get(TARGET_SPM), what=str(files.path))


def _as_tensor(data: bytes) -> torch.Tensor:
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


def load_package(path: str | os.PathLike, device: torch.device | str = "cpu") -> LoadedModel:
    """The model of the package ``path``, verified, on ``device``."""
    files = read_package(path)
    payload = read_weights(files.members[WEIGHTS], str(files.path))
    payload["format"] = FORMAT
    payload["recipe"] = recipe_dict(files)
    payload["tokenizer"] = {"src": _as_tensor(files.members[SOURCE_SPM])}
    if TARGET_SPM in files.members:
        payload["tokenizer"]["tgt"] = _as_tensor(files.members[TARGET_SPM])
    return model_from_payload(payload, files.path, device)


def load_any(model: str | os.PathLike, device: torch.device | str = "cpu") -> LoadedModel:
    """The model of a run dir, checkpoint file, package or installed model's name."""
    path = locate(model)
    if not path.exists():
        raise CheckpointError(
            f"{model}: no such run dir, checkpoint, package or installed model (nmt models list)"
        )
    return load_package(path, device) if is_package(path) else load_model(path, device)


def model_facts(path: str | os.PathLike) -> tuple[int | None, float | None, dict | None]:
    """(training step, validation BLEU, card) of a checkpoint file or package; a checkpoint has
    no card."""
    path = Path(path)
    if not is_package(path):
        return (*training_facts(path), None)
    card = read_package(path, names=()).card
    training = card.get("training") if isinstance(card.get("training"), dict) else {}
    return training.get("step"), training.get("valid_bleu"), card
