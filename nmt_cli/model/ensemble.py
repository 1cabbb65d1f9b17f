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

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor):
        states, memories = zip(*(m.encode(src, src_lengths) for m in self.models))
        return EnsembleState(list(states)), EnsembleState(list(memories))

    def prepare_decoding(self) -> None:
        for m in self.models:
            m.prepare_decoding()

    def step(
        self,
        prev: torch.Tensor,
        state: EnsembleState,
        memory: EnsembleState,
        vocab: torch.Tensor | None = None,
        allowed: torch.Tensor | None = None,
        groups=None,
    ):
        logps, states, weights = [], [], []
        for m, s, mem in zip(self.models, state.parts, memory.parts):
            logp, s, w = m.step(prev, s, mem, vocab, allowed, groups)
            logps.append(logp)
            states.append(s)
            if w is not None:
                weights.append(w)
        logp = torch.stack(logps).mean(0)
        w = torch.stack(weights).mean(0) if weights else None
        return logp, EnsembleState(states), w
