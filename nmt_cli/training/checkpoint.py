"""Checkpoints: written atomically, read without running any code.

A checkpoint is a dict of tensors and plain values: model and optimiser state, the schedule,
the position in the data, RNG states, the resolved recipe and the tokenizer models (as uint8
tensors). It is written to a temporary file, fsynced and renamed, so a crash at any moment leaves
either the old file or the new one. It is read with ``torch.load(weights_only=True)``, which
refuses any pickle that would construct arbitrary objects.

For decoding, :func:`load_model` maps the file instead of reading it (``mmap=True``): a training
checkpoint also holds the optimiser's moments and the raw weights beside the EMA ones, more than
half of its bytes, and mapped tensors that are never touched are never read.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from nmt_cli.config.direction_keys import is_multilingual
from nmt_cli.config.recipes import recipe_from_dict
from nmt_cli.config.sections import Recipe
from nmt_cli.data.store import load_meta
from nmt_cli.data.tokenizer import Tokenizer
from nmt_cli.decoding.language_vocabulary import LanguageVocabularies, count_languages
from nmt_cli.decoding.shortlist import Shortlist
from nmt_cli.model import build_model
from nmt_cli.runtime.errors import CheckpointError
from nmt_cli.runtime.output_file import atomic_write, fsync_dir, temporary_name

FORMAT = 1
CHECKPOINT_DIR = "checkpoints"


def save_atomic(payload: dict, path: Path) -> None:
    """Write ``payload`` to ``path`` so that readers see the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as fh:
        torch.save(payload, fh)


def link_atomic(target: Path, link: Path) -> None:
    """Make ``link`` the same file as ``target`` (a hard link, else a copy), atomically."""
    tmp = temporary_name(link)
    tmp.unlink(missing_ok=True)
    try:
        try:
            os.link(target, tmp)
        except OSError:
            shutil.copyfile(target, tmp)
        os.replace(tmp, link)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(link.parent)


def tokenizer_payload(tokenizer: Tokenizer) -> dict:
    as_tensor = lambda b: torch.frombuffer(bytearray(b), dtype=torch.uint8)
    out = {"src": as_tensor(tokenizer.src_proto)}
    if not tokenizer.joint:
        out["tgt"] = as_tensor(tokenizer.tgt_proto)
    return out


_ZIP_MAGIC = b"PK\x03\x04"


def _is_zip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(4) == _ZIP_MAGIC


