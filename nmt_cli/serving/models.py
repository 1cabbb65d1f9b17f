"""The models `nmt serve` answers with: one per -m (one per direction of a multilingual model),
each with its recipe's decoding settings, and the facts a client is shown about it (language
pair, training step, validation BLEU, whether the direction is zero-shot)."""

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from nmt_cli.runtime.errors import UserError
from nmt_cli.training.checkpoint import load, step_of
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
        }


def checkpoint_facts(path: Path) -> tuple[int | None, float | None]:
    """(training step, validation BLEU) of a checkpoint as training recorded them; an averaged
    checkpoint reports its newest step and the BLEU its run's metrics.jsonl gave the average."""
    payload = load(path)
    progress = payload.get("progress")
    if isinstance(progress, dict):
        step = progress.get("step")
        bleu = next(
            (
                r.get("valid_bleu")
                for r in reversed(progress.get("history") or [])
                if r.get("step") == step
            ),
            None,
        )
        return step, bleu
    steps = []
    for name in payload.get("averaged_from") or []:
        with contextlib.suppress(ValueError, IndexError):
            steps.append(step_of(Path(name)))
    bleu = None
    metrics = path.parent.parent / "metrics.jsonl"
    if metrics.is_file():
        for line in metrics.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if record.get("kind") == "averaged" and record.get("steps") == steps:
                    bleu = record.get("valid_bleu")
    return (max(steps) if steps else None), bleu


def load_models(
    paths: Sequence[str], *, device: str = "auto", shortlist: bool | None = None
) -> list[ServedModel]:
    """One ServedModel per -m, decoding with its recipe's settings; ids are the recipe names,
    numbered where two share one."""
    if not paths:
        raise UserError("-m/--model: give at least one run dir or checkpoint to serve")
    served: list[ServedModel] = []
    for path in paths:
        translator = Translator.load(path, device=device, workers=1, shortlist=shortlist)
        recipe = translator.recipe
        step, bleu = checkpoint_facts(translator.checkpoint)
        checkpoint = Path(translator.checkpoint).name
        if not translator.multilingual:
            served.append(
                ServedModel(
                    recipe.name,
                    translator,
                    recipe.src,
                    recipe.tgt,
                    recipe.name,
                    checkpoint,
                    step,
                    bleu,
                )
            )
            continue
        for direction in translator.directions + translator.zero_shot_directions:
            source, target = direction.split("-")
            served.append(
                ServedModel(
                    f"{recipe.name}-{direction}",
                    translator,
                    source,
                    target,
                    recipe.name,
                    checkpoint,
                    step,
                    bleu,
                    zero_shot=direction not in translator.directions,
                    directed=True,
                )
            )
    names = [m.id for m in served]
    for i, m in enumerate(served):
        if names.count(m.id) > 1:
            m.id = f"{m.id}-{names[: i + 1].count(m.id)}"
    return served
