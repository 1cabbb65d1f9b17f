"""Preprocessing a recipe of several directions or with a back-translated corpus: where each
direction's pairs come from, and the held-out splits as one stored split per name whose rows
are the directions one after another (nmt_cli/data/directions.py names the tags and groups).

The stored text of the held-out splits stays untagged, so a split's source lines can be
translated again with ``--target``; their ids start with the direction's tags, as the training
pairs' do. ``data/meta.json`` records where each direction's rows are (``groups``), for the
epoch's mix and per-direction validation.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from nmt_cli.config.direction_keys import (
    Direction,
    is_multilingual,
    parse_direction,
    recipe_directions,
)
from nmt_cli.config.sections import Recipe
from nmt_cli.data.arrays import SideWriter
from nmt_cli.data.denoising import denoising_sources
from nmt_cli.data.directions import (
    direction_recipe,
    source_tags,
)
from nmt_cli.data.pairs import PairSource
from nmt_cli.data.splits import local_path, pair_source, split_names, train_entries
from nmt_cli.runtime.errors import DataError


def is_tagged(recipe: Recipe) -> bool:
    """Whether preprocessing goes through this module: several directions or back-translation."""
    return is_multilingual(recipe) or bool(recipe.data.back_translated)


def _for_direction(direction: Direction, build, *args):
    """``build(*args)``, with a data error naming the direction whose data it is."""
    try:
        return build(*args)
    except DataError as exc:
        raise DataError(f"data.directions: {direction.name}: {exc}") from None


def _checked(source: PairSource, direction: Direction) -> PairSource:
    for path in source.files:
        if not path.is_file():
            raise DataError(f"data.directions: {direction.name}: {path}: file not found")
    return source


def training_sources(recipe: Recipe, data_dir: Path) -> list[PairSource]:
    """Every training corpus: each direction's real pairs in the order of data.directions, then
    the denoising pairs of data.denoise (written into ``data_dir``), then the back-translated
    corpora; each knows its direction and tags. A missing file is an error naming its direction,
    before any long pass."""
    sources = []
    for direction in recipe_directions(recipe):
        sub = direction_recipe(recipe, direction)
        for entry in train_entries(sub):
            source = _for_direction(direction, pair_source, sub, entry)
            label = f"{direction.name} {source.label}" if is_multilingual(recipe) else source.label
            sources.append(
                _checked(
                    dataclasses.replace(
                        source,
                        label=label,
                        tags=source_tags(recipe, direction),
                        direction=direction.name,
                    ),
                    direction,
                )
            )
    sources += denoising_sources(recipe, sources, data_dir)
    for name, template in recipe.data.back_translated.items():
        direction = parse_direction(name)
        path = _for_direction(direction, local_path, template)
        files = (Path(path.format(lang=direction.src)), Path(path.format(lang=direction.tgt)))
        source = PairSource(
            f"{name} back-translated {template}",
            files,
            tags=source_tags(recipe, direction, back_translated=True),
            direction=name,
            back_translated=True,
        )
        sources.append(_checked(source, direction))
    return sources


def train_groups(sources: list[PairSource], kept: list[int]) -> list[dict]:
    """Each direction's run of stored training rows (real and back-translated apart), from the
    sources in stored order and how many pairs each kept."""
    groups: list[dict] = []
    start = 0
    for source, n in zip(sources, kept):
        last = groups[-1] if groups else None
        if (
            last is not None
            and last["direction"] == source.direction
            and last["back_translated"] == source.back_translated
        ):
            last["end"] += n
        else:
            groups.append(
                {
                    "direction": source.direction,
                    "start": start,
                    "end": start + n,
                    "back_translated": source.back_translated,
                }
            )
        start += n
    return groups


def heldout_sources(recipe: Recipe) -> dict[str, list[tuple[Direction, str, PairSource]]]:
    """Storage name -> each direction's (direction, entry, source) of that held-out split; a
    missing file is an error naming the direction."""
    out: dict[str, list] = {}
    for direction in recipe_directions(recipe):
        sub = direction_recipe(recipe, direction)
        for name, entry in split_names(sub).items():
            if name == "train":
                continue
            source = _for_direction(direction, pair_source, sub, entry)
            out.setdefault(name, []).append((direction, entry, _checked(source, direction)))
    return out


def directions_heldout(recipe: Recipe, data_dir: Path, writer, stream) -> tuple[dict, dict]:
    """Each held-out split of a multilingual recipe as one stored split, the directions' rows one
    after another, untagged: ``writer(data_dir, name)`` opens a split's text (preprocess's
    _TextPairs) and ``stream(recipe, data_dir, name, entry, out)`` cleans one direction's lines
    into it. Gives the files read per split and each split's groups."""
    files: dict = {}
    groups: dict = {}
    for name, items in heldout_sources(recipe).items():
        out = writer(data_dir, name)
        files[name], groups[name] = [], []
        try:
            for direction, entry, _ in items:
                start = out.pairs
                source = stream(direction_recipe(recipe, direction), data_dir, name, entry, out)
                files[name] += source.paths
                groups[name].append({"direction": direction.name, "start": start, "end": out.pairs})
        except BaseException:
            out.abort()
            raise
        out.close()
    return files, groups


def encode_tagged_source(
    tokenizer, data_dir: Path, name: str, dtype, groups: list[dict], recipe: Recipe
) -> dict:
    """A held-out split's stored source text -> ids that start with each row's direction tags
    (the split is small: it is encoded in one go)."""
    text = (data_dir / f"{name}.src.txt").read_text(encoding="utf-8").split("\n")[:-1]
    writer = SideWriter(data_dir, name, "src", dtype)
    try:
        for g in groups:
            tags = source_tags(recipe, parse_direction(g["direction"]))
            prefix = tokenizer.symbol_ids(tags)
            seqs = [prefix + ids for ids in tokenizer.encode_src(text[g["start"] : g["end"]])]
            lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
            flat = np.fromiter((i for s in seqs for i in s), dtype=dtype, count=int(lengths.sum()))
            writer.append(flat, lengths)
    except BaseException:
        writer.abort()
        raise
    return writer.close()


def with_prefix(ids: np.ndarray, lengths: np.ndarray, prefix: tuple[int, ...]):
    """Flat ids and lengths of a block with ``prefix`` before every sentence."""
    if not prefix or not len(lengths):
        return ids, lengths
    starts = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    k = len(prefix)
    tiled = np.tile(np.asarray(prefix, dtype=ids.dtype), len(lengths))
    return np.insert(ids, np.repeat(starts, k), tiled), lengths + k
