"""Test scores a run dir keeps for its model card: ``RUN/scores.json``, written by
``nmt eval -m RUN --record TESTSET`` and read by ``nmt export``.

Each record names the test set, the direction, the metric, the score, sacreBLEU's signature, the
checkpoint file and its sha256, and the date. A record replaces an earlier one of the same test
set, direction, metric and checkpoint; an export takes the records of the checkpoint it packs
(by sha256), so a score never travels with weights it was not measured on.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from nmt_cli.packages.archive import file_sha256, is_package
from nmt_cli.runtime.errors import UserError
from nmt_cli.runtime.output_file import write_text_atomic
from nmt_cli.training.checkpoint import CHECKPOINT_DIR, resolve

SCORES_FILE = "scores.json"


def read_scores(run_dir: Path) -> list[dict]:
    """The run dir's score records; none when it has none."""
    path = Path(run_dir) / SCORES_FILE
    if not path.is_file():
        return []
    try:
        records = json.loads(path.read_text(encoding="utf-8")).get("scores", [])
    except (ValueError, AttributeError, UnicodeDecodeError):
        raise UserError(f"{path}: not a score record (JSON with a scores list)") from None
    return [r for r in records if isinstance(r, dict)]


def record_scores(
    run_dir: Path,
    test_set: str,
    direction: str,
    scores: list[dict],
    checkpoint: Path,
    checkpoint_sha256: str,
) -> Path:
    """Add ``scores`` (sacreBLEU results as ``Score.as_dict`` gives them) to the run dir's
    record, replacing those they supersede; the record's path."""
    now = datetime.now(timezone.utc).replace(microsecond=0).isoformat()
    new = [
        {
            "test_set": test_set,
            "direction": direction,
            "metric": s["metric"],
            "score": s["score"],
            "signature": s["signature"],
            "checkpoint": Path(checkpoint).name,
            "checkpoint_sha256": checkpoint_sha256,
            "date": now,
        }
        for s in scores
    ]
    same = lambda a, b: all(
        a.get(k) == b[k] for k in ("test_set", "direction", "metric", "checkpoint_sha256")
    )
    kept = [r for r in read_scores(run_dir) if not any(same(r, n) for n in new)]
    path = Path(run_dir) / SCORES_FILE
    write_text_atomic(path, json.dumps({"scores": kept + new}, indent=1) + "\n")
    return path


def scores_of(run_dir: Path, checkpoint_sha256: str) -> list[dict]:
    """The run dir's records of the checkpoint whose sha256 is ``checkpoint_sha256``."""
    return [
        {k: r[k] for k in ("test_set", "direction", "metric", "score", "signature", "date")}
        for r in read_scores(run_dir)
        if r.get("checkpoint_sha256") == checkpoint_sha256
        and all(k in r for k in ("test_set", "metric", "score", "signature"))
        and "direction" in r
        and "date" in r
    ]


def run_dir_of(checkpoint: Path) -> Path | None:
    """The run dir a checkpoint file lies in (``RUN/checkpoints/X.pt``), or None."""
    return checkpoint.parent.parent if checkpoint.parent.name == CHECKPOINT_DIR else None


def recorded_checkpoint(model: str) -> tuple[Path, Path]:
    """(run dir, checkpoint) whose scores ``nmt eval -m MODEL --record`` keeps; a one-line
    error where ``model`` is not a run dir or a checkpoint file in one."""
    if is_package(model) or not Path(model).exists():
        raise UserError(f"--record: {model} is not a run dir; scores are recorded in run dirs")
    checkpoint = resolve(model)
    run_dir = run_dir_of(checkpoint)
    if run_dir is None:
        raise UserError(f"--record: {checkpoint} does not lie in a run dir's checkpoints folder")
    return run_dir, checkpoint


def record_model_scores(model: str, test_set: str, direction: str, scores: list[dict]) -> Path:
    """Record ``scores`` of ``model`` (a run dir, or a checkpoint file in one) on ``test_set``
    in its run dir; the record's path."""
    run_dir, checkpoint = recorded_checkpoint(model)
    return record_scores(run_dir, test_set, direction, scores, checkpoint, file_sha256(checkpoint))