def load(path: Path, mmap: bool = False) -> dict:
    """Load a checkpoint safely; any problem is one CheckpointError line naming the file.

    ``mmap``: map the file and read each tensor's bytes only when it is used (torch's zip format
    only; other files are read whole). The file must not change in place while mapped; this
    module only ever replaces files by renaming, which leaves existing maps intact."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint not found")
    kind = _not_torch_file(path)
    if kind:
        raise CheckpointError(
            f"{path}: not a checkpoint ({kind}); give a run dir or a .pt file "
            "that nmt train or nmt average wrote"
        )
    try:
        mmap = mmap and _is_zip(path)
        with (
            warnings.catch_warnings()
        ):  # torch's note on an unusual pickle protocol: the outcome says more
            warnings.filterwarnings(
                "ignore", message="Detected pickle protocol", category=UserWarning
            )
            payload = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "unsafe content"
        if "weights_only" in str(exc) or "Unsupported" in str(exc) or "global" in str(exc).lower():
            raise CheckpointError(
                f"{path}: refused: the file holds objects that could run code "
                f"when loaded ({first[:120]})"
            ) from None
        raise CheckpointError(
            f"{path}: corrupt checkpoint ({first[:120]}); use another checkpoint"
        ) from None
    except (
        Exception
    ) as exc:  # garbage bytes make the unpickler raise anything (IndexError, struct.error, ...)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise CheckpointError(
            f"{path}: corrupt or truncated checkpoint ({first[:120]}); "
            "use another checkpoint or retrain"
        ) from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT or "model" not in payload:
        raise CheckpointError(f"{path}: not an nmt checkpoint")
    return payload


def _not_torch_file(path: Path) -> str | None:
    """What the file is when torch.save cannot have written it (a zip archive, or a pickle in the
    format before torch 1.6), so that a recipe or a text file given as a model is named as such."""
    with open(path, "rb") as fh:
        head = fh.read(4096)
    if head.startswith(b"PK\x03\x04") or head.startswith(b"\x80"):
        return None
    if not head:
        return "an empty file"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not just a character cut at the end of the sample
            return "unknown binary content"
    if path.suffix in (".yaml", ".yml"):
        return (
            "a YAML file, perhaps a recipe: its run dir is runs/<recipe name> unless --run-dir "
            "said otherwise"
        )
    return "a text file"


def recipe_of(payload: dict, path: Path) -> Recipe:
    return recipe_from_dict(payload["recipe"], f"{path} (embedded recipe)")


def tokenizer_of(payload: dict, path: Path) -> Tokenizer:
    tok = payload.get("tokenizer") or {}
    if "src" not in tok:
        raise CheckpointError(f"{path}: checkpoint carries no tokenizer")
    to_bytes = lambda t: bytes(t.numpy().tobytes())
    return Tokenizer(
        to_bytes(tok["src"]), to_bytes(tok["tgt"]) if "tgt" in tok else None, what=str(path)
    )


def resolve(model_path: str | os.PathLike) -> Path:
    """A run dir means its best checkpoint (else its last); a file means itself."""
    path = Path(model_path)
    if path.is_dir():
        ckpt_dir = path / CHECKPOINT_DIR
        for name in ("best.pt", "last.pt"):
            if (ckpt_dir / name).is_file():
                return ckpt_dir / name
        raise CheckpointError(f"{path}: run dir has no checkpoint yet; run nmt train first")
    if not path.exists():
        raise CheckpointError(f"{path}: no such run dir or checkpoint")
    return path


def step_of(path: Path) -> int:
    """The step of a numbered checkpoint ``step-N.pt``; ValueError for any other name."""
    return int(path.stem.split("-", 1)[1])


def step_checkpoints(run_dir: Path) -> list[Path]:
    """The run's numbered checkpoints, oldest first."""
    found = []
    for p in (run_dir / CHECKPOINT_DIR).glob("step-*.pt"):
        try:
            found.append((step_of(p), p))
        except ValueError:
            continue
    return [p for _, p in sorted(found)]


@dataclass
class LoadedModel:
    """A checkpoint ready to decode: the model in eval mode, the recipe it was trained with, its
    tokenizer, the checkpoint file, and the vocabulary shortlist learned at preprocess time (None
    for checkpoints older than shortlists)."""

    model: torch.nn.Module
    recipe: Recipe
    tokenizer: Tokenizer
    path: Path
    shortlist: Shortlist | None = None
    languages: LanguageVocabularies | None = None  # a multilingual model's, by target language


def load_model(
    model_path: str | os.PathLike, device: torch.device | str = "cpu", fast: bool = True
) -> LoadedModel:
    """The model of a run dir (its best checkpoint, see :func:`resolve`) or a checkpoint file.

    ``fast`` maps the file rather than reading it whole (module docstring); the weights, and so
    the translations, are the same as with ``fast=False``."""
    path = resolve(model_path)
    return model_from_payload(load(path, mmap=fast), path, device)


