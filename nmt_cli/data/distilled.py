"""The corpora a run trains on when its recipe names a ``data.teacher``: each training entry's
sources paired with the teacher's translations of them (sequence-level distillation), and, with
``data.teacher_keep_references``, the original pairs after them.

The teacher's translations are made above this layer (nmt_cli/translation/distillation.py, run by
`nmt preprocess` before the data pipeline); here is only where they live in the run dir and how
the pipeline reads them. Each entry's distilled corpus is one ``source<TAB>translation`` file,
``teacher/train-<i>.tsv``, read as any TSV corpus is: cleaned, filtered and counted in
data/meta.json under the label ``teacher(<entry>)``. A line of a TSV entry that has no tab is kept
as it was read, so the pipeline drops it for the same reason it would drop the original.
"""

from __future__ import annotations

from pathlib import Path

from nmt_cli.config.sections import Recipe
from nmt_cli.data.pairs import PairSource
from nmt_cli.data.splits import pair_source, train_entries
from nmt_cli.runtime.errors import DataError

TEACHER_DIR = "teacher"


def teacher_dir(run_dir: Path) -> Path:
    """Where the teacher's translations of a run's training sources are made and kept."""
    return Path(run_dir) / TEACHER_DIR


def distilled_file(run_dir: Path, entry: int) -> Path:
    """Training entry ``entry``'s distilled corpus: ``source<TAB>translation`` lines."""
    return teacher_dir(run_dir) / f"train-{entry}.tsv"


def distilled_source(run_dir: Path, entry: int, original: PairSource) -> PairSource:
    return PairSource(f"teacher({original.label})", (distilled_file(run_dir, entry),), tsv=True)


def train_sources(recipe: Recipe, run_dir: Path) -> list[PairSource]:
    """The training corpora of a one-pair recipe: its ``data.train`` entries, or with a teacher
    their distilled corpora (and the entries after them with ``data.teacher_keep_references``).
    A distilled corpus not made yet is a one-line error saying which command makes it."""
    originals = [pair_source(recipe, entry) for entry in train_entries(recipe)]
    if not recipe.data.teacher:
        return originals
    distilled = [distilled_source(run_dir, i, s) for i, s in enumerate(originals)]
    for source in distilled:
        if not source.files[0].is_file():
            raise DataError(
                f"{source.files[0]}: the teacher's translations of the training sources are not "
                "complete; nmt preprocess makes them (and resumes where it stopped)"
            )
    return distilled + (originals if recipe.data.teacher_keep_references else [])
