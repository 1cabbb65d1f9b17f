"""Stacked RNN layers, optionally with residual connections and layer normalisation between them.

Layer l runs its recurrence o^l = RNN^l(x^l), o^l being the layer's own states, the ones it
carries from step to step, and hands up h^l; the stack's output is the top layer's h^L:

    x^1 = the stack's input,                 x^l = dropout(h^{l-1})                  (l >= 2)
    residual:    h^l = o^l + h^{l-1}  (l >= 2, where h^{l-1} has o^l's size),  else h^l = o^l
    layer_norm:  x^l = dropout(LN^{l-1}(h^{l-1}))                              (l >= 2)
                 LN(v) = g ⊙ (v - μ) / σ + b,  μ = mean_k v_k,  σ = sqrt(mean_k (v_k - μ)² + ε)

with g (from 1) and b (from 0) learned per normalised layer; a BiRNN layer's two directions are
normalised together. Layer normalisation acts between layers, on what layer l - 1 hands to layer
l (the pre-norm order of residual stacks), and not on the stack's output: that keeps the RNN's
own scale (|o| < 1 for GRU and LSTM), which attention scores and the output layer read, where
unit-variance features would make dot-product scores of size sqrt(H) and saturate h~'s tanh.
Nor does it act inside the cell (Ba et al. 2016 normalise each gate's pre-activations): the
recurrence stays PyTorch's own GRU, LSTM or Elman module, which trains with its fused kernels and
whose cell the decoding path writes out as it is (nmt_cli/model/fast_decoding.py). Both options
need two layers or more, and a one-layer stack is PyTorch's own module.

With neither option the stack is PyTorch's own multi-layer module, whose parameters (and their
names in a checkpoint) and whose dropout between layers are today's.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence

RNN_CLASSES = {"gru": nn.GRU, "lstm": nn.LSTM, "rnn": nn.RNN}


@dataclass(frozen=True)
class Between:
    """What stands between two stacked layers of one side (``model.residual``,
    ``model.layer_norm``): a residual connection, layer normalisation of what is handed up."""

    residual: bool = False
    layer_norm: bool = False


PLAIN_STACK = Between()  # layers handing their outputs up as they are


def stacked_rnn(
    kind: str,
    input_size: int,
    hidden_size: int,
    layers: int,
    *,
    bidirectional: bool = False,
    dropout: float = 0.0,
    residual: bool = False,
    layer_norm: bool = False,
) -> nn.Module:
    """``layers`` RNN layers of ``kind`` (gru, lstm, rnn), batch first: PyTorch's own module
    without residual connections or layer normalisation, or with one layer, where there is
    nothing between layers for them to act on; else a :class:`StackedRNN`."""
    if not (residual or layer_norm) or layers == 1:
        return RNN_CLASSES[kind](
            input_size,
            hidden_size,
            num_layers=layers,
            bidirectional=bidirectional,
            batch_first=True,
            dropout=dropout if layers > 1 else 0.0,
        )
    return StackedRNN(
        kind,
        input_size,
        hidden_size,
        layers,
        bidirectional=bidirectional,
        dropout=dropout,
        residual=residual,
        layer_norm=layer_norm,
    )


class StackedRNN(nn.Module):
    """One-layer RNN modules in a stack (module doc), called as PyTorch's multi-layer module is:
    ``(input, state) -> (output, final state)``, input (B, T, in) or a PackedSequence, state
    (layers * directions, B, hidden_size) or an LSTM's (hidden, cell) pair of them."""

    def __init__(
        self,
        kind: str,
        input_size: int,
        hidden_size: int,
        layers: int,
        *,
        bidirectional: bool,
        dropout: float,
        residual: bool,
        layer_norm: bool,
    ):
        super().__init__()
        self.num_layers = layers
        self.directions = 2 if bidirectional else 1
        width = hidden_size * self.directions
        self.layers = nn.ModuleList(
            RNN_CLASSES[kind](
                input_size if layer == 0 else width,
                hidden_size,
                bidirectional=bidirectional,
                batch_first=True,
            )
            for layer in range(layers)
        )
        self.residual = residual
        # norms[l - 1] normalises what layer l - 1 hands to layer l (0-based)
        self.norms = (
            nn.ModuleList(nn.LayerNorm(width) for _ in range(layers - 1)) if layer_norm else None
        )
        self.dropout = nn.Dropout(dropout)

    def layer_input(self, layer: int, below: torch.Tensor) -> torch.Tensor:
        """What layer ``layer`` (0-based, >= 1) reads of h^{l-1}, before dropout: LN^{l-1}(h^{l-1})
        with layer normalisation, else h^{l-1}."""
        return below if self.norms is None else self.norms[layer - 1](below)

    def hand_up(self, layer: int, own: torch.Tensor, below: torch.Tensor | None) -> torch.Tensor:
        """h^l from layer ``layer``'s (0-based) own states o^l and the hand-up h^{l-1} below it:
        o^l + h^{l-1} with residual connections (from the second layer on), else o^l."""
        return own + below if self.residual and layer > 0 else own

    def _layer_state(self, state, layer: int):
        if state is None:
            return None
        rows = slice(layer * self.directions, (layer + 1) * self.directions)
        if isinstance(state, tuple):
            return state[0][rows], state[1][rows]
        return state[rows]

    def forward(self, input, state=None):
        packed = isinstance(input, PackedSequence)
        below = input.data if packed else input
        finals = []
        for layer, rnn in enumerate(self.layers):
            x = below if layer == 0 else self.dropout(self.layer_input(layer, below))
            # a packed input's rows are its real positions: the layer reads them with the same
            # packing (PackedSequence is a namedtuple, _replace its public way to swap a field)
            own, final = rnn(
                input._replace(data=x) if packed else x, self._layer_state(state, layer)
            )
            below = self.hand_up(layer, own.data if packed else own, below)
            finals.append(final)
        output = input._replace(data=below) if packed else below
        if isinstance(finals[0], tuple):
            joined = (torch.cat([f[0] for f in finals]), torch.cat([f[1] for f in finals]))
        else:
            joined = torch.cat(finals)
        return output, joined
