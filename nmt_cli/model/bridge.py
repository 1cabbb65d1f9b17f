"""The bridge: the decoder's initial state s_0 and the fixed source summary c.

    zero:   s_0 = 0                           c = h_N
    last:   s_0 = h_N                         c = h_N
    linear: s_0 = tanh(W h_N + b)             c = q(h_N) = s_0 (top layer)
    mean:   s_0 = tanh(W · mean_j h_j + b)    c = q(h_1..h_N) = s_0 (top layer)

h_N is the encoder's final state per layer ([→h_N; ←h_1] for a BiRNN); the mean runs over the real
positions of the top layer only, never over padding. Each decoder layer gets its own W. An LSTM's
cell state gets its own W too, without the tanh: an LSTM's cell is not bounded to (-1, 1) as its
hidden state is (h = o ⊙ tanh(c)), so the bridge leaves it linear:
    linear: m_0 = W_m m_N + b_m               mean: m_0 = W_m · mean_j h_j + b_m
The summary c is what the no-attention decoder (Cho et al. 2014) reads at every step.

An encoder of L_e layers and a decoder of L_d layers are aligned at the top: decoder layer k
(1..L_d) reads encoder layer max(1, L_e - L_d + k), so a one-layer decoder starts from the
encoder's top layer, and a decoder deeper than its encoder starts its lowest layers from the
encoder's first. With equal depths decoder layer k reads encoder layer k.
"""

from __future__ import annotations

import torch
from torch import nn

from nmt_cli.model.encoder import EncoderOutput


class Bridge(nn.Module):
    def __init__(
        self, kind: str, hidden_dim: int, layers: int, lstm: bool, encoder_layers: int | None = None
    ):
        """``layers``: the decoder's; ``encoder_layers``: the encoder's (None: as many)."""
        super().__init__()
        self.kind, self.layers, self.lstm = kind, layers, lstm
        encoder_layers = layers if encoder_layers is None else encoder_layers
        # the encoder layer each decoder layer reads (module doc); None where it is each one's own
        aligned = [max(0, encoder_layers - layers + k) for k in range(layers)]
        self.aligned = None if aligned == list(range(encoder_layers)) else aligned
        if kind in ("linear", "mean"):
            self.hidden = nn.ModuleList(nn.Linear(hidden_dim, hidden_dim) for _ in range(layers))
            self.cell = (
                nn.ModuleList(nn.Linear(hidden_dim, hidden_dim) for _ in range(layers))
                if lstm
                else None
            )

    def _project(
        self, layers: nn.ModuleList, per_layer: list[torch.Tensor], squash: bool = True
    ) -> torch.Tensor:
        return torch.stack(
            [torch.tanh(w(x)) if squash else w(x) for w, x in zip(layers, per_layer)]
        )

    def _per_decoder_layer(self, final: torch.Tensor | None) -> torch.Tensor | None:
        """The encoder's (L_e, B, H) final states -> the (L_d, B, H) each decoder layer reads."""
        if final is None or self.aligned is None:
            return final
        return final[self.aligned]

    def forward(self, enc: EncoderOutput) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """-> (s_0 hidden (layers, B, H), s_0 cell or None, summary c (B, H))."""
        final = self._per_decoder_layer(enc.final)
        final_cell = self._per_decoder_layer(enc.final_cell)
        if self.kind == "zero":
            hidden = torch.zeros_like(final)
            cell = torch.zeros_like(final) if self.lstm else None
            return hidden, cell, enc.final[-1]
        if self.kind == "last":
            return final, final_cell, enc.final[-1]
        if self.kind == "linear":
            hidden_in = list(final)
            cell_in = list(final_cell) if self.lstm else None
        else:  # mean over real positions of the top-layer states
            m = enc.mask.unsqueeze(-1).to(enc.states.dtype)
            mean = (enc.states * m).sum(1) / m.sum(1).clamp_min(1.0)
            hidden_in = [mean] * self.layers
            cell_in = [mean] * self.layers if self.lstm else None
        hidden = self._project(self.hidden, hidden_in)
        cell = self._project(self.cell, cell_in, squash=False) if self.lstm else None
        return hidden, cell, hidden[-1]
