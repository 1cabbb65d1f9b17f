"""A recipe's translation directions: which pairs one model learns, where each reads its data,
the tokens that tell the model what to do, and how an epoch mixes the directions.

A multilingual recipe (``data.directions``) trains one model on several directions with one
SentencePiece model over all their languages. Each source starts with the target-language token
``<2xx>`` (Johnson et al. 2017), then optionally a source-language token ``<from_xx>``
(``data.source_tag``), then ``<bt>`` for a back-translated pair (tagged back-translation, Caswell
et al. 2019) or, with ``data.denoise_tag``, ``<denoise>`` for a denoising pair
(nmt_cli/data/denoising.py). The tokens are SentencePiece user-defined symbols, prepended as ids so
a tag is one piece whatever text follows. The direction names and their checks are
nmt_cli/config/direction_keys.py's. A recipe without ``data.directions`` is the one pair
``src-tgt``, as before, and only a back-translated corpus gives it a token (``<bt>``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from nmt_cli.config.direction_keys import Direction, is_multilingual, recipe_directions
from nmt_cli.config.sections import Recipe

BACK_TRANSLATED = "<bt>"
DENOISING = "<denoise>"


def target_tag(lang: str) -> str:
    return f"<2{lang}>"


def source_tag(lang: str) -> str:
    return f"<from_{lang}>"


def languages(directions: list[Direction]) -> list[str]:
    """Every language of the directions, sorted."""
    return sorted({lang for d in directions for lang in (d.src, d.tgt)})


def tag_symbols(recipe: Recipe) -> list[str]:
    """The SentencePiece user-defined symbols the recipe's sources carry (none for a plain pair)."""
    directions = recipe_directions(recipe)
    symbols = []
    if is_multilingual(recipe):
        symbols += [target_tag(lang) for lang in languages(directions)]
        if recipe.data.source_tag:
            symbols += [source_tag(lang) for lang in languages(directions)]
    if recipe.data.back_translated:
        symbols.append(BACK_TRANSLATED)
    if recipe.data.denoise and recipe.data.denoise_tag:
        symbols.append(DENOISING)
    return symbols


def source_tags(
    recipe: Recipe, direction: Direction, back_translated: bool = False
) -> tuple[str, ...]:
    """The tokens that start a source of ``direction`` in this recipe."""
    tags: list[str] = []
    if is_multilingual(recipe):
        tags.append(target_tag(direction.tgt))
        if recipe.data.source_tag:
            tags.append(source_tag(direction.src))
    if back_translated:
        tags.append(BACK_TRANSLATED)
    return tuple(tags)


def denoising_tags(recipe: Recipe, lang: str) -> tuple[str, ...]:
    """The tokens that start a denoising source of ``lang`` (nmt_cli/data/denoising.py): the
    language's own target token, and ``<denoise>`` with data.denoise_tag."""
    tags = source_tags(recipe, Direction(lang, lang))
    return (*tags, DENOISING) if recipe.data.denoise_tag else tags


def direction_recipe(recipe: Recipe, direction: Direction) -> Recipe:
    """The recipe as one pair ``direction`` reads its data: its languages as src and tgt, and its
    own files where ``data.pairs`` names them (``{split}`` filled with each split's name)."""
    data = recipe.data
    changes: dict = {"directions": [], "pairs": {}, "back_translated": {}}
    template = data.pairs.get(direction.name)
    if template is not None:
        fill = lambda split: template.replace("{split}", split)  # noqa: E731
        train = [fill(t) for t in ([data.train] if isinstance(data.train, str) else data.train)]
        changes.update(
            corpus=None,
            format="lines",
            train=train if isinstance(data.train, list) else train[0],
            valid=fill(data.valid),
            test=[fill(t) for t in data.test],
        )
    return dataclasses.replace(
        recipe,
        src=direction.src,
        tgt=direction.tgt,
        data=dataclasses.replace(data, **changes),
    )


