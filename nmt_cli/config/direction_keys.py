"""A recipe's translation directions as values: ``en-fr`` parsed into a Direction, the directions
a recipe trains, and the checks that its multilingual keys (``data.directions``, ``pairs``,
``back_translated``, ``weights``, ``denoise``) agree with each other. What the directions do to the
data (their tokens, their files, an epoch's mix) is nmt_cli/data/directions.py's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nmt_cli.config.sections import Recipe
from nmt_cli.runtime.errors import ConfigError

_DIRECTION = re.compile(r"^([A-Za-z][A-Za-z0-9_]*)-([A-Za-z][A-Za-z0-9_]*)$")


@dataclass(frozen=True)
class Direction:
    src: str
    tgt: str

    @property
    def name(self) -> str:
        return f"{self.src}-{self.tgt}"


def parse_direction(text: str, where: str = "data.directions") -> Direction:
    """``en-fr`` as a Direction; anything else is one ConfigError line naming ``where``."""
    match = _DIRECTION.match(str(text).strip())
    if not match or match.group(1) == match.group(2):
        raise ConfigError(
            f"{where}: '{text}' is not a direction SRC-TGT of two different languages, e.g. en-fr"
        )
    return Direction(match.group(1), match.group(2))


def is_multilingual(recipe: Recipe) -> bool:
    return bool(recipe.data.directions)


def recipe_directions(recipe: Recipe) -> list[Direction]:
    """The directions the recipe trains: data.directions, or the one pair src-tgt."""
    if not is_multilingual(recipe):
        return [Direction(recipe.src, recipe.tgt)]
    return [parse_direction(d) for d in recipe.data.directions]


def check_directions(recipe: Recipe, origin: str) -> None:
    """The multilingual keys agree with each other (one ConfigError line naming the key)."""
    data = recipe.data
    names = [parse_direction(d, f"{origin}: data.directions").name for d in data.directions]
    if len(set(names)) < len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise ConfigError(f"{origin}: data.directions: {', '.join(twice)} listed twice")
    known = names or [f"{recipe.src}-{recipe.tgt}"]
    for key, mapping in (("pairs", data.pairs), ("back_translated", data.back_translated)):
        for name, path in mapping.items():
            if name not in known:
                raise ConfigError(
                    f"{origin}: data.{key}.{name}: not one of the recipe's directions "
                    f"({', '.join(known)})"
                )
            if "{lang}" not in path:
                raise ConfigError(
                    f"{origin}: data.{key}.{name}: '{path}' must contain {{lang}} "
                    "(one file per language)"
                )
    groups = names + [f"{lang}-{lang}" for lang in data.denoise]
    for name, weight in data.weights.items():
        if name not in groups:
            raise ConfigError(
                f"{origin}: data.weights.{name}: not one of the recipe's directions "
                f"({', '.join(groups) or 'data.directions is empty'})"
            )
        if weight <= 0:
            raise ConfigError(f"{origin}: data.weights.{name}: {weight:g}; give a number above 0")
    if names and not recipe.tokenizer.joint:
        raise ConfigError(
            f"{origin}: tokenizer.joint: a multilingual recipe learns one SentencePiece model "
            "over all its languages; set it true"
        )
    if (names or data.back_translated) and recipe.train.subword_alpha:
        raise ConfigError(
            f"{origin}: train.subword_alpha: re-segmenting tagged sources is not supported; "
            "set it to 0 with data.directions or data.back_translated"
        )
    if (names or data.back_translated) and data.augment_case:
        raise ConfigError(
            f"{origin}: data.augment_case: re-casing tagged sources is not supported; "
            "set it to 0 with data.directions or data.back_translated"
        )
    if data.lowercase and data.augment_case:
        raise ConfigError(
            f"{origin}: data.augment_case: a data.lowercase model sees no case; set one of them off"
        )


def check_denoise(recipe: Recipe, origin: str) -> None:
    """Each language of data.denoise is the target of one of the recipe's directions."""
    data = recipe.data
    if not data.denoise:
        return
    if not data.directions:
        raise ConfigError(
            f"{origin}: data.denoise: needs data.directions (the pairs carry target tokens)"
        )
    targets = {d.tgt for d in recipe_directions(recipe)}
    for lang in data.denoise:
        if lang not in targets:
            raise ConfigError(
                f"{origin}: data.denoise: {lang}: no direction of data.directions writes it "
                f"(targets: {', '.join(sorted(targets))})"
            )
    if len(set(data.denoise)) < len(data.denoise):
        raise ConfigError(f"{origin}: data.denoise: a language is listed twice")
