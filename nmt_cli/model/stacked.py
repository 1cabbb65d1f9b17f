"""Stacked RNN layers, optionally with residual connections and layer normalisation between them.

Layer l reads x^l and runs its recurrence o^l = RNN^l(x^l), o^l being the layer's own states, the
ones it carries from step to step. What it hands up is h^l:

    plain:       h^l = o^l
    residual:    h^l = o^l + x^l                   for l >= 2, where x^l = h^{l-1} has o^l's size
    layer_norm:  h^l = LN^l(o^l (+ x^l)),  LN(v) = g ⊙ (v - μ) / σ + b
                 μ = mean_k v_k,  σ = sqrt(mean_k (v_k - μ)² + ε),  g, b learned per layer
    x^1 = the stack's input,  x^{l+1} = dropout(h^l);  the stack's output is h^L

For a BiRNN layer o^l = [→o^l; ←o^l] and LN normalises both directions together. Layer
normalisation acts on what a layer hands up, not inside its cell (Ba et al. 2016 normalise each
gate's pre-activations): the recurrence stays PyTorch's own GRU, LSTM or Elman module, which trains
with its fused kernels and whose cell the decoding path writes out as it is
(nmt_cli/model/fast_decoding.py); the states the bridge sets and the final states it reads stay
the unnormalised o^l, and the next layer, attention and the output layer read normalised h^l.

With neither option the stack is PyTorch's own multi-layer module, whose parameters (and their
names in a checkpoint) and whose dropout between layers are today's.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence

RNN_CLASSES = {"gru": nn.GRU, "lstm": nn.LSTM, "rnn": nn.RNN}


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
    without residual connections or layer normalisation, else a :class:`StackedRNN`."""
    if not (residual or layer_norm):
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
        self.norms = (
            nn.ModuleList(nn.LayerNorm(width) for _ in range(layers)) if layer_norm else None
        )
        self.dropout = nn.Dropout(dropout if layers > 1 else 0.0)

    def hand_up(self, layer: int, own: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """h^l from layer ``layer``'s (0-based) own states o^l and its input x^l."""
        if self.residual and layer > 0:
            own = own + x
        if self.norms is not None:
            own = self.norms[layer](own)
        return own

    def _layer_state(self, state, layer: int):
        if state is None:
            return None
        rows = slice(layer * self.directions, (layer + 1) * self.directions)
        if isinstance(state, tuple):
            return state[0][rows], state[1][rows]
        return state[rows]

    def forward(self, input, state=None):
        packed = isinstance(input, PackedSequence)
        x = input.data if packed else input
        finals = []
        for layer, rnn in enumerate(self.layers):
            if layer > 0:
                x = self.dropout(x)
            # a packed input's rows are its real positions: the layer reads them with the same
            # packing (PackedSequence is a namedtuple, _replace its public way to swap a field)
            own, final = rnn(
                input._replace(data=x) if packed else x, self._layer_state(state, layer)
            )
            x = self.hand_up(layer, own.data if packed else own, x)
            finals.append(final)
        output = input._replace(data=x) if packed else x
        if isinstance(finals[0], tuple):
            joined = (torch.cat([f[0] for f in finals]), torch.cat([f[1] for f in finals]))
        else:
            joined = torch.cat(finals)
        return output, joined
