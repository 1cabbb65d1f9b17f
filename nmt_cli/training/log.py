"""What a training run tells its user and its files: train.log and the console, metrics.jsonl,
TensorBoard (when installed), a progress bar on a terminal or a regular line elsewhere, and
summary.json at the end (``run_summary``)."""

from __future__ import annotations

import json
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from nmt_cli.config.sections import ModelConfig, TrainConfig
from nmt_cli.runtime.device import native_bf16, peak_rss_mb
from nmt_cli.runtime.output_file import write_text_atomic
from nmt_cli.training.run_state import Progress

log = logging.getLogger("nmt.train")

METRICS_EVERY = 50  # steps between train records in metrics.jsonl
LINE_EVERY_S = 30.0  # without a bar, the longest silence between progress lines
FIRST_LINE_AFTER_S = 5.0  # ... and the first one comes this soon, so a slow start is visible


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


def format_duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


def remaining_seconds(
    cfg: TrainConfig, step: int, start_step: int, elapsed_s: float
) -> float | None:
    """Time left until max_steps or max_minutes, whichever comes first; None without either (or
    before the first step of this invocation gives a rate)."""
    left = []
    if cfg.max_minutes:
        left.append(cfg.max_minutes * 60 - elapsed_s)
    done = step - start_step
    if cfg.max_steps and done > 0:
        left.append((cfg.max_steps - step) * elapsed_s / done)
    return max(min(left), 0.0) if left else None


@dataclass
class LoopTotals:
    """What one invocation of the training loop did, for the progress lines and summary.json."""

    steps: int = 0  # optimiser steps with a finite loss
    train_s: float = 0.0
    data_wait_s: float = 0.0
    tgt_tokens: int = 0
    src_tokens: int = 0


