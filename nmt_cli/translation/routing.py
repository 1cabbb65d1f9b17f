"""Which direction a translation asks a model for, and the tokens that ask for it.

A model knows its directions from the recipe it was trained with (nmt_cli/data/directions.py). A
multilingual model translates into any language it has a target-language token for, from any
language it knows: a direction it was not trained on is zero-shot (Johnson et al. 2017), and a
:class:`Route` says so. The source language may be left out when the model's trained directions
into the target have one source, or when its sources carry no source-language token (then the
source does not change the translation, and whether it is zero-shot is unknown).
"""

from __future__ import annotations

from dataclasses import dataclass

from nmt_cli.config.sections import Recipe
from nmt_cli.data.directions import (
    Direction,
    is_multilingual,
    languages,
    recipe_directions,
    source_tags,
)
from nmt_cli.runtime.errors import UserError


@dataclass(frozen=True)
class Route:
    """A direction to translate: its languages, the source tokens that ask for it, and whether the
    model was trained on it (None: a source not named, which the model did not need)."""

    source: str | None
    target: str
    tags: tuple[str, ...]
    zero_shot: bool | None


class Routing:
    """The directions of one model's recipe."""

    def __init__(self, recipe: Recipe | None):
        self.recipe = recipe
        self.trained = [] if recipe is None else recipe_directions(recipe)
        self.multilingual = recipe is not None and is_multilingual(recipe)
        self.languages = languages(self.trained)
        self.targets = sorted({d.tgt for d in self.trained})
        self.uses_source_tag = self.multilingual and recipe.data.source_tag

    @property
    def directions(self) -> list[str]:
        """The trained directions, as the recipe lists them (``en-fr``)."""
        return [d.name for d in self.trained]

    @property
    def zero_shot(self) -> list[str]:
        """Directions a multilingual model can be asked for without having been trained on them:
        any two different languages it knows, into a language it has a token for."""
        if not self.multilingual:
            return []
        trained = set(self.directions)
        return [
            f"{s}-{t}"
            for s in self.languages
            for t in self.targets
            if s != t and f"{s}-{t}" not in trained
        ]

    def pivots(self, source: str, target: str) -> list[str]:
        """Languages L with source-L and L-target both trained: the ways to translate an untrained
        direction through two trained ones instead of zero-shot."""
        trained = set(self.directions)
        return [
            lang
            for lang in self.languages
            if f"{source}-{lang}" in trained and f"{lang}-{target}" in trained
        ]

    def route(self, target: str | None = None, source: str | None = None) -> Route | None:
        """The route of a request for ``target`` (from ``source``); None for a one-pair model
        asked for nothing else. A language the model lacks is a one-line UserError listing the
        ones it has."""
        if self.recipe is None:
            return None
        if not self.multilingual:
            pair = self.trained[0]
            if target not in (None, pair.tgt):
                raise UserError(
                    f"--target {target}: this model translates into {pair.tgt} only ({pair.name})"
                )
            if source not in (None, pair.src):
                raise UserError(
                    f"--source {source}: this model translates from {pair.src} only ({pair.name})"
                )
            return None
        if target is None:
            raise UserError(
                f"--target: this model translates into {', '.join(self.targets)}; name one "
                f"(its directions: {', '.join(self.directions)})"
            )
        if target not in self.targets:
            raise UserError(
                f"--target {target}: this model does not translate into it; it has "
                f"{', '.join(self.targets)}"
            )
        if source is not None and source not in self.languages:
            raise UserError(
                f"--source {source}: this model does not know it; it has "
                f"{', '.join(self.languages)}"
            )
        if source == target:
            raise UserError(f"--source {source} and --target {target} are the same language")
        if source is None:
            into = sorted({d.src for d in self.trained if d.tgt == target})
            if len(into) == 1:
                source = into[0]
            elif self.uses_source_tag:
                raise UserError(
                    f"--source: this model translates into {target} from {', '.join(into)}; "
                    "name the source language"
                )
        zero_shot = None if source is None else f"{source}-{target}" not in self.directions
        tags = source_tags(self.recipe, Direction(source or "", target))
        return Route(source, target, tags, zero_shot)
