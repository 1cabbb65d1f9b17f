"""Sequence-level knowledge distillation (Kim & Rush, 2016): the training sources x translated by
a teacher, y' = the teacher's search output for x (its recipe's ``decode`` settings: beam, length
penalty, shortlist; several runs decode as their ensemble, log p = mean_m log p_m), and the
student trained on the pairs (x, y') in place of (x, y). Each line is translated whole, as the
one sentence a training pair is (Translator.translate; `nmt translate`'s cutting of long lines at
clauses is for documents).

`nmt preprocess` runs :func:`distil` before the data pipeline, which then reads the distilled
corpora (nmt_cli/data/distilled.py). The sources stream through in chunks of ``chunk_lines`` lines,
each chunk's pairs written to its own file, atomically: memory holds one chunk, and a stopped
distillation resumes at the chunks not written yet. Chunk k (counted over every training entry)
belongs to shard k mod N, so processes or machines sharing the run dir can each translate theirs
(``--shard I/N``); a call without a shard translates whatever is missing and then joins the
chunks into one corpus per entry. ``plan.json`` records what the chunks are made from (the
teachers' checkpoint files, their decode settings, the corpora, the chunk size): chunks made from
anything else are removed first, never mixed in.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from nmt_cli.config.sections import Recipe
from nmt_cli.data.distilled import distilled_file, teacher_dir
from nmt_cli.data.pairs import PairSource, split_block
from nmt_cli.data.splits import local_path, pair_source, train_entries
from nmt_cli.data.tokenizer import normalize
from nmt_cli.runtime.errors import DataError, UserError
from nmt_cli.runtime.output_file import AtomicFile, atomic_write, write_text_atomic
from nmt_cli.training.checkpoint import load, recipe_of, resolve
from nmt_cli.translation.contract import TranslateOptions
from nmt_cli.translation.routing import Routing
from nmt_cli.translation.translator import load_translator

# Lines translated and written at a time: what a stopped distillation can lose, and what it holds.
CHUNK_LINES = 2000
PLAN = "plan.json"


@dataclass(frozen=True)
class Chunk:
    """Lines ``number * chunk_lines`` onwards of training entry ``entry``; ``index`` counts the
    chunks of every entry, in order (shard ``index mod N`` translates it)."""

    entry: int
    number: int
    index: int
    tsv: bool
    block: tuple[bytes, ...]

    def sources(self) -> list[str | None]:
        """Each line's source, normalised; None for a TSV line without a tab (not a pair)."""
        if not self.tsv:
            return [normalize(line) for line in split_block(self.block[0])]
        fields = [line.split("\t", 1) for line in split_block(self.block[0])]
        return [normalize(f[0]) if len(f) == 2 else None for f in fields]

    def whole_lines(self) -> list[str]:
        """Each line as read, normalised (a TSV line without a tab is kept so)."""
        return [normalize(line) for line in split_block(self.block[0])]


@dataclass(frozen=True)
class Teacher:
    """The runs of ``data.teacher`` as checkpoint files, checked against the recipe's languages
    before any model is loaded; ``decode``: the first one's recipe ``decode`` section, which the
    ensemble decodes with (as `nmt translate -m A -m B` does)."""

    checkpoints: list[Path]
    multilingual: bool
    decode: dict

    def identity(self) -> list[dict]:
        """What the translations depend on: each checkpoint file as it is now."""
        return [
            {"file": str(p.resolve()), "bytes": p.stat().st_size, "mtime_ns": p.stat().st_mtime_ns}
            for p in self.checkpoints
        ]


def find_teacher(recipe: Recipe) -> Teacher:
    """``data.teacher`` resolved: each a run dir (its best checkpoint) or a checkpoint file
    translating the recipe's ``src-tgt``; anything else is one DataError line. Only the recipes
    are read (the checkpoints are mapped, not loaded)."""
    pair = f"{recipe.src}-{recipe.tgt}"
    checkpoints, recipes = [], []
    for run in recipe.data.teacher:
        try:
            path = resolve(local_path(run))
            recipes.append(recipe_of(load(path, mmap=True), path))
        except UserError as exc:
            raise DataError(f"data.teacher: {exc}") from None
        directions = Routing(recipes[-1]).directions
        if pair not in directions:
            raise DataError(
                f"data.teacher: {run} translates {', '.join(directions)}, not the recipe's {pair}"
            )
        checkpoints.append(path)
    return Teacher(
        checkpoints,
        any(Routing(r).multilingual for r in recipes),
        dataclasses.asdict(recipes[0].decode),
    )


def _chunks(sources: list[PairSource], chunk_lines: int) -> Iterator[Chunk]:
    index = 0
    for entry, source in enumerate(sources):
        for number, block in enumerate(source.blocks(chunk_lines)):
            yield Chunk(entry, number, index, source.tsv, block)
            index += 1


def _chunk_file(folder: Path, chunk: Chunk) -> Path:
    return folder / "chunks" / f"{chunk.entry}-{chunk.number:06d}.tsv"


