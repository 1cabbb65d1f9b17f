"""The models `nmt serve` answers with: one per -m (one per direction of a multilingual model),
each with its recipe's decoding settings, and the facts a client is shown about it (language
pair, training step, validation BLEU, whether the direction is zero-shot, whether it is loaded,
a package's card)."""

import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from nmt_cli.packages.archive import is_package
from nmt_cli.packages.loading import locate, model_facts
from nmt_cli.packages.store import installed
from nmt_cli.runtime.errors import UserError
from nmt_cli.serving.model_pool import ModelPool, PooledTranslator, translator_loader
from nmt_cli.translation.contract import TranslateOptions, Translating
from nmt_cli.translation.glossary import Glossary, merged
from nmt_cli.translation.translator import Translator


@dataclass
class ServedModel:
    """One served model, or one direction of a multilingual one (``directed``: every call names
    its languages, so the batcher, which batches calls with equal options together, never mixes
    two directions' sentences); ``glossary``: terms every request to it forces (`nmt serve
    --glossary`)."""

    id: str
    translator: Translating
    source: str
    target: str
    recipe: str
    checkpoint: str  # the file name only: the server never shows its paths
    step: int | None
    valid_bleu: float | None
    zero_shot: bool = False  # a direction of a multilingual model it was not trained on
    directed: bool = False
    glossary: Glossary | None = None
    card: dict | None = None  # a package's model card

    def options(self, request: TranslateOptions) -> TranslateOptions:
        """A request's options for this model: its direction and glossary added."""
        glossary = merged(self.glossary, request.glossary)
        if not self.directed:
            return replace(request, glossary=glossary)
        return replace(request, target=self.target, source=self.source, glossary=glossary)

    def describe(self) -> dict:
        return {
            "id": self.id,
            "source": self.source,
            "target": self.target,
            "zero_shot": self.zero_shot,
            "recipe": self.recipe,
            "checkpoint": self.checkpoint,
            "step": self.step,
            "valid_bleu": self.valid_bleu,
            "beam_size": self.translator.config.beam_size,
            "loaded": not isinstance(self.translator, PooledTranslator) or self.translator.loaded,
            "card": self.card,
        }


def load_models(
    paths: Sequence[str], *, device: str = "auto", shortlist: bool | None = None
) -> list[ServedModel]:
    """One ServedModel per -m, decoding with its recipe's settings; ids are the recipe names
    (a package's: its card's name), numbered where two share one."""
    if not paths:
        raise UserError("-m/--model: give at least one run dir or checkpoint to serve")
    translators = [
        Translator.load(path, device=device, workers=1, shortlist=shortlist) for path in paths
    ]
    return _served(translators)


def serving_models(
    paths: Sequence[str], max_loaded: int, *, device: str = "auto", shortlist: bool | None = None
) -> tuple[list[ServedModel], ModelPool | None]:
    """The models `nmt serve` answers with, and the pool that loads them (None: all loaded now).
    -m without ``max_loaded`` loads each model at start; with no -m every installed model is
    served, and they, like -m's with ``max_loaded``, are loaded on first request."""
    if paths and not max_loaded:
        return load_models(paths, device=device, shortlist=shortlist), None
    pool = ModelPool(max_loaded, translator_loader(device))
    if not paths:
        found = installed()
        for m in found:
            if m.card is None:
                print(f"nmt serve: skipping {m.path}: {m.problem}", file=sys.stderr)
        paths = [m.path for m in found if m.card is not None]
    return pooled_models(paths, pool, shortlist=shortlist), pool


def pooled_models(
    paths: Sequence[str | Path], pool: ModelPool, *, shortlist: bool | None = None
) -> list[ServedModel]:
    """One ServedModel per package (or installed model's name), its weights loaded by ``pool``
    on its first request (nmt_cli/serving/model_pool.py)."""
    translators = []
    for path in paths:
        located = locate(path)
        if not is_package(located):
            raise UserError(f"{path}: --max-loaded and serving installed models take packages")
        _, _, card = model_facts(located)
        translators.append(
            PooledTranslator(pool, card["name"], located, {"workers": 1, "shortlist": shortlist})
        )
    if not translators:
        raise UserError("no installed models to serve: nmt models install PACKAGE, or give -m")
    return _served(translators)


def _served(translators: Sequence[Translating]) -> list[ServedModel]:
    served: list[ServedModel] = []
    for translator in translators:
        recipe = translator.recipe
        step, bleu, card = model_facts(translator.checkpoint)
        checkpoint = Path(translator.checkpoint).name
        name = card["name"] if card is not None else recipe.name
        if not translator.multilingual:
            served.append(
                ServedModel(
                    name,
                    translator,
                    recipe.src,
                    recipe.tgt,
                    recipe.name,
                    checkpoint,
                    step,
                    bleu,
                    card=card,
                )
            )
            continue
        for direction in translator.directions + translator.zero_shot_directions:
            source, target = direction.split("-")
            served.append(
                ServedModel(
                    f"{name}-{direction}",
                    translator,
                    source,
                    target,
                    recipe.name,
                    checkpoint,
                    step,
                    bleu,
                    zero_shot=direction not in translator.directions,
                    directed=True,
                    card=card,
                )
            )
    names = [m.id for m in served]
    for i, m in enumerate(served):
        if names.count(m.id) > 1:
            m.id = f"{m.id}-{names[: i + 1].count(m.id)}"
    return served
