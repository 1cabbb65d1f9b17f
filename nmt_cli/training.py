"""The training loop: token batches, optimiser and schedule, and the step.

A run dir holds everything a run makes. ``train`` resumes from ``checkpoints/last.pt`` when it
exists: model, optimiser, schedule, step, epoch, position in the epoch's batch order and RNG
states come back, so an interrupted run continues exactly as if it had not stopped.

The Trainer's collaborators each do one thing: ``Validator`` (nmt_cli/validation.py) measures a
model, ``CheckpointPolicy`` (nmt_cli/checkpoint_policy.py) writes, ranks, averages checkpoints and
decides early stopping, ``WeightAverage`` (nmt_cli/ema.py) keeps the moving average of the
weights, and ``TrainingLog`` (nmt_cli/train_log.py) reports to the console and the run's files.
"""

from __future__ import annotations

import copy
import logging
import math
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from nmt_cli import checkpoint as ckpt
from nmt_cli.batches import iterate_epoch
from nmt_cli.checkpoint_policy import CheckpointPolicy
from nmt_cli.config import Recipe
from nmt_cli.device import (
    autocast_context,
    native_bf16,
    peak_rss_mb,
    pick_device,
    resolve_precision,
)
from nmt_cli.ema import WeightAverage
from nmt_cli.errors import CheckpointError, DataError, TrainingInterrupted, UserError
from nmt_cli.interrupts import Interrupted
from nmt_cli.model import build_model
from nmt_cli.recipes import recipe_differences
from nmt_cli.schedule import LearningRate, sampling_probability
from nmt_cli.store import (
    EncodedSplit,
    learn_split_shortlist,
    load_meta,
    load_shortlist,
    load_split,
    load_text,
    sampled_split,
    save_shortlist,
)
from nmt_cli.tokenizer import Tokenizer
from nmt_cli.train_log import TrainingLog, setup_logging
from nmt_cli.validation import Validator, validate

