"""The training loop: optimiser and schedule, the step, and when to validate, checkpoint and stop.

A run dir holds everything a run makes. ``train`` resumes from ``checkpoints/last.pt`` when it
exists: model, optimiser, schedule, step, epoch, position in the epoch's batch order and RNG
states come back, so an interrupted run continues exactly as if it had not stopped.

The Trainer's collaborators each do one thing: nmt_cli/training/run_state.py says what a checkpoint
holds
(``Progress``, ``checkpoint_payload``), where a run starts and how it resumes (``start_run``), and
feeds the batches on from the saved position (``TrainingBatches``); ``Validator``
(nmt_cli/training/validation.py) measures a model, ``CheckpointPolicy``
(nmt_cli/training/checkpoint_policy.py)
writes, ranks, averages checkpoints and decides early stopping, ``WeightAverage``
(nmt_cli/training/ema.py) keeps the moving average of the weights, and ``TrainingLog``
(nmt_cli/training/log.py) reports to the console and the run's files, summary.json included
(``run_summary``).
"""

from __future__ import annotations

import copy
import logging
import math
import os
import signal
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from nmt_cli.config.sections import Recipe
from nmt_cli.data.directions import EpochMix, groups_of
from nmt_cli.data.store import load_meta, load_split, load_text
from nmt_cli.data.tokenizer import Tokenizer
from nmt_cli.decoding.language_vocabulary import count_languages
from nmt_cli.decoding.shortlist import learn_split_shortlist, load_shortlist, save_shortlist
from nmt_cli.model import build_model
from nmt_cli.runtime.device import autocast_context, pick_device, resolve_precision
from nmt_cli.runtime.errors import TrainingInterrupted, UserError
from nmt_cli.runtime.interrupts import Interrupted
from nmt_cli.runtime.memory import HeapTrimmer, bound_primitive_cache, release_free_heap
from nmt_cli.training.checkpoint_policy import CheckpointPolicy
from nmt_cli.training.ema import WeightAverage
from nmt_cli.training.log import LoopTotals, TrainingLog, run_summary, setup_logging
from nmt_cli.training.run_state import Progress, TrainingBatches, checkpoint_payload, start_run
from nmt_cli.training.schedule import LearningRate, sampling_probability
from nmt_cli.training.validation import Validator, validate

__all__ = ["Progress", "Trainer", "make_optimizer", "setup_logging", "train", "validate"]

log = logging.getLogger("nmt.train")

# Steps between two hand-backs of the freed heap (nmt_cli/runtime/memory.py).
TRIM_EVERY_STEPS = 10


def make_optimizer(model: torch.nn.Module, recipe: Recipe) -> torch.optim.Optimizer:
    t = recipe.train
    params = [p for p in model.parameters() if p.requires_grad]
    if t.optimizer == "sgd":
        return torch.optim.SGD(params, lr=t.lr, weight_decay=t.weight_decay)
    cls = torch.optim.AdamW if t.optimizer == "adamw" else torch.optim.Adam
    return cls(params, lr=t.lr, weight_decay=t.weight_decay)


