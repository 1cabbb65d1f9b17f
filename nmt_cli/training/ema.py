"""An exponential moving average of the weights (Polyak averaging; Marian's "exponential
smoothing").

    ema_t = d_t · ema_{t-1} + (1 - d_t) · w_t,    d_t = min(d, (1 + t) / (10 + t))

w_t are the weights after optimiser step t. The ramp in d_t keeps the first few hundred averages
from being dominated by the random initial weights (TensorFlow's ExponentialMovingAverage does the
same with its num_updates). At a constant learning rate the raw weights jump around a minimum;
their average sits nearer to it, which is what averaging the last checkpoints does coarsely.
The copy and the in-place update come from ``torch.optim.swa_utils.AveragedModel``.
"""

from __future__ import annotations

import torch
from torch.optim.swa_utils import AveragedModel


class WeightAverage:
    def __init__(self, model: torch.nn.Module, decay: float):
        if not 0.0 < decay < 1.0:
            raise ValueError(f"decay must be in (0, 1), got {decay}")
        self.decay = decay
        self.updates = 0
        self.averaged = AveragedModel(model, multi_avg_fn=self._blend)
        self.averaged.module.eval()

    @property
    def module(self) -> torch.nn.Module:
        """The model that carries the averaged weights (same class and shape as the trained one)."""
        return self.averaged.module

    def current_decay(self) -> float:
        t = self.updates
        return min(self.decay, (1 + t) / (10 + t))

    def _blend(
        self, averaged: list[torch.Tensor], current: list[torch.Tensor], _n_averaged
    ) -> None:
        """ema = d·ema + (1-d)·w for each tensor: lerp towards w by 1 - d."""
        weight = 1.0 - self.current_decay()
        for avg, now in zip(averaged, current):
            avg.lerp_(now, weight)

    @torch.no_grad()
    def update(self, model: torch.nn.Module) -> None:
        """Fold the weights after one optimiser step into the average (the first call copies
        them)."""
        self.averaged.update_parameters(model)
        self.updates += 1

    def state_dict(self) -> dict:
        return self.module.state_dict()

    def load_state_dict(self, state: dict, updates: int) -> None:
        self.module.load_state_dict(state)
        self.updates = updates
        # AveragedModel copies instead of blending while its own count is 0.
        self.averaged.n_averaged.fill_(max(updates, 1))
