"""Preparing a model for decoding: the computation paths that give the plain modules' values
faster at decoding time, installed once for a device and a dtype.

A prepared model is frozen (eval mode, decoded without gradients), so what depends on its weights
alone is computed here once. ``prepare_for_decoding`` decides, from the model's device and dtype,
which paths apply, installs them on the modules and returns the ``DecodingSetup`` that search
reads instead of asking the tensors again; ``undo_preparation`` takes them off. A model that
nobody prepared (validation's, during training) is prepared for each ``translate.decode_ids``
call and restored after it, so that the next call reads the weights of its moment. The paths:

- ``TableRNNStep`` (CPU): the decoder's RNN (a StackedRNN's too) for one step, from a table of
  its first layer's input projection of every target word, W_ih[:, :E] E_y + b_ih, looked up
  instead of multiplied, and the cell written out by hand, so that the recurrent product runs
  once per distinct parent row when beam search continues one hypothesis several times
  (``share_parents``, not in bf16, where a new row count costs more than it saves). On a GPU
  cuDNN runs the whole step as one kernel.
- ``DecodingConcatScore``: the additive score a few sentences at a time, so that its
  (B, K, T, S, A) hidden tensor stays in the cache; on the CPU in fp32 and bf16 also in
  exponential form, sigmoid(a + b) = 1 / (1 + e^-a e^-b), with e^-a of the keys computed once per
  batch: a multiply-add and a reciprocal per element where the plain form has an add and an
  exponential.
- ``tanh_through_fp32`` (CPU, bf16): tanh taken in fp32 and rounded to bf16; torch's bf16 tanh
  computes the same values the same way, with a slower kernel.
- the context fold (Luong order): beam search's hypotheses read one memory row per sentence, so
  W_c's product with the context moves into the attention values (``AttentionMemory.project``)
  and runs once per source position rather than once per step and hypothesis.
- for search: the shortlist's columns in row groups (CPU, fp32), and in bf16 on the CPU the
  union's width and the batch's rows rounded up to whole multiples, as oneDNN plans a matrix
  product anew for every shape it meets.

docs/results.md has the measurements behind these choices.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from nmt_cli.model.attention import ConcatScore
from nmt_cli.model.stacked import StackedRNN

# Search's shortlist columns in row groups (CPU, fp32): GROUP_ROWS rows in greedy search, about
# BEAM_GROUP_ROWS in beam search (whole sentences' hypotheses)
GROUP_ROWS = 8
BEAM_GROUP_ROWS = 20
# bf16 on the CPU: the union's columns, greedy search's rows and beam search's sentences are kept
# at whole multiples of these
COLUMN_MULTIPLE = 64
ROW_MULTIPLE, SENTENCE_MULTIPLE = 16, 4
# The additive score's hidden tensor is computed this many elements at a time when decoding
CHUNK_ELEMENTS = 1 << 19
EXP_LIMIT = 80.0  # e^80 = 5.5e34: within fp32's and bf16's range (fp16's ends at e^11)


@dataclass(frozen=True)
class DecodingSetup:
    """What a prepared model decodes with, for search to read. The default is the plain setup of
    a model nobody prepared: no row groups, no rounding."""

    device: torch.device | None = None
    dtype: torch.dtype | None = None
    group_rows: int = 0  # greedy search: shortlist columns in groups of this many rows; 0 = none
    beam_group_rows: int = 0  # beam search: about this many rows a group (whole sentences)
    column_multiple: int = 1  # the shortlist union's width is a multiple of this
    row_multiple: int = 1  # greedy search keeps its rows a multiple of this
    sentence_multiple: int = 1  # beam search keeps its sentences a multiple of this

    @property
    def bf16_on_cpu(self) -> bool:
        return (
            self.dtype == torch.bfloat16 and self.device is not None and self.device.type == "cpu"
        )

    def beam_groups(self, beam_size: int) -> int:
        """Rows a group in beam search: whole sentences' K hypotheses each (0: no groups)."""
        if not self.beam_group_rows:
            return 0
        return beam_size * max(1, self.beam_group_rows // beam_size)


PLAIN = DecodingSetup()


def setup_of(model) -> DecodingSetup:
    """The setup ``model`` was prepared with; the plain one for a model (or any object with the
    search contract) that nobody prepared."""
    return getattr(model, "decoding_setup", None) or PLAIN


def unprepared(model) -> bool:
    """Is ``model`` a Seq2Seq or Ensemble that nobody prepared for decoding?"""
    return isinstance(model, nn.Module) and getattr(model, "decoding_setup", False) is None


def _members(model) -> list[nn.Module]:
    """The Seq2Seq models inside ``model`` (itself, or an ensemble's members)."""
    return list(model.models) if hasattr(model, "models") else [model]


@torch.no_grad()
def prepare_for_decoding(model: nn.Module) -> DecodingSetup:
    """Put ``model`` (a Seq2Seq, an int8 one, or an Ensemble of them) in eval mode and install the
    decoding paths its device and dtype allow (module doc); returns the setup, also kept as
    ``model.decoding_setup``. Call it after the last change to the weights, device or dtype."""
    model.eval()
    undo_preparation(model)
    first = next(model.parameters())
    device, dtype = first.device, first.dtype
    on_cpu = device.type == "cpu"
    bf16 = dtype == torch.bfloat16
    for member in _members(model):
        decoder = member.decoder
        tanh = tanh_through_fp32 if on_cpu and bf16 else torch.tanh
        decoder.tanh = tanh
        decoder.rnn_step = (
            TableRNNStep.build(decoder, tanh, share_parents=not bf16) if on_cpu else None
        )
        decoder.fold_context = (
            decoder.attention is not None
            and decoder.order == "luong"
            and not decoder.initial_state_attention
            and type(decoder.combine) is nn.Linear
        )
        attention = decoder.attention
        if attention is not None and isinstance(attention.score, ConcatScore):
            exponential = on_cpu and dtype in (torch.float32, torch.bfloat16)
            attention.decoding_score = DecodingConcatScore(attention.score, exponential)
    grouped = on_cpu and not bf16
    setup = DecodingSetup(
        device,
        dtype,
        group_rows=GROUP_ROWS if grouped else 0,
        beam_group_rows=BEAM_GROUP_ROWS if grouped else 0,
        column_multiple=COLUMN_MULTIPLE if on_cpu and bf16 else 1,
        row_multiple=ROW_MULTIPLE if on_cpu and bf16 else 1,
        sentence_multiple=SENTENCE_MULTIPLE if on_cpu and bf16 else 1,
    )
    model.decoding_setup = setup
    return setup


def undo_preparation(model: nn.Module) -> None:
    """The plain modules again, as before ``prepare_for_decoding``."""
    for member in _members(model):
        decoder = member.decoder
        decoder.tanh, decoder.rnn_step, decoder.fold_context = torch.tanh, None, False
        if decoder.attention is not None:
            decoder.attention.decoding_score = None
    model.decoding_setup = None


@contextmanager
def prepared_for_decoding(model: nn.Module):
    """``prepare_for_decoding`` for the duration of a block, undone at its end (and the model
    back in the mode it was in): for a model that trains on after decoding (validation), whose
    weights the next preparation reads afresh."""
    training = model.training
    try:
        yield prepare_for_decoding(model)
    finally:
        undo_preparation(model)
        model.train(training)


def tanh_through_fp32(x: torch.Tensor) -> torch.Tensor:
    """tanh of a bf16 tensor, taken in fp32 and rounded: torch's own bf16 tanh gives the same
    values, computed the same way."""
    return x.float().tanh_().to(torch.bfloat16)


class TableRNNStep:
    """One step of the decoder's (stacked) RNN from the looked-up input projection, in eval mode.

    gru:  r, z = σ(W_ir x + b_ir + W_hr h + b_hr), σ(W_iz x + b_iz + W_hz h + b_hz)
          n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn)),  h' = (1 - z) ⊙ n + z ⊙ h
    lstm: i, f, g, o = σ, σ, tanh, σ of (W_i x + b_i + W_h h + b_h);  c' = f ⊙ c + i ⊙ g,
          h' = o ⊙ tanh(c')
    rnn:  h' = act(W_i x + b_i + W_h h + b_h)

    For the first layer W_i x + b_i = T[y_{i-1}] + W_ih[:, E:] x_rest, with the table
    T = W_ih[:, :E] E_y + b_ih of every target word and x_rest the input's parts after the
    embedding (context, h~_{i-1}, c_{i-1}). A StackedRNN's layers read and hand up what its own
    do, with its residual connections and layer normalisation (nmt_cli/model/stacked.py).
    """

    def __init__(
        self,
        rnn: nn.Module,
        layers: list[tuple[nn.RNNBase, int]],
        table: torch.Tensor,
        embed_dim: int,
        tanh,
        share_parents: bool,
    ):
        self.rnn, self.layers, self.table = rnn, layers, table
        self.embed_dim, self.tanh, self.share_parents = embed_dim, tanh, share_parents
        self.stack = rnn if isinstance(rnn, StackedRNN) else None

    @classmethod
    def build(cls, decoder, tanh, share_parents: bool) -> TableRNNStep | None:
        """For PyTorch's own RNN modules with biases, alone or in a StackedRNN; None for any
        other (an int8-quantised one, say), whose module then runs each step as it is."""
        rnn = decoder.rnn
        if isinstance(rnn, StackedRNN):
            layers = [(layer, 0) for layer in rnn.layers]
        else:
            layers = [(rnn, k) for k in range(getattr(rnn, "num_layers", 1))]
        if any(type(m) not in (nn.GRU, nn.LSTM, nn.RNN) or not m.bias for m, _ in layers):
            return None
        first = layers[0][0]
        w, b, emb = first.weight_ih_l0, first.bias_ih_l0, decoder.embedding.weight
        table = torch.addmm(b, emb, w[:, : emb.size(1)].t())
        return cls(rnn, layers, table, emb.size(1), tanh, share_parents)

    def __call__(self, prev: torch.Tensor, extra: list[torch.Tensor], state):
        """prev (B,) ids of y_{i-1}, ``extra`` the (B, 1, *) inputs after the embedding ->
        the new (layers, B, H) hidden state, cell (LSTM) or None, and the top layer's output
        (B, H): its hidden state, or a StackedRNN's h^L."""
        e_dim, tanh = self.embed_dim, self.tanh
        projected = self.table.index_select(0, prev)
        rest = torch.cat(extra, dim=-1).squeeze(1) if extra else None
        hidden_in = state.hidden
        size = hidden_in.size(-1)
        hiddens, cells = [], []
        below = None  # what the layer below hands up
        for layer, (rnn, k) in enumerate(self.layers):
            w_ih = getattr(rnn, f"weight_ih_l{k}")
            w_hh, b_hh = getattr(rnn, f"weight_hh_l{k}"), getattr(rnn, f"bias_hh_l{k}")
            if layer == 0:
                gi = (
                    projected if rest is None else torch.addmm(projected, rest, w_ih[:, e_dim:].t())
                )
            else:
                x = below if self.stack is None else self.stack.layer_input(layer, below)
                gi = F.linear(x, w_ih, getattr(rnn, f"bias_ih_l{k}"))
            h = hidden_in[layer]
            if state.parents is None:
                gh = F.linear(h, w_hh, b_hh)
            else:  # W_hh h + b_hh once per distinct parent row
                distinct, place = state.parents
                gh = F.linear(distinct[layer], w_hh, b_hh).index_select(0, place)
            if isinstance(rnn, nn.GRU):
                rz = torch.sigmoid(gi[:, : 2 * size] + gh[:, : 2 * size])
                r, z = rz[:, :size], rz[:, size:]
                n = tanh(torch.addcmul(gi[:, 2 * size :], r, gh[:, 2 * size :]))
                own = torch.lerp(n, h, z)
            elif isinstance(rnn, nn.LSTM):
                i, f, g, o = (gi + gh).chunk(4, dim=1)
                c = torch.sigmoid(f) * state.cell[layer] + torch.sigmoid(i) * tanh(g)
                own = torch.sigmoid(o) * tanh(c)
                cells.append(c)
            else:
                own = tanh(gi + gh) if rnn.nonlinearity == "tanh" else torch.relu(gi + gh)
            hiddens.append(own)
            below = own if self.stack is None else self.stack.hand_up(layer, own, below)
        return torch.stack(hiddens), (torch.stack(cells) if cells else None), below


class DecodingConcatScore:
    """``ConcatScore.scores`` for decoding (module doc): the same score, a few sentences at a
    time and, with ``exponential``, as 2 v^T / (1 + e^{-2 W1 h} e^{-2 W2 s}) - sum(v) while every
    exponent is within +-EXP_LIMIT (checked per batch for the keys, per step for the queries; else
    the plain form), so neither factor is ever 0 or inf: their product may be, which gives the
    sigmoid's own limits 1 and 0, never inf x 0."""

    def __init__(self, score: ConcatScore, exponential: bool):
        self.score, self.exponential = score, exponential

    def exp_keys(self, keys: torch.Tensor) -> torch.Tensor | None:
        """e^{-2 W1 h} from ``keys`` (stored as 2 W1 h); None when out of range or not wanted."""
        if not self.exponential or float(keys.abs().amax()) > EXP_LIMIT:
            return None
        return torch.exp(-keys)

    def __call__(
        self, keys: torch.Tensor, query: torch.Tensor, exp_keys: torch.Tensor | None
    ) -> torch.Tensor:
        score = self.score
        q = score.doubled_query(query)  # (B, K, T, A)
        exponentials = exp_keys is not None and float(q.abs().amax()) <= EXP_LIMIT
        if exponentials:
            keys, q = exp_keys, q.neg_().exp_()
        b, heads, t, _ = q.shape
        v2, shift = 2.0 * score.v, score.v.sum(dim=1).view(1, heads, 1, 1)
        rows = max(1, CHUNK_ELEMENTS // (heads * t * keys.size(2) * score.attn_dim))
        if rows >= b:
            return _scores(keys, q, v2, exponentials) - shift
        out = q.new_empty(b, heads, t, keys.size(2))
        for start in range(0, b, rows):
            out[start : start + rows] = _scores(
                keys[start : start + rows], q[start : start + rows], v2, exponentials
            )
        return out.sub_(shift)


def _scores(keys: torch.Tensor, q: torch.Tensor, v2: torch.Tensor, exponentials: bool):
    """2 v^T sigmoid(keys + q), keys and q already doubled (or, ``exponentials``, both as e^-x)."""
    if not exponentials:
        return ConcatScore.doubled_scores(keys, q, v2)
    hidden = torch.addcmul(keys.new_ones(()), keys.unsqueeze(2), q.unsqueeze(3)).reciprocal_()
    return torch.einsum("bktsa,ka->bkts", hidden, v2)
