"""What a checkpoint holds, where a run starts, and how it resumes exactly.

A training checkpoint carries the model, the optimiser, the schedule, the run's ``Progress``
(step, epoch, position in the epoch's batch order, early-stopping state, validation history) and
the RNG states, plus the recipe, tokenizer and shortlist that translation needs. ``resume`` puts
all of it back and ``TrainingBatches`` carries on from the saved epoch and position, so an
interrupted run continues as if it had not stopped; ``start_run`` decides between that, a restart
and fine-tuning from another model's weights.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import torch

from nmt_cli.config.recipes import recipe_differences
from nmt_cli.config.sections import Recipe, TrainConfig
from nmt_cli.data.batches import iterate_epoch
from nmt_cli.data.casing import case_augmented
from nmt_cli.data.store import EncodedSplit, encoded_split, load_text, sampled_split
from nmt_cli.data.tokenizer import Tokenizer
from nmt_cli.decoding.language_vocabulary import LanguageVocabularies
from nmt_cli.decoding.shortlist import Shortlist
from nmt_cli.runtime.errors import CheckpointError, DataError
from nmt_cli.training import checkpoint as ckpt
from nmt_cli.training.checkpoint_policy import CheckpointPolicy
from nmt_cli.training.ema import WeightAverage
from nmt_cli.training.finetune import load_initial_weights
from nmt_cli.training.schedule import LearningRate

log = logging.getLogger("nmt.train")


@dataclass
class Progress:
    step: int = 0
    epoch: int = 0
    position: int = 0  # next batch index within the epoch's batch order
    best_metric: float | None = None
    best_step: int = 0
    bad_validations: int = 0
    nan_in_row: int = 0
    nan_total: int = 0
    history: list = field(default_factory=list)  # validation results, for summary.json


@dataclass
class Resumed:
    """What ``resume`` hands back beyond what it loaded in place."""

    progress: Progress
    # With train.ema_decay: the moving average's weights and update count, for WeightAverage.
    average: tuple[dict, int] | None


def checkpoint_payload(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    schedule: LearningRate,
    progress: Progress,
    recipe: Recipe,
    tokenizer: Tokenizer,
    shortlist: Shortlist,
    ema: WeightAverage | None,
    languages: LanguageVocabularies | None = None,
) -> dict:
    """Everything a checkpoint holds; with EMA, "model" is the average and "raw_model" the
    weights."""
    rng = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    payload = {
        "format": ckpt.FORMAT,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "schedule": schedule.state_dict(),
        "progress": {k: getattr(progress, k) for k in progress.__dataclass_fields__},
        "rng": rng,
        "recipe": recipe.to_dict(),
        "tokenizer": ckpt.tokenizer_payload(tokenizer),
        "shortlist": shortlist.to_payload(),
    }
    if languages is not None:
        payload["languages"] = languages.to_payload()
    if ema is not None:
        payload["raw_model"] = payload["model"]
        payload["model"] = ema.state_dict()
        payload["ema_updates"] = ema.updates
    return payload


def resume(
    path: Path,
    recipe: Recipe,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    schedule: LearningRate,
    *,
    announce: bool = True,
) -> Resumed:
    """Load the checkpoint at ``path`` into the model, optimiser and schedule and restore the RNG
    states; refuse one whose recipe changed in keys that matter. ``announce`` logs where the run
    resumes (the main process of a distributed run)."""
    payload = ckpt.load(path)
    blocking, allowed = recipe_differences(payload["recipe"], recipe.to_dict())
    if blocking:
        raise CheckpointError(
            f"{path}: the recipe changed since this checkpoint in keys that "
            f"matter: {', '.join(blocking)}; use --restart to start over"
        )
    # With train.ema_decay the checkpoint's "model" is the moving average (what translate and
    # validation use) and "raw_model" the weights training goes on from.
    raw = payload.get("raw_model")
    try:
        model.load_state_dict(raw if raw is not None else payload["model"])
        optimizer.load_state_dict(payload["optimizer"])
    except (RuntimeError, ValueError, KeyError) as exc:
        raise CheckpointError(
            f"{path}: does not fit this model ({str(exc)[:100]}); use --restart"
        ) from None
    average = None
    if raw is not None:
        average = (payload["model"], int(payload.get("ema_updates", 1)))
    schedule.load_state_dict(payload["schedule"])
    progress = Progress(**payload["progress"])
    torch.set_rng_state(payload["rng"]["torch"])
    if torch.cuda.is_available() and "cuda" in payload["rng"]:
        torch.cuda.set_rng_state_all(list(payload["rng"]["cuda"]))
    if announce:
        log.info(
            f"resuming from step {progress.step} (epoch {progress.epoch}, "
            f"batch {progress.position})"
        )
        if allowed:
            log.info(f"recipe keys changed since the checkpoint (allowed): {', '.join(allowed)}")
    return Resumed(progress, average)


def start_run(
    checkpoints: CheckpointPolicy,
    recipe: Recipe,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    schedule: LearningRate,
    *,
    restart: bool,
    announce: bool = True,
) -> Resumed | None:
    """Where a run starts: its last checkpoint when there is one, unless ``restart``, which forgets
    the run's checkpoints instead; else the weights of ``train.init_from`` when set (fine-tuning,
    with a fresh optimiser and schedule); else the model as built. None unless it resumed."""
    last = checkpoints.directory / "last.pt"
    if last.exists() and not restart:
        return resume(last, recipe, model, optimizer, schedule, announce=announce)
    if restart:
        checkpoints.clear()
    if recipe.train.init_from:
        start = load_initial_weights(model, recipe)
        if announce:
            log.info(
                f"fine-tuning: starting from the weights of {start} with a fresh optimiser "
                "and schedule"
            )
    return None


class TrainingBatches:
    """The batches a run trains on, from the position its ``Progress`` saved: each epoch's split
    (re-segmented per epoch under ``train.subword_alpha``) in that epoch's batch order
    (nmt_cli/data/batches.py), this rank's share of it, ``accumulate`` batches to an optimiser
    step."""

    def __init__(
        self,
        run_dir: Path,
        train_split: EncodedSplit,
        tokenizer: Tokenizer,
        cfg: TrainConfig,
        rank: int = 0,
        world: int = 1,
        mix=None,
        augment_case: float = 0.0,
    ):
        self.run_dir, self.train_split, self.tokenizer = run_dir, train_split, tokenizer
        self.cfg, self.rank, self.world = cfg, rank, world
        self.mix = mix  # directions.EpochMix: which pairs each epoch draws (None: all, once)
        self.augment_case = augment_case  # data.augment_case: a share re-cased each epoch
        redrawn = cfg.subword_alpha or augment_case
        self.train_text = self._train_text() if redrawn else None

    def _train_text(self) -> tuple[list[str], list[str]]:
        """The stored training sentences, which subword regularisation re-segments and case
        augmentation re-cases each epoch."""
        try:
            text = load_text(self.run_dir, "train", "src"), load_text(self.run_dir, "train", "tgt")
        except DataError:
            text = None
        if text is None or not len(text[0]) == len(text[1]) == len(self.train_split):
            raise DataError(
                f"{self.run_dir / 'data'}: {self._redrawn_by()} needs the training text "
                "(train.src.txt, train.tgt.txt) that nmt preprocess now stores; re-run it"
            )
        return text

    def _redrawn_by(self) -> str:
        return "train.subword_alpha" if self.cfg.subword_alpha else "data.augment_case"

    def _epoch_split(self, epoch: int) -> EncodedSplit:
        if self.train_text is None:
            return self.train_split
        text = case_augmented(*self.train_text, self.augment_case, self.cfg.seed, epoch)
        if not self.cfg.subword_alpha:
            return encoded_split(*text, self.tokenizer)
        return sampled_split(*text, self.tokenizer, self.cfg.subword_alpha, self.cfg.seed, epoch)

    def stream(self, progress: Progress):
        """(position, batch) across epochs from the saved position, until max_epochs; moves
        ``progress`` on to the next epoch as each one ends."""
        while not self.cfg.max_epochs or progress.epoch < self.cfg.max_epochs:
            yield from iterate_epoch(
                self._epoch_split(progress.epoch),
                self.cfg.batch_tokens,
                self.cfg.seed,
                progress.epoch,
                progress.position,
                self.rank,
                self.world,
                None if self.mix is None else self.mix.rows(self.cfg.seed, progress.epoch),
            )
            progress.epoch += 1
            progress.position = 0

    def next_group(self, stream) -> list:
        """The ``accumulate`` batches of the next optimiser step (fewer at the end of the data)."""
        group = []
        for _ in range(self.cfg.accumulate):
            item = next(stream, None)
            if item is None:
                break
            group.append(item)
        return group
