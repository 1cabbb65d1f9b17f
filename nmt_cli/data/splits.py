"""Where a recipe's splits come from: each entry of ``data.train``, ``data.valid`` and
``data.test`` named as the files it reads, and the names the splits are stored under."""

from __future__ import annotations

import os
import re
from pathlib import Path

from nmt_cli.config.sections import Recipe
from nmt_cli.data import corpora
from nmt_cli.data.pairs import PairSource
from nmt_cli.runtime.errors import DataError
from nmt_cli.runtime.output_file import write_text_atomic


def local_path(entry: str) -> str:
    path = os.path.expanduser(os.path.expandvars(entry))
    if "$" in path:
        unset = re.search(r"\$\{?(\w+)", path).group(1)
        raise DataError(
            f"data: '{entry}' needs the environment variable {unset}, which is not set "
            "(export it, or give the path with --set)"
        )
    return path


def pair_source(recipe: Recipe, entry: str) -> PairSource:
    """Where one corpus entry of ``data.train``/``valid``/``test`` reads from: a path with {lang}
    (one file per language), a split of the registered corpus, or, with ``data.format: tsv``, a
    file of ``source<TAB>target`` lines."""
    corpus = corpora.get_corpus(recipe.data.corpus) if recipe.data.corpus else None
    if "{lang}" in entry:
        template = local_path(entry)
        return PairSource(
            entry, (Path(template.format(lang=recipe.src)), Path(template.format(lang=recipe.tgt)))
        )
    if corpus is not None and (entry in corpus.splits or recipe.data.format != "tsv"):
        return PairSource(
            f"{corpus.name}:{entry}",
            (
                corpora.fetch(corpus.name, corpus.filename(entry, recipe.src)),
                corpora.fetch(corpus.name, corpus.filename(entry, recipe.tgt)),
            ),
        )
    if recipe.data.format == "tsv":
        return PairSource(entry, (Path(local_path(entry)),), tsv=True)
    raise DataError(
        f"data: '{entry}' must contain {{lang}} (e.g. /data/train.{{lang}}.gz) "
        "when data.corpus is null, or be a source<TAB>target file with data.format: tsv"
    )


def split_files(recipe: Recipe, split: str) -> tuple[Path, ...]:
    """The files a split reads: (source, target), or (the TSV file,)."""
    return pair_source(recipe, split).files


def train_entries(recipe: Recipe) -> list[str]:
    train = recipe.data.train
    return [train] if isinstance(train, str) else list(train)


def split_names(recipe: Recipe) -> dict[str, str | list[str]]:
    """Storage name -> split name or path (a list for several training corpora); the first test
    set is also 'test'."""
    names = {"train": recipe.data.train, "valid": recipe.data.valid}
    for i, test in enumerate(recipe.data.test):
        names[f"test{i}" if i else "test"] = test
    return names


def save_tok_references(recipe: Recipe, data_dir: Path, log=print) -> dict[str, str]:
    """Copy the corpus's official tokenized references of the held-out splits into the run dir as
    ``{name}.ref.lc-tok.txt``, for ``nmt eval --lc-tok``. They only serve comparison with papers,
    so one that cannot be had is reported and skipped rather than failing preprocessing."""
    if not recipe.data.corpus:
        return {}
    corpus = corpora.get_corpus(recipe.data.corpus)
    saved = {}
    for name, split in split_names(recipe).items():
        if (
            name == "train"
            or corpus.tok_reference_name(split, recipe.tgt) not in corpus.tok_references
        ):
            continue
        try:
            lines = corpora.read_lines(corpora.fetch_tok_reference(corpus.name, split, recipe.tgt))
        except DataError as exc:
            log(
                f"note: no tokenized reference for {split} ({exc}); lc-tok scores will be "
                "unavailable"
            )
            continue
        path = data_dir / f"{name}.ref.lc-tok.txt"
        write_text_atomic(path, "".join(line + "\n" for line in lines))
        saved[name] = path.name
    return saved
