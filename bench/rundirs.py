"""Run dirs for benchmark runs that share one preprocessed base, so every run sees the same
batches."""

from __future__ import annotations

import shutil
from pathlib import Path


def fresh_run_dir(base: Path, run_dir: Path) -> Path:
    """An empty ``run_dir`` holding a copy of ``base``'s preprocessed data and SentencePiece model,
    and its saved recipe when it has one (whatever was there before is removed)."""
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    for item in ("data", "spm.model", "recipe.yaml"):
        src = base / item
        if item == "recipe.yaml" and not src.exists():
            continue
        (shutil.copytree if src.is_dir() else shutil.copy)(src, run_dir / item)
    return run_dir