def run_summary(
    progress: Progress,
    totals: LoopTotals,
    *,
    wall_s: float,
    stop_reason: str,
    resumed_from: int | None,
    valid_metric: str,
    averaged: dict | None,
    device: torch.device,
) -> dict:
    """The record of summary.json: what this invocation did, where the run stands, and why it
    stopped."""
    p, t = progress, totals
    summary = {
        "steps": t.steps,
        "final_step": p.step,
        "epoch": p.epoch,
        "wall_s": round(wall_s, 2),
        "train_s": round(t.train_s, 2),
        "data_wait_s": round(t.data_wait_s, 3),
        "tgt_tokens": t.tgt_tokens,
        "src_tokens": t.src_tokens,
        "tgt_tokens_per_s": round(t.tgt_tokens / max(t.train_s, 1e-9), 1),
        "src_tokens_per_s": round(t.src_tokens / max(t.train_s, 1e-9), 1),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "nan_batches": p.nan_total,
        "best_step": p.best_step,
        "stop_reason": stop_reason,
        "resumed_from": resumed_from,
        "validations": p.history[-5:],
    }
    if valid_metric == "bleu" and p.best_metric is not None:
        summary["best_valid_bleu"] = round(p.best_metric, 2)
    best = [h for h in p.history if h["step"] == p.best_step and "valid_bleu_by_direction" in h]
    if best:  # a multilingual model: each direction's BLEU at the best validation
        summary["best_valid_bleu_by_direction"] = best[-1]["valid_bleu_by_direction"]
    if averaged is not None:
        summary["averaged"] = averaged
    if torch.cuda.is_available() and device.type == "cuda":
        summary["peak_gpu_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    return summary


class TrainingLog:
    """Reports a run. Only the main process of a distributed run writes (``enabled``)."""

    def __init__(
        self,
        run_dir: Path,
        cfg: TrainConfig,
        *,
        enabled: bool = True,
        progress_bar: bool | None = None,
    ):
        self.run_dir, self.cfg, self.enabled = Path(run_dir), cfg, enabled
        self.want_bar = enabled and (
            progress_bar if progress_bar is not None else sys.stderr.isatty()
        )
        self.bar = None
        self.tensorboard = None
        self.started = self.last_line = time.perf_counter()
        self.start_step = 0

    # ------------------------------------------------------------------ start and end

    def start(self, step: int) -> None:
        """The clock starts; ``step`` is where this invocation begins (non-zero when resumed)."""
        self.tensorboard = self.open_tensorboard() if self.enabled else None
        if self.want_bar:
            self.bar = tqdm(
                total=self.cfg.max_steps or None,
                initial=step,
                unit="step",
                dynamic_ncols=True,
                file=sys.stderr,
            )
        self.started = self.last_line = time.perf_counter()
        self.start_step = step

    def open_tensorboard(self):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except Exception:  # tensorboard is optional
            return None
        return SummaryWriter(str(self.run_dir / "tensorboard"))

    def close_bar(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def minutes(self) -> float:
        """Minutes since this invocation started."""
        return (time.perf_counter() - self.started) / 60

    def finish(self, summary: dict) -> None:
        """Write summary.json (atomically) and the closing line."""
        if self.enabled:
            write_text_atomic(self.run_dir / "summary.json", json.dumps(summary, indent=1) + "\n")
            log.info(
                f"{summary['stop_reason']}: {summary['steps']} steps in {summary['wall_s']:.1f}s, "
                f"{summary['tgt_tokens_per_s']:.0f} target tokens/s, "
                f"peak memory {summary['peak_rss_mb']:.0f} MB"
            )
        if self.tensorboard is not None:
            self.tensorboard.close()
            self.tensorboard = None

    # ------------------------------------------------------------------ records

    def metrics(self, record: dict) -> None:
        """One line of metrics.jsonl, and its numbers to TensorBoard."""
        if not self.enabled:
            return
        with open(self.run_dir / "metrics.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
        if self.tensorboard is not None:
            # An average of checkpoints is plotted at the newest step it contains.
            step = record["step"] if "step" in record else max(record["steps"])
            for k, v in record.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "step":
                    self.tensorboard.add_scalar(f"{record.get('kind', 'train')}/{k}", v, step)

    def describe(
        self,
        parameters: int,
        model: ModelConfig,
        device: torch.device,
        precision: str,
        pairs: int,
        epoch_mix: str | None = None,
    ) -> None:
        """The line that says what is trained, where, and on how much data (``epoch_mix``:
        how an epoch shares the pairs out between directions, where it is not all once)."""
        if not self.enabled:
            return
        threads = ""
        if device.type == "cpu":
            n = torch.get_num_threads()
            threads = f", {n} CPU thread{'s' if n > 1 else ''} (--threads to change)"
        stack = ""
        if (model.encoder_depth, model.decoder_depth) != (1, 1):
            between = [name for name in ("residual", "layer_norm") if getattr(model, name)]
            stack = f", {model.encoder_depth} + {model.decoder_depth} layers" + "".join(
                f" {name}" for name in between
            )
        log.info(
            f"model: {parameters / 1e6:.2f}M parameters, {model.rnn} {model.attention} "
            f"attention, {model.decoder} decoder{stack}; device {device}, {precision}{threads}; "
            f"{pairs} training pairs"
        )
        if epoch_mix:
            log.info(epoch_mix)
        if precision == "bf16" and not native_bf16(device):
            log.warning(
                "warning: train.precision bf16 has no hardware support on this device and "
                "runs far slower than fp32; use precision auto or fp32"
            )

    def step(
        self,
        step: int,
        epoch: int,
        loss: float | None,
        lr: float,
        tgt_tokens: int,
        train_time: float,
        data_wait: float,
    ) -> None:
        """After each optimiser step: the bar, a metrics record every METRICS_EVERY steps, and
        without a bar a line at those steps and whenever LINE_EVERY_S passed in silence."""
        if not self.enabled:
            return
        rate = tgt_tokens / max(train_time, 1e-9)  # since this invocation started
        shown_loss = loss if loss is not None else float("nan")
        now = time.perf_counter()
        left = remaining_seconds(self.cfg, step, self.start_step, now - self.started)
        if self.bar is not None:
            self.bar.update(1)
            postfix = {"loss": f"{shown_loss:.3f}", "lr": f"{lr:.2e}", "tok_s": f"{rate:.0f}"}
            if left is not None and not self.cfg.max_steps:  # tqdm shows its own ETA for max_steps
                postfix["left"] = format_duration(left)
            self.bar.set_postfix(postfix, refresh=False)
        if step % METRICS_EVERY == 0:
            self.metrics(
                {
                    "kind": "train",
                    "step": step,
                    "loss": loss,
                    "lr": lr,
                    "tgt_tokens_per_s": round(rate, 1),
                    "epoch": epoch,
                }
            )
        silence = now - self.last_line
        due = silence >= (FIRST_LINE_AFTER_S if self.last_line == self.started else LINE_EVERY_S)
        if self.bar is None and (step % METRICS_EVERY == 0 or due):
            self.last_line = now
            share = data_wait / max(data_wait + train_time, 1e-9)
            log.info(
                f"step {self._of_total(step)}  epoch {epoch}  loss {shown_loss:.3f}  lr {lr:.2e}  "
                f"{rate:.0f} tgt tok/s  data wait {data_wait:.2f}s ({share:.1%})"
                f"{'' if left is None else '  ETA ' + format_duration(left)}"
            )

    def _of_total(self, step: int) -> str:
        if self.cfg.max_steps:
            return f"{step}/{self.cfg.max_steps}"
        if self.cfg.max_minutes:
            return f"{step} ({self.minutes():.1f}/{self.cfg.max_minutes:g} min)"
        return str(step)

    def validating(self, step: int, sentences: int, what: str = "") -> None:
        """Said before a validation starts: it can take a while, and the bar stands still
        meanwhile."""
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.set_description_str("validating", refresh=True)
        else:
            log.info(f"step {step}: validating{what} on {sentences} sentences")
            self.last_line = time.perf_counter()

    def validation(
        self, history: list, step: int, result: dict, improved: bool, lowered: bool
    ) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.set_description_str("", refresh=False)
        record = {
            "step": step,
            "valid_loss": round(result["loss"], 4),
            "valid_ppl": round(result["ppl"], 3),
            "valid_bleu": round(result["bleu"], 2),
            "minutes": round(self.minutes(), 2),
        }
        if "directions" in result:  # a multilingual model: valid_bleu is their mean
            record["valid_bleu_by_direction"] = _rounded(result["directions"])
        history.append(record)
        self.metrics({"kind": "valid", **record})
        self._write(
            f"step {step}: valid loss {result['loss']:.3f}  ppl {result['ppl']:.2f}  "
            f"BLEU {result['bleu']:.2f}{'  (best)' if improved else ''}"
            f"{'  lr lowered' if lowered else ''}"
        )
        if "directions" in result:
            self._write("  BLEU by direction: " + _by_direction(result["directions"]))
        for hyp, ref in result["samples"]:
            self._write(f"  hyp: {hyp}\n  ref: {ref}")

    def averaged(self, steps: list[int], result: dict, better: bool) -> dict:
        record = {
            "steps": steps,
            "valid_loss": round(result["loss"], 4),
            "valid_bleu": round(result["bleu"], 2),
            "best": better,
        }
        if "directions" in result:
            record["valid_bleu_by_direction"] = _rounded(result["directions"])
        if self.enabled:
            self._write(
                f"averaged steps {', '.join(map(str, steps))}: valid loss {result['loss']:.3f}  "
                f"BLEU {result['bleu']:.2f}{'  (best: now best.pt)' if better else ''}"
            )
            self.metrics({"kind": "averaged", **record})
        return record

    def _write(self, message: str) -> None:
        """A log line that does not tear the progress bar."""
        if self.bar is None:
            log.info(message)
            return
        with self.bar.external_write_mode():
            log.info(message)


def _rounded(by_direction: dict) -> dict:
    return {name: round(bleu, 2) for name, bleu in by_direction.items()}


def _by_direction(by_direction: dict) -> str:
    return "  ".join(f"{name} {bleu:.2f}" for name, bleu in by_direction.items())