def _plan(teacher: Teacher, sources: list[PairSource], chunk_lines: int) -> dict:
    return {
        "teacher": teacher.identity(),
        "decode": teacher.decode,
        "corpora": [
            {
                "label": s.label,
                "files": [{"path": str(f), "bytes": f.stat().st_size} for f in s.files],
            }
            for s in sources
        ],
        "chunk_lines": chunk_lines,
    }


def _start(folder: Path, plan: dict, log: Callable[[str], None]) -> None:
    """Keep what was made for this very plan; remove what was made for another."""
    path = folder / PLAN
    if path.is_file():
        try:
            same = json.loads(path.read_text(encoding="utf-8")) == plan
        except (OSError, ValueError):
            same = False
        if same:
            return
        log(f"{folder}: made from another teacher or corpus; translating the sources again")
        shutil.rmtree(folder)
    (folder / "chunks").mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(plan, indent=1))


def _write_chunk(path: Path, chunk: Chunk, sources: list[str | None], texts: list[str]) -> None:
    """The chunk's lines as ``source<TAB>translation``; a TSV line without a tab as it was."""
    raw = chunk.whole_lines() if None in sources else None
    found = iter(texts)
    lines = [
        raw[i] if s is None else f"{s}\t{normalize(next(found))}" for i, s in enumerate(sources)
    ]
    with atomic_write(path) as out:
        out.write("".join(line + "\n" for line in lines).encode("utf-8"))


def _join(run_dir: Path, chunk_files: dict[int, list[Path]]) -> None:
    """Each entry's chunks, in order, into its distilled corpus; then the chunks go."""
    for entry, files in chunk_files.items():
        out = AtomicFile(distilled_file(run_dir, entry))
        try:
            for path in files:
                with open(path, "rb") as part:
                    shutil.copyfileobj(part, out.file)
        except BaseException:
            out.abort()
            raise
        out.commit()
    shutil.rmtree(teacher_dir(run_dir) / "chunks")


@dataclass
class Progress:
    """What one call did: chunks translated here, found made, left to other shards; the lines it
    translated and how long that took; whether the distilled corpora are complete."""

    translated: int = 0
    found: int = 0
    others: int = 0
    lines: int = 0
    seconds: float = 0.0
    complete: bool = False


class _Teaching:
    """The teacher's translator, loaded at the first chunk that needs it."""

    def __init__(self, teacher: Teacher, recipe: Recipe, device: str, log, translator=None):
        self.teacher, self.device, self.log, self.translator = teacher, device, log, translator
        multilingual = teacher.multilingual
        self.options = TranslateOptions(
            target=recipe.tgt if multilingual else None,
            source=recipe.src if multilingual else None,
        )

    def __call__(self, sources: list[str]) -> list[str]:
        if self.translator is None:
            self.translator = load_translator(
                [str(p) for p in self.teacher.checkpoints], None, device=self.device
            )
            self.translator.warn = self.log
        return [t.text for t in self.translator.translate(sources, self.options)]


def distil(
    recipe: Recipe,
    run_dir: Path,
    log: Callable[[str], None] = print,
    *,
    shard: tuple[int, int] | None = None,
    device: str = "auto",
    chunk_lines: int = CHUNK_LINES,
    translator=None,
) -> Progress:
    """Translate ``recipe``'s training sources with its ``data.teacher`` into ``run_dir/teacher``
    (module docstring). ``shard`` (I, N): translate only the chunks k with k mod N = I, and leave
    joining them to a call without a shard. ``translator``: one already loaded, standing for the
    teacher's (by default loaded at the first chunk left to translate)."""
    teacher = find_teacher(recipe)
    sources = [pair_source(recipe, entry) for entry in train_entries(recipe)]
    for path in (f for s in sources for f in s.files):
        if not path.is_file():
            raise DataError(f"{path}: file not found")
    folder = teacher_dir(run_dir)
    _start(folder, _plan(teacher, sources, chunk_lines), log)
    progress = Progress()
    if all(distilled_file(run_dir, i).is_file() for i in range(len(sources))):
        progress.complete = True
        return progress
    teach = _Teaching(teacher, recipe, device, log, translator)
    chunk_files: dict[int, list[Path]] = {i: [] for i in range(len(sources))}
    started = time.perf_counter()
    for chunk in _chunks(sources, chunk_lines):
        path = _chunk_file(folder, chunk)
        chunk_files[chunk.entry].append(path)
        if path.is_file():
            progress.found += 1
        elif shard is not None and chunk.index % shard[1] != shard[0]:
            progress.others += 1
        else:
            lines = chunk.sources()
            _write_chunk(path, chunk, lines, teach([s for s in lines if s is not None]))
            progress.translated += 1
            progress.lines += len(lines)
            progress.seconds = time.perf_counter() - started
            log(
                f"teacher: {sources[chunk.entry].label} chunk {chunk.number + 1} translated; "
                f"{progress.lines} lines in {progress.seconds:.0f} s "
                f"({progress.lines / max(progress.seconds, 1e-9):.1f} lines/s)"
            )
    if shard is None:
        _join(run_dir, chunk_files)
        progress.complete = True
    return progress
