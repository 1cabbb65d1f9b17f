"""Shared fixtures: the real-data mirror, small slices of Multi30k, a tiny preprocessed run."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MIRROR = Path(os.environ.get("NMT_DATA_MIRROR", ROOT.parent / "shared" / "data")).resolve()


def multi30k_lines(split: str, lang: str, n: int | None = None) -> list[str]:
    path = MIRROR / "multi30k" / f"{split}.{lang}.gz"
    if not path.exists():
        pytest.skip(f"real data not found at {path}; set NMT_DATA_MIRROR")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        lines = fh.read().split("\n")[:-1]
    return lines[:n] if n else lines


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own download cache and the real-data mirror."""
    monkeypatch.setenv("NMT_DATA_DIR", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.setenv("NMT_DATA_MIRROR", str(MIRROR))


def write_slice(directory: Path, n_train: int = 400, n_valid: int = 40) -> dict[str, str]:
    """Local en/fr files cut from real Multi30k; returns data.* recipe values with {lang}."""
    directory.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("val", n_valid), ("test_2016_flickr", n_valid)):
        for lang in ("en", "fr"):
            (directory / f"{split}.{lang}").write_text(
                "\n".join(multi30k_lines(split, lang, n)) + "\n", encoding="utf-8"
            )
    return {
        "train": str(directory / "train.{lang}"),
        "valid": str(directory / "val.{lang}"),
        "test": [str(directory / "test_2016_flickr.{lang}")],
    }


TINY_MODEL = {"rnn": "gru", "embed_dim": 32, "hidden_dim": 32, "dropout": 0.1}


def tiny_recipe_dict(data: dict, **sections) -> dict:
    recipe = {
        "name": "tiny",
        "src": "en",
        "tgt": "fr",
        "data": {"corpus": None, **data},
        "tokenizer": {"vocab_size": 300, "sample_sentences": 1000},
        "model": dict(TINY_MODEL),
        "train": {
            "batch_tokens": 400,
            "valid_every": 1000,
            "checkpoint_every": 1000,
            "valid_max_sentences": 20,
            "seed": 7,
        },
        "decode": {"beam_size": 2, "batch_size": 16},
    }
    for key, values in sections.items():
        recipe[key].update(values)
    return recipe


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """A preprocessed run dir (real Multi30k slice, 300-piece vocabulary), shared read-only."""
    from nmt_cli.config.recipes import recipe_from_dict
    from nmt_cli.data.preprocess import preprocess

    base = tmp_path_factory.mktemp("tiny")
    data = write_slice(base / "corpus")
    recipe = recipe_from_dict(tiny_recipe_dict(data))
    run_dir = base / "run"
    preprocess(recipe, run_dir, log=lambda m: None)
    return recipe, run_dir


def trained_copy(
    tiny_run,
    tmp_path_factory,
    name: str,
    progress_bar: bool | None = None,
    decode: dict | None = None,
    **train_values,
) -> Path:
    """A copy of the tiny preprocessed run, trained with ``train_values`` over the recipe's train.*
    (and ``decode`` over its decode.*); returns its run dir."""
    import shutil

    from nmt_cli.config.recipes import recipe_from_dict
    from nmt_cli.training.loop import train

    recipe, run_dir = tiny_run
    copy = tmp_path_factory.mktemp(name) / "run"
    shutil.copytree(run_dir, copy)
    raw = recipe.to_dict()
    raw["train"].update(train_values)
    raw["decode"].update(decode or {})
    train(recipe_from_dict(raw), copy, device="cpu", progress_bar=progress_bar)
    return copy
