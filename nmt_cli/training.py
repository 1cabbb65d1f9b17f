"""The training loop: token batches, optimiser and schedule, validation, checkpoints, resume.

A run dir holds everything a run makes. ``train`` resumes from ``checkpoints/last.pt`` when it
exists: model, optimiser, schedule, step, epoch, position in the epoch's batch order and RNG
states come back, so an interrupted run continues exactly as if it had not stopped.
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import sacrebleu
import torch

from nmt_cli import checkpoint as ckpt
from nmt_cli.config import Recipe, recipe_differences
from nmt_cli.data import (EncodedSplit, iterate_epoch, learn_split_shortlist, load_meta, load_shortlist,
                          load_split, load_text, make_batch, sampled_split, save_shortlist)
from nmt_cli.device import autocast_context, native_bf16, peak_rss_mb, pick_device, resolve_precision
from nmt_cli.ema import WeightAverage
from nmt_cli.errors import CheckpointError, DataError, TrainingInterrupted, UserError
from nmt_cli.model import build_model
from nmt_cli.schedule import LearningRate, sampling_probability
from nmt_cli.tokenizer import PAD, Tokenizer
from nmt_cli.translate import DecodeOptions, decode_ids

log = logging.getLogger("nmt.train")


@dataclass
class Progress:
    step: int = 0
    epoch: int = 0
    position: int = 0               # next batch index within the epoch's batch order
    best_metric: float | None = None
    best_step: int = 0
    bad_validations: int = 0
    nan_in_row: int = 0
    nan_total: int = 0
    history: list = field(default_factory=list)  # validation results, for summary.json


def setup_logging(run_dir: Path) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger("nmt")
    root.setLevel(logging.INFO)
    for h in list(root.handlers):
        root.removeHandler(h)
        h.close()
    file_handler = logging.FileHandler(run_dir / "train.log", encoding="utf-8")
    file_handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%Y-%m-%d %H:%M:%S"))
    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(logging.Formatter("%(message)s"))
    root.addHandler(file_handler)
    root.addHandler(console)
    root.propagate = False


def make_optimizer(model: torch.nn.Module, recipe: Recipe) -> torch.optim.Optimizer:
    t = recipe.train
    params = [p for p in model.parameters() if p.requires_grad]
    if t.optimizer == "sgd":
        return torch.optim.SGD(params, lr=t.lr, weight_decay=t.weight_decay)
    cls = torch.optim.AdamW if t.optimizer == "adamw" else torch.optim.Adam
    return cls(params, lr=t.lr, weight_decay=t.weight_decay)


@torch.no_grad()
def validate(model, split: EncodedSplit, refs: list[str], tokenizer: Tokenizer, recipe: Recipe,
             device: torch.device, autocast) -> dict:
    """Loss, perplexity and greedy-decoding BLEU on (at most valid_max_sentences of) the valid split."""
    model.eval()
    n = min(len(split), recipe.train.valid_max_sentences)
    total_nll, total_tokens = 0.0, 0
    order = np.argsort(np.asarray(split.tgt.lengths[:n]), kind="stable")
    for start in range(0, n, 64):
        batch = make_batch(split, order[start:start + 64]).to(device)
        with autocast():
            summed, _ = model(batch.src, batch.src_lengths, batch.tgt_in, tgt_out=batch.tgt_out)
        total_nll += float(summed)
        total_tokens += batch.tgt_tokens
    sources = [list(split.src.get(i)) for i in range(n)]
    opts = DecodeOptions(beam_size=1, max_len_ratio=recipe.decode.max_len_ratio,
                         max_len_const=recipe.decode.max_len_const,
                         min_len=recipe.decode.min_len, batch_size=100)
    with autocast():
        hyps = decode_ids(model, [s or [PAD] for s in sources], opts, device)
    texts = tokenizer.decode_tgt([h[0].tokens for h in hyps])
    bleu = sacrebleu.corpus_bleu(texts, [refs[:n]]).score
    model.train()
    loss = total_nll / max(total_tokens, 1)
    return {"loss": loss, "ppl": math.exp(min(loss, 50.0)), "bleu": bleu, "sentences": n,
            "samples": list(zip(texts[:3], refs[:3]))}


class Trainer:
    def __init__(self, recipe: Recipe, run_dir: Path, *, device: str = "auto", restart: bool = False,
                 progress_bar: bool | None = None):
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
        self.progress_bar = progress_bar
        self.meta = load_meta(self.run_dir)
        self.tokenizer = Tokenizer.load(self.run_dir)
        self.train_split = load_split(self.run_dir, "train")
        self.train_text = self._train_text() if self.cfg.subword_alpha else None
        self.valid_split = load_split(self.run_dir, "valid")
        self.valid_refs = load_text(self.run_dir, "valid", "tgt")
        self.shortlist = load_shortlist(self.run_dir)
        if self.shortlist is None:  # data preprocessed before shortlists existed
            self.shortlist = learn_split_shortlist(self.run_dir / "data", self.tokenizer)
            if self.main:
                save_shortlist(self.run_dir / "data", self.shortlist)
        torch.manual_seed(self.cfg.seed)
        self.model = build_model(recipe.model, self.tokenizer.src_vocab_size,
                                 self.tokenizer.tgt_vocab_size).to(self.device)
        self.optimizer = make_optimizer(self.model, recipe)
        self.lr = LearningRate(self.cfg)
        self.progress = Progress()
        self.resumed_from = None
        self._resumed_average: tuple[dict, int] | None = None
        last = self.ckpt_dir / "last.pt"
        if last.exists() and not restart:
            self._resume(last)
        elif restart and self.ckpt_dir.exists() and self.main:
            for p in self.ckpt_dir.glob("*.pt"):
                p.unlink()
        if self.resumed_from is None and self.cfg.init_from:
            from nmt_cli.finetune import load_initial_weights
            start = load_initial_weights(self.model, recipe)
            if self.main:
                log.info(f"fine-tuning: starting from the weights of {start} with a fresh optimiser and schedule")
        self.ema = WeightAverage(self.model, self.cfg.ema_decay) if self.cfg.ema_decay else None
        if self.ema is not None and self._resumed_average is not None:
            self.ema.load_state_dict(*self._resumed_average)
        self._resumed_average = None
        self.train_model = self.model
        if self.distributed:
            from torch.nn.parallel import DistributedDataParallel
            self.train_model = DistributedDataParallel(
                self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        self.scaler = torch.amp.GradScaler("cuda") if self.precision == "fp16" else None
        self.stop_signal: int | None = None

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
            raise CheckpointError(f"{path}: the recipe changed since this checkpoint in keys that "
                                  f"matter: {', '.join(blocking)}; use --restart to start over")
        # With train.ema_decay the checkpoint's "model" is the moving average (what translate and
        # validation use) and "raw_model" the weights training goes on from.
        raw = payload.get("raw_model")
        try:
            self.model.load_state_dict(raw if raw is not None else payload["model"])
            self.optimizer.load_state_dict(payload["optimizer"])
        except (RuntimeError, ValueError, KeyError) as exc:
            raise CheckpointError(f"{path}: does not fit this model ({str(exc)[:100]}); use --restart") from None
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
            log.info(f"resuming from step {self.progress.step} (epoch {self.progress.epoch}, "
                     f"batch {self.progress.position})")
            if allowed:
                log.info(f"recipe keys changed since the checkpoint (allowed): {', '.join(allowed)}")

    # ------------------------------------------------------------------ checkpoints

    def _payload(self) -> dict:
        rng = {"torch": torch.get_rng_state()}
        if torch.cuda.is_available():
            rng["cuda"] = torch.cuda.get_rng_state_all()
        p = self.progress
        payload = {"format": ckpt.FORMAT, "model": self.model.state_dict(),
                   "optimizer": self.optimizer.state_dict(), "schedule": self.lr.state_dict(),
                   "progress": {k: getattr(p, k) for k in p.__dataclass_fields__},
                   "rng": rng, "recipe": self.recipe.to_dict(),
                   "tokenizer": ckpt.tokenizer_payload(self.tokenizer),
                   "shortlist": self.shortlist.to_payload()}
        if self.ema is not None:
            payload["raw_model"] = payload["model"]
            payload["model"] = self.ema.state_dict()
            payload["ema_updates"] = self.ema.updates
        return payload

    def save_checkpoint(self, best: bool = False) -> Path | None:
        if not self.main:
            return None
        step_path = self.ckpt_dir / f"step-{self.progress.step}.pt"
        try:
            ckpt.save_atomic(self._payload(), step_path)
            ckpt.link_atomic(step_path, self.ckpt_dir / "last.pt")
            if best:
                ckpt.link_atomic(step_path, self.ckpt_dir / "best.pt")
        except OSError as exc:
            log.warning(f"warning: could not write checkpoint {step_path} ({exc.strerror or exc}); "
                        "the previous checkpoint is kept and training goes on")
            return None
        for old in ckpt.step_checkpoints(self.run_dir)[:-self.cfg.keep_checkpoints]:
            old.unlink(missing_ok=True)
        return step_path

    # ------------------------------------------------------------------ loop pieces

    def _train_text(self) -> tuple[list[str], list[str]]:
        """The stored training sentences, which subword regularisation re-segments each epoch."""
        try:
            text = load_text(self.run_dir, "train", "src"), load_text(self.run_dir, "train", "tgt")
        except DataError:
            text = None
        if text is None or not len(text[0]) == len(text[1]) == len(self.train_split):
            raise DataError(f"{self.run_dir / 'data'}: train.subword_alpha needs the training text "
                            "(train.src.txt, train.tgt.txt) that nmt preprocess now stores; re-run it")
        return text

    def _epoch_split(self) -> EncodedSplit:
        if self.train_text is None:
            return self.train_split
        return sampled_split(*self.train_text, self.tokenizer, self.cfg.subword_alpha, self.cfg.seed,
                             self.progress.epoch)

    def _batches(self):
        """(position, batch) across epochs from the saved position, until max_epochs."""
        while not self.cfg.max_epochs or self.progress.epoch < self.cfg.max_epochs:
            for pos, batch in iterate_epoch(self._epoch_split(), self.cfg.batch_tokens, self.cfg.seed,
                                            self.progress.epoch, self.progress.position,
                                            self.rank, self.world):
                yield pos, batch
            self.progress.epoch += 1
            self.progress.position = 0

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
        if self.stop_signal is not None:  # a second Ctrl-C: stop now, checkpoints stay intact
            raise KeyboardInterrupt
        self.stop_signal = signum
        log.info(f"{signal.Signals(signum).name} received: finishing this step, then checkpointing")

    @property
    def eval_model(self) -> torch.nn.Module:
        """What validation measures and checkpoints hand to translate: the moving average when on."""
        return self.ema.module if self.ema is not None else self.model

    def _metric(self, result: dict) -> float:
        """The validation result as a score where higher is better (``train.valid_metric``)."""
        return result["bleu"] if self.cfg.valid_metric == "bleu" else -result["loss"]

    def _validate(self) -> bool:
        """Validate, keep the best checkpoint; True when early stopping says stop."""
        if not self.main:
            return False
        result = validate(self.eval_model, self.valid_split, self.valid_refs, self.tokenizer, self.recipe,
                          self.device, self.autocast)
        p = self.progress
        metric = self._metric(result)
        improved = p.best_metric is None or metric > p.best_metric
        if improved:
            p.best_metric, p.best_step, p.bad_validations = metric, p.step, 0
        else:
            p.bad_validations += 1
        lowered = self.lr.observe(result["bleu"] if self.cfg.valid_metric == "bleu" else result["loss"],
                                  self.cfg.valid_metric == "bleu")
        record = {"step": p.step, "valid_loss": round(result["loss"], 4), "valid_ppl": round(result["ppl"], 3),
                  "valid_bleu": round(result["bleu"], 2),
                  "minutes": round((time.perf_counter() - self.started) / 60, 2)}  # of this invocation
        p.history.append(record)
        self._metrics({"kind": "valid", **record})
        log.info(f"step {p.step}: valid loss {result['loss']:.3f}  ppl {result['ppl']:.2f}  "
                 f"BLEU {result['bleu']:.2f}{'  (best)' if improved else ''}"
                 f"{'  lr lowered' if lowered else ''}")
        for hyp, ref in result["samples"]:
            log.info(f"  hyp: {hyp}\n  ref: {ref}")
        self.save_checkpoint(best=improved)
        return bool(self.cfg.patience) and p.bad_validations >= self.cfg.patience

    def _average(self) -> dict | None:
        """Average the newest ``average_last`` numbered checkpoints into averaged.pt and validate it;
        when it beats the best checkpoint on the valid metric it becomes best.pt. Averaging the
        weights of the last checkpoints smooths out the noise of training at a high learning rate:
        on en-fr after 15 minutes, +3.4 valid BLEU (docs/training.md)."""
        import copy
        paths = ckpt.step_checkpoints(self.run_dir)[-self.cfg.average_last:]
        if len(paths) < 2:
            return None
        out = self.ckpt_dir / "averaged.pt"
        payload = ckpt.averaged_payload(paths)
        try:
            ckpt.save_atomic(payload, out)
        except OSError as exc:
            log.warning(f"warning: could not write {out} ({exc.strerror or exc}); no averaged model")
            return None
        model = copy.deepcopy(self.model)
        model.load_state_dict(payload["model"])
        result = validate(model, self.valid_split, self.valid_refs, self.tokenizer, self.recipe,
                          self.device, self.autocast)
        p = self.progress
        metric = self._metric(result)
        better = p.best_metric is None or metric > p.best_metric
        if better:
            ckpt.link_atomic(out, self.ckpt_dir / "best.pt")
            # A resumed run must measure later checkpoints against the average, not against the
            # single checkpoint it beat: the newest checkpoint is rewritten with the new best.
            p.best_metric = metric
            self.save_checkpoint()
        steps = [ckpt.step_of(x) for x in paths]
        log.info(f"averaged steps {', '.join(map(str, steps))}: valid loss {result['loss']:.3f}  "
                 f"BLEU {result['bleu']:.2f}{'  (best: now best.pt)' if better else ''}")
        record = {"steps": steps, "valid_loss": round(result["loss"], 4), "valid_bleu": round(result["bleu"], 2),
                  "best": better}
        self._metrics({"kind": "averaged", **record})
        return record

    def _metrics(self, record: dict) -> None:
        if not self.main:
            return
        with open(self.run_dir / "metrics.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
        if self.tensorboard is not None:
            # An average of checkpoints is plotted at the newest step it contains.
            step = record["step"] if "step" in record else max(record["steps"])
            for k, v in record.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "step":
                    self.tensorboard.add_scalar(f"{record.get('kind', 'train')}/{k}", v, step)

    def _open_tensorboard(self):
        if not self.main:
            return None
        try:
            from torch.utils.tensorboard import SummaryWriter
        except Exception:  # tensorboard is optional
            return None
        return SummaryWriter(str(self.run_dir / "tensorboard"))

    # ------------------------------------------------------------------ the loop

    def train(self) -> dict:
        cfg, p = self.cfg, self.progress
        self.tensorboard = self._open_tensorboard()
        if self.main:
            n_params = self.model.parameter_count()
            log.info(f"model: {n_params / 1e6:.2f}M parameters, {self.recipe.model.rnn} "
                     f"{self.recipe.model.attention} attention, {self.recipe.model.decoder} decoder; "
                     f"device {self.device}, {self.precision}; {len(self.train_split)} training pairs")
            if self.precision == "bf16" and not native_bf16(self.device):
                log.warning("warning: train.precision bf16 has no hardware support on this device and "
                            "runs far slower than fp32; use precision auto or fp32")
        handlers = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        bar = None
        if self.main and (self.progress_bar if self.progress_bar is not None else sys.stderr.isatty()):
            from tqdm import tqdm
            bar = tqdm(total=cfg.max_steps or None, initial=p.step, unit="step", dynamic_ncols=True)
        start = self.started = time.perf_counter()
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
                group = []
                for _ in range(cfg.accumulate):
                    item = next(batches, None)
                    if item is None:
                        break
                    group.append(item)
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
                if p.step % 50 == 0 or bar is not None:
                    rate = tgt_tokens / max(train_time, 1e-9)
                    lr = self.optimizer.param_groups[0]["lr"]
                    if bar is not None:
                        bar.update(1)
                        bar.set_postfix(loss=f"{loss_value or float('nan'):.3f}", lr=f"{lr:.2e}",
                                        tok_s=f"{rate:.0f}", refresh=False)
                    if p.step % 50 == 0 and self.main:
                        self._metrics({"kind": "train", "step": p.step, "loss": loss_value, "lr": lr,
                                       "tgt_tokens_per_s": round(rate, 1), "epoch": p.epoch})
                        if bar is None:  # rate and data wait: since this invocation started
                            share = data_wait / max(data_wait + train_time, 1e-9)
                            log.info(f"step {p.step}  epoch {p.epoch}  loss {loss_value or float('nan'):.3f}"
                                     f"  lr {lr:.2e}  {rate:.0f} tgt tok/s  data wait {data_wait:.2f}s"
                                     f" ({share:.1%})")
                if self._agree(self.stop_signal is not None):
                    self.stop_signal = self.stop_signal or signal.SIGTERM
                    break
                stop_early = False
                if p.step % cfg.valid_every == 0:
                    stop_early = self._validate()
                elif p.step % cfg.checkpoint_every == 0:
                    self.save_checkpoint()
                if self._agree(stop_early):
                    reason = f"early stopping: no gain for {cfg.patience} validations"
                    break
        finally:
            for s, h in handlers.items():
                signal.signal(s, h)
            if bar is not None:
                bar.close()
        averaged = None
        if self.stop_signal is None and self.main and (not p.history or p.history[-1]["step"] != p.step):
            if steps_done:
                self._validate()
        elif self.main:
            self.save_checkpoint()
        if self.stop_signal is None and self.main and steps_done and cfg.average_last:
            averaged = self._average()
        wall = time.perf_counter() - start
        if self.distributed:  # throughput is the job's: every rank's tokens
            import torch.distributed as dist
            counts = torch.tensor([tgt_tokens, src_tokens], dtype=torch.float64, device=self.device)
            dist.all_reduce(counts)
            tgt_tokens, src_tokens = (int(c) for c in counts.tolist())
        summary = {"steps": steps_done, "final_step": p.step, "epoch": p.epoch, "wall_s": round(wall, 2),
                   "train_s": round(train_time, 2), "data_wait_s": round(data_wait, 3),
                   "tgt_tokens": tgt_tokens, "src_tokens": src_tokens,
                   "tgt_tokens_per_s": round(tgt_tokens / max(train_time, 1e-9), 1),
                   "src_tokens_per_s": round(src_tokens / max(train_time, 1e-9), 1),
                   "peak_rss_mb": round(peak_rss_mb(), 1), "nan_batches": p.nan_total,
                   "best_step": p.best_step, "stop_reason": reason if self.stop_signal is None
                   else f"interrupted by {signal.Signals(self.stop_signal).name}",
                   "resumed_from": self.resumed_from, "validations": p.history[-5:]}
        if self.cfg.valid_metric == "bleu" and p.best_metric is not None:
            summary["best_valid_bleu"] = round(p.best_metric, 2)
        if averaged is not None:
            summary["averaged"] = averaged
        if torch.cuda.is_available() and self.device.type == "cuda":
            summary["peak_gpu_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        if self.main:
            tmp = self.run_dir / "summary.json.part"
            tmp.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
            os.replace(tmp, self.run_dir / "summary.json")
            log.info(f"{summary['stop_reason']}: {steps_done} steps in {wall:.1f}s, "
                     f"{summary['tgt_tokens_per_s']:.0f} target tokens/s, "
                     f"peak memory {summary['peak_rss_mb']:.0f} MB")
        if self.tensorboard is not None:
            self.tensorboard.close()
        if self.stop_signal is not None:
            raise TrainingInterrupted(self.stop_signal)
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
        for _, batch in group:
            batch = batch.to(self.device)
            with self.autocast():
                summed, _ = self.train_model(batch.src, batch.src_lengths, batch.tgt_in, eps,
                                             batch.tgt_out, cfg.label_smoothing)
            loss = summed / (batch.tgt_tokens * len(group))
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
            log.warning(f"warning: non-finite loss at step {p.step}; batch skipped "
                        f"({p.nan_in_row} in a row, {p.nan_total} in all)")
            if p.nan_in_row >= cfg.max_nan_batches:
                raise UserError(f"training diverged: {p.nan_in_row} non-finite losses in a row at step "
                                f"{p.step}; lower train.lr or raise train.clip_norm")
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


def train(recipe: Recipe, run_dir: Path, *, device: str = "auto", restart: bool = False,
          progress_bar: bool | None = None) -> dict:
    setup_logging(Path(run_dir))
    return Trainer(recipe, Path(run_dir), device=device, restart=restart, progress_bar=progress_bar).train()