def model_from_payload(
    payload: dict, path: Path, device: torch.device | str = "cpu"
) -> LoadedModel:
    """The LoadedModel of a checkpoint's ``payload`` (its model, recipe, tokenizer, shortlist and
    language vocabularies), or of the same keys read from a model package; ``path`` names it."""
    recipe = recipe_of(payload, path)
    tokenizer = tokenizer_of(payload, path)
    # initialise=False: every weight comes from the checkpoint (strict load), none need drawing
    model = build_model(
        recipe.model, tokenizer.src_vocab_size, tokenizer.tgt_vocab_size, initialise=False
    )
    try:
        model.load_state_dict(payload["model"])
    except (RuntimeError, KeyError, TypeError) as exc:
        first = (str(exc).strip().splitlines() or ["mismatch"])[0]
        raise CheckpointError(
            f"{path}: weights do not fit the recipe's model ({first[:120]})"
        ) from None
    shortlist = None
    if "shortlist" in payload:
        try:
            shortlist = Shortlist.from_payload(payload["shortlist"])
            table = shortlist.table
            fits = (
                table.size(0) == tokenizer.src_vocab_size
                and int(table.max()) < tokenizer.tgt_vocab_size
                and int(shortlist.frequent.max()) < tokenizer.tgt_vocab_size
            )
        except (KeyError, TypeError, AttributeError, RuntimeError):
            fits = False
        if not fits:
            raise CheckpointError(f"{path}: its vocabulary shortlist does not fit the vocabulary")
    languages = languages_of(payload, path, recipe)
    return LoadedModel(model.to(device).eval(), recipe, tokenizer, path, shortlist, languages)


def training_facts(path: Path, payload: dict | None = None) -> tuple[int | None, float | None]:
    """(training step, validation BLEU) of a checkpoint as training recorded them; an averaged
    checkpoint reports its newest step and the BLEU its run's metrics.jsonl gave the average."""
    payload = load(path) if payload is None else payload
    progress = payload.get("progress")
    if isinstance(progress, dict):
        step = progress.get("step")
        bleu = next(
            (
                r.get("valid_bleu")
                for r in reversed(progress.get("history") or [])
                if r.get("step") == step
            ),
            None,
        )
        return step, bleu
    steps = []
    for name in payload.get("averaged_from") or []:
        with contextlib.suppress(ValueError, IndexError):
            steps.append(step_of(Path(name)))
    bleu = None
    metrics = path.parent.parent / "metrics.jsonl"
    if metrics.is_file():
        for line in metrics.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if record.get("kind") == "averaged" and record.get("steps") == steps:
                    bleu = record.get("valid_bleu")
    return (max(steps) if steps else None), bleu


def languages_of(payload: dict, path: Path, recipe: Recipe) -> LanguageVocabularies | None:
    """A multilingual model's target-language vocabularies: the checkpoint's, or for one saved
    before they existed, counted from its run dir's stored training split where that is there."""

    if "languages" in payload:
        try:
            return LanguageVocabularies.from_payload(payload["languages"])
        except (AttributeError, TypeError):
            raise CheckpointError(f"{path}: its language vocabularies are malformed") from None
    data_dir = path.parent.parent / "data"
    if not is_multilingual(recipe) or not (data_dir / "train.tgt.ids.npy").is_file():
        return None

    return count_languages(data_dir, load_meta(path.parent.parent))


def average(paths: list[Path], output: Path) -> Path:
    """Average the model weights of several checkpoints of one run into a translate-only
    checkpoint."""
    save_atomic(averaged_payload(paths), Path(output))
    return Path(output)


def averaged_payload(paths: list[Path]) -> dict:
    """The translate-only checkpoint payload whose weights are the mean of ``paths``' weights."""
    if not paths:
        raise CheckpointError("nothing to average: no numbered checkpoints found")
    total = None
    first = None
    for path in paths:
        payload = load(path)
        if first is None:
            first = payload
        elif recipe_of(payload, path).model != recipe_of(first, paths[0]).model:
            raise CheckpointError(
                f"{path}: a different model shape than {paths[0]}; cannot average"
            )
        state = payload["model"]
        if total is None:
            total = {
                k: v.double().clone() if v.is_floating_point() else v.clone()
                for k, v in state.items()
            }
        else:
            for k, v in state.items():
                if v.is_floating_point():
                    total[k] += v.double()
    averaged = {
        k: (v / len(paths)).to(first["model"][k].dtype) if v.is_floating_point() else v
        for k, v in total.items()
    }
    out = {
        "format": FORMAT,
        "model": averaged,
        "recipe": first["recipe"],
        "tokenizer": first["tokenizer"],
        "averaged_from": [str(p) for p in paths],
    }
    for key in ("shortlist", "languages"):
        if key in first:
            out[key] = first[key]
    return out