class Trainer:
    def __init__(
        self,
        recipe: Recipe,
        run_dir: Path,
        *,
        device: str = "auto",
        restart: bool = False,
        progress_bar: bool | None = None,
    ):
        bound_primitive_cache()  # before the first bf16 product; see nmt_cli/runtime/memory.py
        self.recipe, self.run_dir = recipe, Path(run_dir)
        self.cfg = recipe.train
        self.heap = HeapTrimmer(TRIM_EVERY_STEPS)
        self.distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
        self.rank = int(os.environ.get("RANK", "0"))
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.device = pick_device(device)
        if self.distributed:
            self._init_distributed()
        self.precision = resolve_precision(self.cfg.precision, self.device)
        self.main = self.rank == 0
        self.meta = load_meta(self.run_dir)
        self.tokenizer = Tokenizer.load(self.run_dir)
        self.train_split = load_split(self.run_dir, "train")
        self.mix = EpochMix.of(recipe, groups_of(self.meta, "train"))
        self.batches = TrainingBatches(
            self.run_dir,
            self.train_split,
            self.tokenizer,
            self.cfg,
            self.rank,
            self.world,
            self.mix,
            recipe.data.augment_case,
        )
        self.validator = Validator(
            load_split(self.run_dir, "valid"),
            load_text(self.run_dir, "valid", "tgt"),
            self.tokenizer,
            recipe,
            self.device,
            self.autocast,
            groups_of(self.meta, "valid"),
        )
        self.shortlist = load_shortlist(self.run_dir)
        if self.shortlist is None:  # data preprocessed before shortlists existed
            self.shortlist = learn_split_shortlist(self.run_dir / "data", self.tokenizer)
            if self.main:
                save_shortlist(self.run_dir / "data", self.shortlist)
        self.languages = count_languages(self.run_dir / "data", self.meta)
        torch.manual_seed(self.cfg.seed)
        self.model = build_model(
            recipe.model, self.tokenizer.src_vocab_size, self.tokenizer.tgt_vocab_size
        ).to(self.device)
        self.optimizer = make_optimizer(self.model, recipe)
        self.lr = LearningRate(self.cfg)
        self.progress = Progress()
        self.checkpoints = CheckpointPolicy(self.run_dir, self.cfg, self._payload, writes=self.main)
        self.log = TrainingLog(self.run_dir, self.cfg, enabled=self.main, progress_bar=progress_bar)
        resumed = start_run(
            self.checkpoints,
            recipe,
            self.model,
            self.optimizer,
            self.lr,
            restart=restart,
            announce=self.main,
        )
        if resumed is not None:
            self.progress = resumed.progress
        self.resumed_from = None if resumed is None else self.progress.step
        self.ema = WeightAverage(self.model, self.cfg.ema_decay) if self.cfg.ema_decay else None
        if self.ema is not None and resumed is not None and resumed.average is not None:
            self.ema.load_state_dict(*resumed.average)
        self.train_model = self.model
        if self.distributed:
            self.train_model = DistributedDataParallel(
                self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None
            )
        self.scaler = torch.amp.GradScaler("cuda") if self.precision == "fp16" else None
        self.stop_signal: int | None = None
        self.saving_on_signal = False

    # ------------------------------------------------------------------ setup

    def _init_distributed(self) -> None:
        backend = "nccl" if self.device.type == "cuda" else "gloo"
        if self.device.type == "cuda":
            local = int(os.environ.get("LOCAL_RANK", "0"))
            torch.cuda.set_device(local)
            self.device = torch.device("cuda", local)
        dist.init_process_group(backend)

    def autocast(self):
        return autocast_context(self.device, self.precision)

    def _payload(self) -> dict:
        """What a checkpoint holds now (nmt_cli/training/run_state.py)."""
        return checkpoint_payload(
            self.model,
            self.optimizer,
            self.lr,
            self.progress,
            self.recipe,
            self.tokenizer,
            self.shortlist,
            self.ema,
            self.languages,
        )

    def save_checkpoint(self, best: bool = False) -> Path | None:
        return self.checkpoints.save(self.progress.step, best=best)

    # ------------------------------------------------------------------ ranks and signals

    def _agree(self, flag: bool) -> bool:
        """True on every rank when it is true on any (one tiny all-reduce per call under DDP)."""
        return self._max_over_ranks(1.0 if flag else 0.0) > 0

    def _max_over_ranks(self, value: float) -> float:
        """The largest of each rank's value, so time-driven decisions are the same on every rank."""
        if not self.distributed:
            return value
        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t.item())

    def _sum_over_ranks(self, *counts: int) -> tuple[int, ...]:
        """Each count summed over the ranks of a distributed run."""
        t = torch.tensor(counts, dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        return tuple(int(c) for c in t.tolist())

    def _on_signal(self, signum, frame):
        # It may run in the middle of a log call: it writes to the stderr descriptor directly, since
        # logging's handlers are not reentrant.
        name = signal.Signals(signum).name
        if self.saving_on_signal:  # stopping a checkpoint write half-way would only lose it
            _say(
                f"{name} received: still writing the checkpoint; training stops once it is written"
            )
            return
        if self.stop_signal is not None:  # a second Ctrl-C: stop now, checkpoints stay intact
            raise Interrupted(
                signum,
                f"training stopped at step {self.progress.step} without a new "
                "checkpoint; run the same command to resume from the last one",
            )
        self.stop_signal = signum
        _say(f"{name} received: finishing this step, then checkpointing (again to stop at once)")

    # ------------------------------------------------------------------ validation and averaging

    @property
    def eval_model(self) -> torch.nn.Module:
        """What validation measures and checkpoints hand to translate: the moving average when
        on."""
        return self.ema.module if self.ema is not None else self.model

    def _validate(self) -> bool:
        """Validate, keep the best checkpoint; True when early stopping says stop."""
        if not self.main:
            return False
        p = self.progress
        self.log.validating(p.step, self.validator.sentences)
        result = self.validator(self.eval_model)
        improved = self.checkpoints.judge(p, self.validator.score(result))
        lowered = self.lr.observe(self.validator.raw(result), self.cfg.valid_metric == "bleu")
        self.log.validation(p.history, p.step, result, improved, lowered)
        self.checkpoints.save(p.step, best=improved)
        release_free_heap()  # decoding's tensors are gone; their pages need not stay
        return self.checkpoints.patience_exhausted(p)

    def _average(self) -> dict | None:
        """The newest numbered checkpoints averaged and validated (``train.average_last``)."""

        def evaluate(state: dict) -> dict:
            self.log.validating(
                self.progress.step, self.validator.sentences, " the average of checkpoints"
            )
            model = copy.deepcopy(self.model)
            model.load_state_dict(state)
            return self.validator(model)

        outcome = self.checkpoints.average(self.progress, evaluate, self.validator.score)
        return None if outcome is None else self.log.averaged(*outcome)

    # ------------------------------------------------------------------ the loop

    def train(self) -> dict:
        cfg, p = self.cfg, self.progress
        self.log.describe(
            self.model.parameter_count(),
            self.recipe.model,
            self.device,
            self.precision,
            len(self.train_split),
            None if self.mix is None else self.mix.summary(),
        )
        handlers = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        self.log.start(p.step)
        start = time.perf_counter()
        done = LoopTotals()
        reason = "finished"
        self.model.train()
        batches = self.batches.stream(p)
        try:
            while True:
                if cfg.max_steps and p.step >= cfg.max_steps:
                    reason = f"reached max_steps {cfg.max_steps}"
                    break
                minutes = self._max_over_ranks(time.perf_counter() - start) / 60
                if cfg.max_minutes and minutes >= cfg.max_minutes:
                    reason = f"reached max_minutes {cfg.max_minutes:g}"
                    break
                t0 = time.perf_counter()
                group = self.batches.next_group(batches)
                t1 = time.perf_counter()
                done.data_wait_s += t1 - t0
                if not group:
                    reason = f"reached max_epochs {cfg.max_epochs}"
                    break
                loss_value, ntok, nsrc = self._step(group, minutes)
                self.heap.tick()
                done.train_s += time.perf_counter() - t1
                if loss_value is not None:
                    done.steps += 1
                    done.tgt_tokens += ntok
                    done.src_tokens += nsrc
                self.log.step(
                    p.step,
                    p.epoch,
                    loss_value,
                    self.optimizer.param_groups[0]["lr"],
                    done.tgt_tokens,
                    done.train_s,
                    done.data_wait_s,
                )
                if self._agree(self.stop_signal is not None):
                    self.stop_signal = self.stop_signal or signal.SIGTERM
                    name = signal.Signals(self.stop_signal).name
                    log.info(f"{name} received: checkpointing step {p.step}")
                    break
                stop_early = False
                if p.step % cfg.valid_every == 0:
                    stop_early = self._validate()
                elif p.step % cfg.checkpoint_every == 0:
                    self.checkpoints.save(p.step)
                if self._agree(stop_early):
                    reason = f"early stopping: no gain for {cfg.patience} validations"
                    break
            self.log.close_bar()
            averaged = self._finish_checkpoints(done.steps)
        finally:
            for s, h in handlers.items():
                signal.signal(s, h)
            self.log.close_bar()
        wall_s = time.perf_counter() - start
        if self.distributed:  # throughput is the job's: every rank's tokens
            done.tgt_tokens, done.src_tokens = self._sum_over_ranks(
                done.tgt_tokens, done.src_tokens
            )
        if self.stop_signal is not None:
            reason = f"interrupted by {signal.Signals(self.stop_signal).name}"
        summary = run_summary(
            p,
            done,
            wall_s=wall_s,
            stop_reason=reason,
            resumed_from=self.resumed_from,
            valid_metric=self.cfg.valid_metric,
            averaged=averaged,
            device=self.device,
        )
        self.log.finish(summary)
        if self.stop_signal is not None:
            raise TrainingInterrupted(self.stop_signal)
        return summary

    def _finish_checkpoints(self, steps_done: int) -> dict | None:
        """After the loop: validate the last step unless it just was, or checkpoint an
        interruption (a second signal meanwhile waits for the write); then average."""
        p = self.progress
        if self.stop_signal is not None:
            self.saving_on_signal = True
            try:
                self.checkpoints.save(p.step, interrupted=True)
            finally:
                self.saving_on_signal = False
            return None
        if not p.history or p.history[-1]["step"] != p.step:
            if steps_done:
                self._validate()
        else:
            self.checkpoints.save(p.step)
        if self.main and steps_done and self.cfg.average_last and self.stop_signal is None:
            return self._average()
        return None

    def _step(self, group, minutes: float) -> tuple[float | None, int, int]:
        """One optimiser step over ``accumulate`` batches; None as loss when it was not finite."""
        cfg, p = self.cfg, self.progress
        lr = self.lr(p.step + 1, minutes)
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        eps = sampling_probability(cfg, p.step)
        self.optimizer.zero_grad(set_to_none=True)
        total_loss, ntok, nsrc = 0.0, 0, 0
        finite = True
        # Every target token weighs the same across the accumulated batches, as in one big batch.
        group_tokens = sum(batch.tgt_tokens for _, batch in group)
        for _, batch in group:
            batch = batch.to(self.device)
            with self.autocast():
                summed, _ = self.train_model(
                    batch.src,
                    batch.src_lengths,
                    batch.tgt_in,
                    eps,
                    batch.tgt_out,
                    cfg.label_smoothing,
                )
            loss = summed / group_tokens
            if self.scaler is not None:
                self.scaler.scale(loss).backward()
            else:
                loss.backward()
            value = float(loss.detach())
            finite &= math.isfinite(value)
            total_loss += value
            ntok += batch.tgt_tokens
            nsrc += int(batch.src_lengths.sum())
        p.position = group[-1][0] + self.world
        p.step += 1
        if not finite:
            p.nan_in_row += 1
            p.nan_total += 1
            self.optimizer.zero_grad(set_to_none=True)
            log.warning(
                f"warning: non-finite loss at step {p.step}; batch skipped "
                f"({p.nan_in_row} in a row, {p.nan_total} in all)"
            )
            if p.nan_in_row >= cfg.max_nan_batches:
                raise UserError(
                    f"training diverged: {p.nan_in_row} non-finite losses in a row at step "
                    f"{p.step}; lower train.lr or raise train.clip_norm"
                )
            return None, 0, 0
        p.nan_in_row = 0
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        if cfg.clip_norm:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.clip_norm)
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        if self.ema is not None:
            self.ema.update(self.model)
        return total_loss, ntok, nsrc


def _say(message: str) -> None:
    try:
        os.write(2, (message + "\n").encode())
    except OSError:
        pass


def train(
    recipe: Recipe,
    run_dir: Path,
    *,
    device: str = "auto",
    restart: bool = False,
    progress_bar: bool | None = None,
) -> dict:
    setup_logging(Path(run_dir))
    return Trainer(
        recipe, Path(run_dir), device=device, restart=restart, progress_bar=progress_bar
    ).train()
