"""Fine-tuning: a new run that starts from a trained model (``train.init_from`` / ``--init-from``).

The new run keeps the initial model's tokenizer, so preprocessing encodes the new data with the
vocabulary the weights were trained on; training starts from those weights (the moving average
when the model kept one, as that is what translates) with a fresh optimiser and schedule. A recipe
whose model would have another shape is refused before anything is trained.
"""

from __future__ import annotations

from pathlib import Path

import torch

from nmt_cli.config.sections import ModelConfig, Recipe
from nmt_cli.data.tokenizer import Tokenizer
from nmt_cli.runtime.errors import CheckpointError
from nmt_cli.training import checkpoint as ckpt

# Model keys that leave every parameter's shape (and meaning) unchanged.
SHAPE_FREE_KEYS = frozenset({"dropout", "init"})


def initial_checkpoint(recipe: Recipe) -> tuple[Path, dict] | None:
    """(checkpoint path, payload) of ``train.init_from``: a run dir's best.pt (else last.pt) or
    a file."""
    spec = recipe.train.init_from
    if not spec:
        return None
    path = ckpt.resolve(Path(spec).expanduser())
    return path, ckpt.load(path)


def initial_tokenizer(recipe: Recipe) -> tuple[Tokenizer, Path] | None:
    found = initial_checkpoint(recipe)
    if found is None:
        return None
    path, payload = found
    check_shape(recipe, payload, path)
    return ckpt.tokenizer_of(payload, path), path


def check_shape(recipe: Recipe, payload: dict, path: Path) -> None:
    """Refuse in one line a recipe whose model section differs in a key that shapes parameters."""
    initial = ckpt.recipe_of(payload, path).model.__dict__
    wanted = recipe.model.__dict__
    differ = [
        f"model.{k} ({initial[k]} there, {wanted[k]} here)"
        for k in ModelConfig.__dataclass_fields__
        if k not in SHAPE_FREE_KEYS and initial[k] != wanted[k]
    ]
    if differ:
        raise CheckpointError(
            f"train.init_from {path}: the recipe's model does not match the initial "
            f"model's shape: {', '.join(differ)}"
        )


def load_initial_weights(model: torch.nn.Module, recipe: Recipe) -> Path | None:
    """Copy the initial model's weights into ``model``; None when the recipe does not fine-tune."""
    found = initial_checkpoint(recipe)
    if found is None:
        return None
    path, payload = found
    check_shape(recipe, payload, path)
    try:
        model.load_state_dict(payload["model"])
    except (RuntimeError, KeyError) as exc:
        raise CheckpointError(
            f"train.init_from {path}: its weights do not fit this model "
            f"({str(exc).splitlines()[0][:120]})"
        ) from None
    return path
