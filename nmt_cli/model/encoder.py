"""The encoder: an RNN (GRU, LSTM or Elman) over source embeddings, optionally bidirectional.

    →h_j = f(→h_{j-1}, x_j),  ←h_j = f(←h_{j+1}, x_j),  h_j = [→h_j; ←h_j]

With ``bidirectional`` each direction has hidden_dim/2 units, so h_j has hidden_dim either way.
Sequences are packed, so padding never enters the recurrence. Stacked layers may be joined by
residual connections and layer normalisation (nmt_cli/model/stacked.py):

    residual:    h^l = RNN^l(h^{l-1}) + h^{l-1}       (l >= 2)
    layer_norm:  layer l >= 2 reads LN^{l-1}(h^{l-1}) instead of h^{l-1}

The states h_j are the top layer's h^L_j; the final states stay each layer's own recurrent ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nmt_cli.model.stacked import PLAIN_STACK, Between, stacked_rnn


@dataclass
class EncoderOutput:
    states: torch.Tensor  # (B, S, H): h_1 .. h_S, zeros on padding
    mask: torch.Tensor  # (B, S) bool, True on real positions
    final: torch.Tensor  # (layers, B, H): each layer's last states, both directions joined
    final_cell: torch.Tensor | None  # the same for an LSTM's cell state


class Encoder(nn.Module):
    def __init__(
        self,
        rnn: str,
        embedding: nn.Embedding,
        hidden_dim: int,
        layers: int,
        bidirectional: bool,
        dropout: float,
        between: Between = PLAIN_STACK,
    ):
        super().__init__()
        self.embedding = embedding
        self.layers = layers
        self.directions = 2 if bidirectional else 1
        self.hidden_dim = hidden_dim
        self.dropout = nn.Dropout(dropout)
        self.rnn = stacked_rnn(
            rnn,
            embedding.embedding_dim,
            hidden_dim // self.directions,
            layers,
            bidirectional=bidirectional,
            dropout=dropout,
            residual=between.residual,
            layer_norm=between.layer_norm,
        )

    def _join_directions(self, final: torch.Tensor) -> torch.Tensor:
        """(layers * dirs, B, H/dirs) -> (layers, B, H): [→h_N; ←h_1] per layer."""
        layers_dirs, b, h = final.shape
        return (
            final.view(self.layers, self.directions, b, h)
            .transpose(1, 2)
            .reshape(self.layers, b, -1)
        )

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor) -> EncoderOutput:
        x = self.dropout(self.embedding(src))
        packed = pack_padded_sequence(x, src_lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, final = self.rnn(packed)
        states, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))
        mask = (
            torch.arange(src.size(1), device=src.device)[None, :]
            < src_lengths.to(src.device)[:, None]
        )
        cell = None
        if isinstance(final, tuple):
            final, cell = final
            cell = self._join_directions(cell)
        return EncoderOutput(self.dropout(states), mask, self._join_directions(final), cell)