__all__ = ["Progress", "Trainer", "make_optimizer", "setup_logging", "train", "validate"]

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
        self.recipe, self.run_dir = recipe, Path(run_dir)
        self.cfg = recipe.train
        self.ckpt_dir = self.run_dir / ckpt.CHECKPOINT_DIR
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
        self.train_text = self._train_text() if self.cfg.subword_alpha else None
        self.validator = Validator(
            load_split(self.run_dir, "valid"),
            load_text(self.run_dir, "valid", "tgt"),
            self.tokenizer,
            recipe,
            self.device,
            self.autocast,
        )
        self.shortlist = load_shortlist(self.run_dir)
        if self.shortlist is None:  # data preprocessed before shortlists existed
            self.shortlist = learn_split_shortlist(self.run_dir / "data", self.tokenizer)
            if self.main:
                save_shortlist(self.run_dir / "data", self.shortlist)
        torch.manual_seed(self.cfg.seed)
        self.model = build_model(
            recipe.model, self.tokenizer.src_vocab_size, self.tokenizer.tgt_vocab_size
        ).to(self.device)
        self.optimizer = make_optimizer(self.model, recipe)
        self.lr = LearningRate(self.cfg)
        self.progress = Progress()
        self.checkpoints = CheckpointPolicy(self.run_dir, self.cfg, self._payload, writes=self.main)
        self.log = TrainingLog(self.run_dir, self.cfg, enabled=self.main, progress_bar=progress_bar)
        self.resumed_from = None
        self._resumed_average: tuple[dict, int] | None = None
        last = self.ckpt_dir / "last.pt"
        if last.exists() and not restart:
            self._resume(last)
        elif restart:
            self.checkpoints.clear()
        if self.resumed_from is None and self.cfg.init_from:
            from nmt_cli.finetune import load_initial_weights

            start = load_initial_weights(self.model, recipe)
            if self.main:
                log.info(
                    f"fine-tuning: starting from the weights of {start} with a fresh optimiser and schedule"
                )
        self.ema = WeightAverage(self.model, self.cfg.ema_decay) if self.cfg.ema_decay else None
        if self.ema is not None and self._resumed_average is not None:
            self.ema.load_state_dict(*self._resumed_average)
        self._resumed_average = None
        self.train_model = self.model
        if self.distributed:
            from torch.nn.parallel import DistributedDataParallel

            self.train_model = DistributedDataParallel(
                self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None
            )
        self.scaler = torch.amp.GradScaler("cuda") if self.precision == "fp16" else None
        self.stop_signal: int | None = None
        self.saving_on_signal = False

    # ------------------------------------------------------------------ setup

    def _init_distributed(self) -> None:
        import torch.distributed as dist

        backend = "nccl" if self.device.type == "cuda" else "gloo"
        if self.device.type == "cuda":
            local = int(os.environ.get("LOCAL_RANK", "0"))
            torch.cuda.set_device(local)
            self.device = torch.device("cuda", local)
        dist.init_process_group(backend)

    def autocast(self):
        return autocast_context(self.device, self.precision)

    def _resume(self, path: Path) -> None:
        payload = ckpt.load(path)
        blocking, allowed = recipe_differences(payload["recipe"], self.recipe.to_dict())
        if blocking:
            raise CheckpointError(
                f"{path}: the recipe changed since this checkpoint in keys that "
                f"matter: {', '.join(blocking)}; use --restart to start over"
            )
        # With train.ema_decay the checkpoint's "model" is the moving average (what translate and
        # validation use) and "raw_model" the weights training goes on from.
        raw = payload.get("raw_model")
        try:
            self.model.load_state_dict(raw if raw is not None else payload["model"])
            self.optimizer.load_state_dict(payload["optimizer"])
        except (RuntimeError, ValueError, KeyError) as exc:
            raise CheckpointError(
                f"{path}: does not fit this model ({str(exc)[:100]}); use --restart"
            ) from None
        if raw is not None:
            self._resumed_average = (payload["model"], int(payload.get("ema_updates", 1)))
        self.lr.load_state_dict(payload["schedule"])
        p = payload["progress"]
        self.progress = Progress(**p)
        torch.set_rng_state(payload["rng"]["torch"])
        if torch.cuda.is_available() and "cuda" in payload["rng"]:
            torch.cuda.set_rng_state_all(list(payload["rng"]["cuda"]))
        self.resumed_from = self.progress.step
        if self.main:
            log.info(
                f"resuming from step {self.progress.step} (epoch {self.progress.epoch}, "
                f"batch {self.progress.position})"
            )
            if allowed:
                log.info(
                    f"recipe keys changed since the checkpoint (allowed): {', '.join(allowed)}"
                )

    def _payload(self) -> dict:
        """Everything a checkpoint holds; with EMA, "model" is the average and "raw_model" the weights."""
        rng = {"torch": torch.get_rng_state()}
        if torch.cuda.is_available():
            rng["cuda"] = torch.cuda.get_rng_state_all()
        p = self.progress
        payload = {
            "format": ckpt.FORMAT,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "schedule": self.lr.state_dict(),
            "progress": {k: getattr(p, k) for k in p.__dataclass_fields__},
            "rng": rng,
            "recipe": self.recipe.to_dict(),
            "tokenizer": ckpt.tokenizer_payload(self.tokenizer),
            "shortlist": self.shortlist.to_payload(),
        }
        if self.ema is not None:
            payload["raw_model"] = payload["model"]
            payload["model"] = self.ema.state_dict()
            payload["ema_updates"] = self.ema.updates
        return payload

    def save_checkpoint(self, best: bool = False) -> Path | None:
        return self.checkpoints.save(self.progress.step, best=best)

    # ------------------------------------------------------------------ data

    def _train_text(self) -> tuple[list[str], list[str]]:
        """The stored training sentences, which subword regularisation re-segments each epoch."""
        try:
            text = load_text(self.run_dir, "train", "src"), load_text(self.run_dir, "train", "tgt")
        except DataError:
            text = None
        if text is None or not len(text[0]) == len(text[1]) == len(self.train_split):
            raise DataError(
                f"{self.run_dir / 'data'}: train.subword_alpha needs the training text "
                "(train.src.txt, train.tgt.txt) that nmt preprocess now stores; re-run it"
            )
        return text

    def _epoch_split(self) -> EncodedSplit:
        if self.train_text is None:
            return self.train_split
        return sampled_split(
            *self.train_text,
            self.tokenizer,
            self.cfg.subword_alpha,
            self.cfg.seed,
            self.progress.epoch,
        )

    def _batches(self):
        """(position, batch) across epochs from the saved position, until max_epochs."""
        while not self.cfg.max_epochs or self.progress.epoch < self.cfg.max_epochs:
            for pos, batch in iterate_epoch(
                self._epoch_split(),
                self.cfg.batch_tokens,
                self.cfg.seed,
                self.progress.epoch,
                self.progress.position,
                self.rank,
                self.world,
            ):
                yield pos, batch
            self.progress.epoch += 1
            self.progress.position = 0

    def _next_group(self, batches) -> list:
        """The ``accumulate`` batches of the next optimiser step (fewer at the end of the data)."""
        group = []
        for _ in range(self.cfg.accumulate):
            item = next(batches, None)
            if item is None:
                break
            group.append(item)
        return group

    # ------------------------------------------------------------------ ranks and signals

    def _agree(self, flag: bool) -> bool:
        """True on every rank when it is true on any (one tiny all-reduce per call under DDP)."""
        return self._max_over_ranks(1.0 if flag else 0.0) > 0

    def _max_over_ranks(self, value: float) -> float:
        """The largest of each rank's value, so time-driven decisions are the same on every rank."""
        if not self.distributed:
            return value
        import torch.distributed as dist

        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t.item())

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
        """What validation measures and checkpoints hand to translate: the moving average when on."""
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
        self._describe()
        handlers = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        self.log.start(p.step)
        start = time.perf_counter()
        train_time = data_wait = 0.0
        tgt_tokens = src_tokens = 0
        steps_done = 0
        reason = "finished"
        self.model.train()
        batches = self._batches()
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
                group = self._next_group(batches)
                t1 = time.perf_counter()
                data_wait += t1 - t0
                if not group:
                    reason = f"reached max_epochs {cfg.max_epochs}"
                    break
                loss_value, ntok, nsrc = self._step(group, minutes)
                train_time += time.perf_counter() - t1
                if loss_value is not None:
                    steps_done += 1
                    tgt_tokens += ntok
                    src_tokens += nsrc
                self.log.step(
                    p.step,
                    p.epoch,
                    loss_value,
                    self.optimizer.param_groups[0]["lr"],
                    tgt_tokens,
                    train_time,
                    data_wait,
                )
                if self._agree(self.stop_signal is not None):
                    self.stop_signal = self.stop_signal or signal.SIGTERM
                    log.info(
                        f"{signal.Signals(self.stop_signal).name} received: checkpointing step {p.step}"
                    )
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
            averaged = self._finish_checkpoints(steps_done)
        finally:
            for s, h in handlers.items():
                signal.signal(s, h)
            self.log.close_bar()
        summary = self._summary(
            reason,
            time.perf_counter() - start,
            steps_done,
            train_time,
            data_wait,
            tgt_tokens,
            src_tokens,
            averaged,
        )
        self.log.finish(summary)
        if self.stop_signal is not None:
            raise TrainingInterrupted(self.stop_signal)
        return summary

    def _describe(self) -> None:
        n_params = self.model.parameter_count()
        self.log.model_summary(
            f"model: {n_params / 1e6:.2f}M parameters, {self.recipe.model.rnn} "
            f"{self.recipe.model.attention} attention, {self.recipe.model.decoder} "
            f"decoder; device {self.device}, {self.precision}{self._threads()}; "
            f"{len(self.train_split)} training pairs"
        )
        if self.main and self.precision == "bf16" and not native_bf16(self.device):
            log.warning(
                "warning: train.precision bf16 has no hardware support on this device and "
                "runs far slower than fp32; use precision auto or fp32"
            )

    def _threads(self) -> str:
        if self.device.type != "cpu":
            return ""
        n = torch.get_num_threads()
        return f", {n} CPU thread{'s' if n > 1 else ''} (--threads to change)"

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

    def _summary(
        self,
        reason: str,
        wall: float,
        steps_done: int,
        train_time: float,
        data_wait: float,
        tgt_tokens: int,
        src_tokens: int,
        averaged: dict | None,
    ) -> dict:
        p = self.progress
        if self.distributed:  # throughput is the job's: every rank's tokens
            import torch.distributed as dist

            counts = torch.tensor([tgt_tokens, src_tokens], dtype=torch.float64, device=self.device)
            dist.all_reduce(counts)
            tgt_tokens, src_tokens = (int(c) for c in counts.tolist())
        summary = {
            "steps": steps_done,
            "final_step": p.step,
            "epoch": p.epoch,
            "wall_s": round(wall, 2),
            "train_s": round(train_time, 2),
            "data_wait_s": round(data_wait, 3),
            "tgt_tokens": tgt_tokens,
            "src_tokens": src_tokens,
            "tgt_tokens_per_s": round(tgt_tokens / max(train_time, 1e-9), 1),
            "src_tokens_per_s": round(src_tokens / max(train_time, 1e-9), 1),
            "peak_rss_mb": round(peak_rss_mb(), 1),
            "nan_batches": p.nan_total,
            "best_step": p.best_step,
            "stop_reason": reason
            if self.stop_signal is None
            else f"interrupted by {signal.Signals(self.stop_signal).name}",
            "resumed_from": self.resumed_from,
            "validations": p.history[-5:],
        }
        if self.cfg.valid_metric == "bleu" and p.best_metric is not None:
            summary["best_valid_bleu"] = round(p.best_metric, 2)
        if averaged is not None:
            summary["averaged"] = averaged
        if torch.cuda.is_available() and self.device.type == "cuda":
            summary["peak_gpu_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        return summary

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
