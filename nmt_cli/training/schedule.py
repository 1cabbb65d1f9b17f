"""Learning-rate and scheduled-sampling schedules, as plain functions of the step.

Every schedule keeps its state in plain numbers, so it goes into a checkpoint and resumes exactly.

    constant:      lr_t = lr · w_t
    inverse_sqrt:  lr_t = lr · min(t / warmup, sqrt(warmup / t))
    cosine:        lr_t = min_lr + (lr - min_lr) · (1 + cos(π · f_t)) / 2   (after warmup)
    plateau:       lr_t = lr · factor^k,
                   k = times validation stopped improving for `patience` checks
with w_t = min(1, t / warmup) the linear warm-up (1 when warmup_steps is 0) and f_t the share of
the budget spent: the larger of t / max_steps and minutes / max_minutes, whichever limits are set,
so a run bounded by wall-clock time anneals to min_lr as its time runs out.

Scheduled sampling (Bengio et al. 2015) feeds the model's own previous prediction with
probability ε_t:
    constant:         ε_t = p
    linear:           ε_t = p · min(1, t / steps)
    inverse_sigmoid:  ε_t = p · (1 - k / (k + exp(t / k))),  k = steps / 10
"""

from __future__ import annotations

import math

from nmt_cli.config.sections import TrainConfig


class LearningRate:
    def __init__(self, cfg: TrainConfig):
        self.cfg = cfg
        self.scale = 1.0  # plateau decay factor applied so far
        self.best: float | None = None
        self.bad_checks = 0

    def __call__(self, step: int, minutes: float = 0.0) -> float:
        """The lr for ``step``; ``minutes`` of training so far matter only to cosine under
        max_minutes."""
        cfg = self.cfg
        t = max(step, 1)
        warm = min(1.0, t / cfg.warmup_steps) if cfg.warmup_steps else 1.0
        if cfg.schedule == "inverse_sqrt":
            w = max(cfg.warmup_steps, 1)
            return cfg.lr * min(t / w, math.sqrt(w / t))
        if cfg.schedule == "cosine":
            if t <= cfg.warmup_steps:
                return cfg.lr * warm
            progress = 0.0
            if cfg.max_steps:
                progress = (t - cfg.warmup_steps) / max(cfg.max_steps - cfg.warmup_steps, 1)
            if cfg.max_minutes:
                progress = max(progress, minutes / cfg.max_minutes)
            progress = min(1.0, progress)
            return cfg.min_lr + (cfg.lr - cfg.min_lr) * 0.5 * (1 + math.cos(math.pi * progress))
        if cfg.schedule == "plateau":
            return max(cfg.lr * self.scale, cfg.min_lr) * warm
        return cfg.lr * warm

    def observe(self, value: float, higher_is_better: bool) -> bool:
        """Feed a validation result to the plateau schedule; True when the lr was just lowered."""
        if self.cfg.schedule != "plateau":
            return False
        better = self.best is None or (value > self.best if higher_is_better else value < self.best)
        if better:
            self.best, self.bad_checks = value, 0
            return False
        self.bad_checks += 1
        if self.bad_checks > self.cfg.plateau_patience:
            self.scale *= self.cfg.plateau_factor
            self.bad_checks = 0
            return True
        return False

    def state_dict(self) -> dict:
        return {"scale": self.scale, "best": self.best, "bad_checks": self.bad_checks}

    def load_state_dict(self, state: dict) -> None:
        self.scale, self.best, self.bad_checks = state["scale"], state["best"], state["bad_checks"]


def sampling_probability(cfg: TrainConfig, step: int) -> float:
    if cfg.sampling == "none":
        return 0.0
    if cfg.sampling == "constant":
        return cfg.sampling_prob
    if cfg.sampling == "linear":
        return cfg.sampling_prob * min(1.0, step / cfg.sampling_steps)
    k = cfg.sampling_steps / 10.0
    return cfg.sampling_prob * (1.0 - k / (k + math.exp(min(step / k, 700.0))))