@dataclass(frozen=True)
class Group:
    """A run of training pairs of one direction, real or back-translated, in the stored split."""

    direction: str
    start: int
    end: int
    back_translated: bool = False

    @property
    def size(self) -> int:
        return self.end - self.start


def temperature_shares(
    sizes: list[int], temperature: float, weights: list[float] | None = None
) -> list[float]:
    """p_i = w_i q_i^(1/T) / Σ_j w_j q_j^(1/T) with q_i = n_i / Σ_j n_j: the share of an epoch
    that direction i takes (T = 1 keeps the data's proportions, T → ∞ makes them equal; the
    weights w_i, 1 unless given, tilt the result)."""
    total = sum(sizes)
    if not total:
        return [0.0 for _ in sizes]
    weights = weights or [1.0] * len(sizes)
    powered = [w * (n / total) ** (1.0 / temperature) if n else 0.0 for n, w in zip(sizes, weights)]
    return [p / sum(powered) for p in powered]


def epoch_counts(
    groups: list[Group], temperature: float, ratio: float, weights: dict[str, float] | None = None
) -> list[int]:
    """Pairs each group gives an epoch: the real pairs as many as there are in all, shared out
    between directions by :func:`temperature_shares` (``weights``: data.weights); a
    back-translated group ``ratio`` times its direction's real count (0: each of its pairs
    once)."""
    real = [g for g in groups if not g.back_translated]
    by_direction: dict[str, int] = {}
    for g in real:
        by_direction[g.direction] = by_direction.get(g.direction, 0) + g.size
    names = list(by_direction)
    total = sum(by_direction.values())
    sizes = [by_direction[n] for n in names]
    tilt = [(weights or {}).get(n, 1.0) for n in names]
    shares = dict(zip(names, temperature_shares(sizes, temperature, tilt)))
    counts = []
    for g in groups:
        of_direction = by_direction.get(g.direction, 0)
        if not g.back_translated:
            part = g.size / of_direction if of_direction else 0.0
            counts.append(round(shares[g.direction] * total * part))
        else:
            counts.append(round(ratio * of_direction) if ratio else g.size)
    return counts


class EpochMix:
    """Which stored training pairs each epoch draws: a group that gives an epoch fewer pairs than
    it holds gives a random subset, one that gives more repeats all of its pairs and adds a
    random subset. Drawn afresh per epoch from (seed, epoch), so a resumed run draws the same."""

    def __init__(self, groups: list[Group], counts: list[int]):
        self.groups, self.counts = groups, counts

    @classmethod
    def of(cls, recipe: Recipe, groups: list[Group]) -> EpochMix | None:
        """The recipe's mix, or None when every pair is drawn once (the split as it is)."""
        data = recipe.data
        counts = epoch_counts(groups, data.temperature, data.back_translated_ratio, data.weights)
        if all(c == g.size for g, c in zip(groups, counts)):
            return None
        return cls(groups, counts)

    def summary(self) -> str:
        """The pairs an epoch draws of each direction, for the training log."""
        drawn: dict[str, int] = {}
        for g, count in zip(self.groups, self.counts):
            name = g.direction + (" back-translated" if g.back_translated else "")
            drawn[name] = drawn.get(name, 0) + count
        return "each epoch draws " + ", ".join(f"{n} {c}" for n, c in drawn.items()) + " pairs"

    def rows(self, seed: int, epoch: int) -> np.ndarray:
        rng = np.random.default_rng([seed, epoch, 56])
        parts = []
        for g, count in zip(self.groups, self.counts):
            if not g.size or not count:
                continue
            whole, rest = divmod(count, g.size)
            members = np.arange(g.start, g.end, dtype=np.int64)
            parts += [members] * whole
            parts.append(g.start + np.sort(rng.choice(g.size, rest, replace=False)))
        rows = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        return rows.astype(np.int32 if len(rows) < 2**31 else np.int64)


def groups_of(meta: dict, split: str) -> list[Group]:
    """The groups of a stored split from data/meta.json (none for data of a plain pair)."""
    return [Group(**g) for g in (meta.get("groups") or {}).get(split, [])]
