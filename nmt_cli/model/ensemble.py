"""Several models decoding as one: log p(y) = (1/M) Σ_m log p_m(y), attention averaged too.

It offers the same search contract as one model (encode, step, select), so greedy and beam
search need no change. The models must share the target vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class EnsembleState:
    parts: list

    def select(self, index: torch.Tensor) -> EnsembleState:
        return EnsembleState([p.select(index) for p in self.parts])

    def shared_by(self, hypotheses: int) -> EnsembleState:
        """For the members' memories: see DecoderMemory.shared_by."""
        return EnsembleState([p.shared_by(hypotheses) for p in self.parts])


class Ensemble(nn.Module):
    def __init__(self, models: list[nn.Module]):
        super().__init__()
        self.models = nn.ModuleList(models)
        self.decoding_setup = None  # set by fast_decoding.prepare_for_decoding, as a member's

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor):
        states, memories = zip(*(m.encode(src, src_lengths) for m in self.models))
        return EnsembleState(list(states)), EnsembleState(list(memories))

    def step(self, prev: torch.Tensor, state: EnsembleState, memory: EnsembleState, columns=None):
        """As Seq2Seq.step, each member over the same ``columns``."""
        logps, states, weights = [], [], []
        for m, s, mem in zip(self.models, state.parts, memory.parts):
            logp, s, w = m.step(prev, s, mem, columns)
            logps.append(logp)
            states.append(s)
            if w is not None:
                weights.append(w)
        logp = torch.stack(logps).mean(0)
        w = torch.stack(weights).mean(0) if weights else None
        return logp, EnsembleState(states), w
