"""The attentional RNN decoder, in Bahdanau's, Luong's and the conditional order of operations.

bahdanau (query = previous state):
    c_i  = attend(s_{i-1})
    s_i  = f(s_{i-1}, [y_{i-1}; c_i (; h~_{i-1} with input feeding)])
    h~_i = tanh(W_o [s_i; c_i; y_{i-1}])                       (deep output)
luong (query = current state):
    s_i  = f(s_{i-1}, [y_{i-1} (; h~_{i-1} with input feeding)])
    c_i  = attend(s_i)
    h~_i = tanh(W_c [c_i; s_i])
conditional (two transitions per step, query = intermediate state; Sennrich et al. 2017):
    s'_i = f1(s_{i-1}, [y_{i-1} (; h~_{i-1} with input feeding)])
    c_i  = attend(s'_i)
    s_i  = f2(s'_i, c_i)                                       (top layer of s'_i)
    h~_i = tanh(W_o [s_i; c_i; y_{i-1}])                       (deep output)
all:
    p(y_i | y_<i, x) = softmax(W_s h~_i)

With attention ``none`` the context is the fixed summary c of the bridge at every step (Cho et
al. 2014).

f (and f1) may be a stack of layers joined by residual connections and layer normalisation
(nmt_cli/model/stacked.py): layer l carries its own state s^l_i from step to step and hands up
    residual:    h^l_i = s^l_i + h^{l-1}_i  (l >= 2),  else h^l_i = s^l_i
    layer_norm:  layer l >= 2 reads LN^{l-1}(h^{l-1}_i) instead of h^{l-1}_i
The stack's output h^L_i stands for s_i (s'_i) where the equations above read the current step's
state: the luong and conditional query, the state f2 starts from, and h~. The states carried to
the next step, the bridge's s_0, the bahdanau query s_{i-1} and c_0's query are the layers' own
s^l.

``initial_state_attention`` (luong and conditional order) is TensorFlow's legacy
``attention_decoder`` with ``initial_state_attention=True``: the RNN input of step i also carries
the previous step's attention read-out c_{i-1} (the heads' contexts, concatenated, before any
projection), and c_0 = attend(s_0) is computed from the initial state before the first step:
    s_i = f(s_{i-1}, [y_{i-1} (; h~_{i-1} with input feeding); c_{i-1}]),  c_0 = attend(s_0)
(conditional order: f1 reads that input). The bahdanau order already attends from s_{i-1}, so from
s_0 at the first step, and a fixed-context decoder has nothing to attend with: for them the
recipe refuses the option.

Training takes a fused path when no step depends on the previous step's output: Luong order (or
Bahdanau order with a fixed context) without input feeding and without scheduled sampling. The RNN
then runs over the whole target in one call and attention for all steps is a few batched matrix
products.

Decoding a prepared model (nmt_cli/model/fast_decoding.py) runs the same equations through the
paths installed on the decoder: ``rnn_step`` for the RNN of one step, ``tanh`` for h~'s, and
``fold_context``, which lets beam search fold W_c into the attention values.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from nmt_cli.data.tokenizer import PAD
from nmt_cli.model.attention import Attention, AttentionMemory
from nmt_cli.model.stacked import PLAIN_STACK, RNN_CLASSES, Between, stacked_rnn


@dataclass
class DecoderState:
    hidden: torch.Tensor  # (layers, B, H)
    cell: torch.Tensor | None  # (layers, B, H) for an LSTM
    feed: torch.Tensor | None  # (B, D) h~_{i-1}, with input feeding
    read_out: torch.Tensor | None = None  # (B, C) c_{i-1}, with initial_state_attention
    # After a select that repeats rows (beam search: several hypotheses continue one parent),
    # the distinct rows' hidden states (layers, U, H) and each row's place among them, for a
    # decoding step that computes W_hh h once per parent (``share_parents``)
    parents: tuple[torch.Tensor, torch.Tensor] | None = None
    share_parents: bool = False

    def rnn_state(self):
        return (self.hidden, self.cell) if self.cell is not None else self.hidden

    def select(self, index: torch.Tensor) -> DecoderState:
        parents = None
        if self.share_parents:
            distinct, place = torch.unique(index, return_inverse=True)
            if len(distinct) < len(index):
                parents = (self.hidden.index_select(1, distinct), place)
        return DecoderState(
            self.hidden.index_select(1, index),
            None if self.cell is None else self.cell.index_select(1, index),
            None if self.feed is None else self.feed.index_select(0, index),
            None if self.read_out is None else self.read_out.index_select(0, index),
            parents,
            self.share_parents,
        )


@dataclass
class DecoderMemory:
    """What every decoding step reads about the source batch.

    ``hypotheses`` > 1 (beam search): each source row is read by that many consecutive decoder
    rows, the hypotheses of one sentence, which attention then takes as that many queries against
    one copy of the sentence's states, rather than each against a copy of its own."""

    attention: AttentionMemory | None  # None for the fixed-context decoder
    summary: torch.Tensor  # (B, H) the bridge's fixed context c
    hypotheses: int = 1
    # (W, b) that the decoder applies to c next, to fold into the values once the memory is
    # shared by several hypotheses (Decoder.context_projection)
    fold: tuple[torch.Tensor, torch.Tensor] | None = None

    def select(self, index: torch.Tensor) -> DecoderMemory:
        """The source rows ``index`` (sentences, not hypotheses)."""
        return DecoderMemory(
            None if self.attention is None else self.attention.select(index),
            self.summary.index_select(0, index),
            self.hypotheses,
            self.fold,
        )

    def shared_by(self, hypotheses: int) -> DecoderMemory:
        """Read by ``hypotheses`` decoder rows per sentence. With several, and a ``fold`` given,
        the decoder's product with c moves into the attention values (``AttentionMemory.project``):
        beam search reads the context many times per source position. One row per sentence
        (greedy search) reads it too few times for that to pay, and keeps the plain path."""
        attention = self.attention
        if (
            hypotheses > 1
            and self.fold is not None
            and attention is not None
            and not attention.projected
        ):
            attention = attention.project(*self.fold)
        return DecoderMemory(attention, self.summary, hypotheses, self.fold)

    @property
    def folded(self) -> bool:
        """Do the attention values already carry W_c (``Decoder.context_projection``)?"""
        return self.attention is not None and self.attention.projected


class Decoder(nn.Module):
    def __init__(
        self,
        *,
        rnn: str,
        embedding: nn.Embedding,
        hidden_dim: int,
        layers: int,
        memory_dim: int,
        attention: Attention | None,
        order: str,
        input_feeding: bool,
        initial_state_attention: bool,
        out_dim: int,
        dropout: float,
        between: Between = PLAIN_STACK,
    ):
        super().__init__()
        if initial_state_attention and (attention is None or order == "bahdanau"):
            raise ValueError(
                "initial_state_attention needs attention and the luong or conditional order"
            )
        self.embedding = embedding
        self.attention = attention
        self.order = order
        self.input_feeding = input_feeding
        self.initial_state_attention = initial_state_attention
        self.out_dim = out_dim
        self.context_dim = attention.context_dim if attention is not None else memory_dim
        embed_dim = embedding.embedding_dim
        # Bahdanau order, and any fixed-context decoder, read c_i as an RNN input.
        self.context_as_input = order == "bahdanau" or attention is None
        # Bahdanau and conditional order feed y_{i-1} to the output layer too (deep output).
        self.deep_output = order != "luong"
        rnn_in = (
            embed_dim
            + (self.context_dim if self.context_as_input else 0)
            + (out_dim if input_feeding else 0)
            + (self.context_dim if initial_state_attention else 0)
        )
        self.rnn = stacked_rnn(
            rnn,
            rnn_in,
            hidden_dim,
            layers,
            dropout=dropout,
            residual=between.residual,
            layer_norm=between.layer_norm,
        )
        # The conditional order's second transition f2 reads c_i into the top layer's state.
        self.transition = (
            RNN_CLASSES[rnn](self.context_dim, hidden_dim, batch_first=True)
            if order == "conditional"
            else None
        )
        combine_in = hidden_dim + self.context_dim + (embed_dim if self.deep_output else 0)
        self.combine = nn.Linear(combine_in, out_dim)
        self.dropout = nn.Dropout(dropout)
        # The decoding paths (nmt_cli/model/fast_decoding.py); these are the plain ones
        self.rnn_step = None  # one step's RNN from y_{i-1}'s ids; None: self.rnn
        self.tanh = torch.tanh  # h~'s tanh
        self.fold_context = False  # may beam search fold W_c into the attention values?

    # ------------------------------------------------------------------ pieces

    def _attend(self, memory: DecoderMemory, query: torch.Tensor):
        """query (B, T, H) -> context (B, T, C), weights (B, T, S) or None. With G hypotheses per
        source row, the (B*G, 1, H) queries of a step go in as (B, G, H): G queries per sentence."""
        rows, steps, _ = query.shape
        group = memory.hypotheses
        if group > 1:
            query = query.reshape(rows // group, group * steps, -1)
        if self.attention is None:
            b, t, _ = query.shape
            context, weights = memory.summary.unsqueeze(1).expand(b, t, -1), None
        else:
            context, weights = self.attention(memory.attention, query)
        if group > 1:
            context = context.reshape(rows, steps, -1)
            weights = None if weights is None else weights.reshape(rows, steps, -1)
        return context, weights

    def _attentional_hidden(
        self, s: torch.Tensor, c: torch.Tensor, e: torch.Tensor | None, folded: bool = False
    ) -> torch.Tensor:
        """h~ = tanh(W_c [c; s] + b) (luong) or tanh(W_o [s; c; y_{i-1}] + b) (bahdanau,
        conditional). ``folded``: c is already W_c[:, :C] c + b (``context_projection``), so
        h~ = tanh(that + W_c[:, C:] s)."""
        if folded:
            w_s = self.combine.weight[:, self.context_dim :]
            out = torch.addmm(c.reshape(-1, c.size(-1)), s.reshape(-1, s.size(-1)), w_s.t())
            return self.dropout(self.tanh(out).view(*c.shape[:-1], -1))
        parts = [s, c, e] if self.deep_output else [c, s]
        return self.dropout(self.tanh(self.combine(torch.cat(parts, dim=-1))))

    def context_projection(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(W_c[:, :C], b) to fold into the attention values when beam search decodes in Luong
        order (``DecoderMemory.shared_by``), where c_i is read only by h~ = tanh(W_c [c; s] + b):
        the product with c then runs once per source position, not once per step and hypothesis.
        Only for a model prepared for decoding that allows it (``fold_context``: not in the other
        orders or with ``initial_state_attention``, which read c itself, nor for a combine layer
        that is not PyTorch's own Linear, an int8-quantised one, say); else None."""
        if not self.fold_context:
            return None
        return self.combine.weight[:, : self.context_dim], self.combine.bias

    def fused(self, sampling: bool) -> bool:
        """Can training run all steps at once (no step reads the previous step's output)?"""
        return (
            not self.input_feeding
            and not sampling
            and self.transition is None
            and not self.initial_state_attention
            and (self.order == "luong" or self.attention is None)
        )

    def _second_transition(
        self,
        c: torch.Tensor,
        intermediate: torch.Tensor,
        hidden: torch.Tensor,
        cell: torch.Tensor | None,
    ):
        """Conditional order: s_i = f2(s'_i, c_i) on the top layer; c (B, 1, C) and s'_i
        (B, 1, H), f1's output, -> s_i (B, 1, H) and the stacked state with its top layer
        replaced. (A plain f1's output is its top layer's state; a stack's is h^L.)"""
        start = intermediate.transpose(0, 1)
        top = start if cell is None else (start, cell[-1:])
        out, top = self.transition(c, top)
        top_hidden, top_cell = top if isinstance(top, tuple) else (top, None)
        hidden = torch.cat([hidden[:-1], top_hidden])
        if cell is not None:
            cell = torch.cat([cell[:-1], top_cell])
        return out, hidden, cell

    def init_state(
        self, hidden: torch.Tensor, cell: torch.Tensor | None, memory: DecoderMemory
    ) -> DecoderState:
        """s_0 from the bridge; h~_0 = 0 with input feeding; c_0 = attend(s_0) (top layer's state
        as the query) with initial_state_attention."""
        feed = hidden.new_zeros(hidden.size(1), self.out_dim) if self.input_feeding else None
        read_out = None
        if self.initial_state_attention:
            read_out = self._attend(memory, hidden[-1].unsqueeze(1))[0].squeeze(1)
        share = self.rnn_step is not None and self.rnn_step.share_parents
        return DecoderState(hidden, cell, feed, read_out, share_parents=share)

    # ------------------------------------------------------------------ one step

    def step(self, prev: torch.Tensor, state: DecoderState, memory: DecoderMemory):
        """One step for search and for step-by-step training.

        prev (B,) ids of y_{i-1} -> h~_i (B, D), new state, attention weights (B, S) or None.
        A prepared model's ``rnn_step`` reads y_{i-1} by its ids, so the embedding is looked up
        only where the output layer reads it too (deep output).
        """
        e = None
        if self.rnn_step is None or self.deep_output:
            e = self.dropout(self.embedding(prev)).unsqueeze(1)  # (B, 1, E)
        return self._advance(e, state, memory, prev)

    def _advance(
        self,
        e: torch.Tensor | None,
        state: DecoderState,
        memory: DecoderMemory,
        prev: torch.Tensor | None = None,
    ):
        """The step from y_{i-1}: its embedding e (B, 1, E) and, given, its ids ``prev`` (B,),
        which ``rnn_step`` reads instead of e when the model is prepared for decoding."""
        extra = []
        weights = None
        if self.context_as_input:
            c, weights = self._attend(memory, state.hidden[-1].unsqueeze(1))  # query s_{i-1}
            extra.append(c)
        if self.input_feeding:
            extra.append(state.feed.unsqueeze(1))
        if self.initial_state_attention:
            extra.append(state.read_out.unsqueeze(1))  # c_{i-1}
        if prev is None or self.rnn_step is None:
            out, rnn_state = self.rnn(
                torch.cat([e, *extra], dim=-1) if extra else e, state.rnn_state()
            )
            hidden, cell = rnn_state if isinstance(rnn_state, tuple) else (rnn_state, None)
        else:
            hidden, cell, out = self.rnn_step(prev, extra, state)
            out = out.unsqueeze(1)
        if not self.context_as_input:
            c, weights = self._attend(memory, out)  # query s_i (or s'_i)
        if self.transition is not None:
            out, hidden, cell = self._second_transition(c, out, hidden, cell)
        h_tilde = self._attentional_hidden(out, c, e, memory.folded).squeeze(1)
        new_state = DecoderState(
            hidden,
            cell,
            h_tilde if self.input_feeding else None,
            c.squeeze(1) if self.initial_state_attention else None,
            share_parents=state.share_parents,
        )
        return h_tilde, new_state, (None if weights is None else weights.squeeze(1))

    # ------------------------------------------------------------------ whole target

    def forward(
        self,
        tgt_in: torch.Tensor,
        state: DecoderState,
        memory: DecoderMemory,
        output_layer=None,
        sampling_prob: torch.Tensor | float = 0.0,
    ):
        """Teacher-forced (or scheduled-sampling) pass over tgt_in (B, T).

        Returns h~ (B, T, D) and attention weights (B, T, S) or None. ``output_layer`` maps h~ to
        logits; it is needed only when predictions are fed back (scheduled sampling).
        """
        sampling = not (isinstance(sampling_prob, float) and sampling_prob == 0.0)
        if self.fused(sampling):
            return self._forward_fused(tgt_in, state, memory)
        return self._forward_steps(
            tgt_in, state, memory, output_layer, sampling_prob if sampling else None
        )

    def _forward_fused(self, tgt_in, state: DecoderState, memory: DecoderMemory):
        e = self.dropout(self.embedding(tgt_in))  # (B, T, E)
        if self.attention is None:
            c = memory.summary.unsqueeze(1).expand(-1, e.size(1), -1)
            out, _ = self.rnn(torch.cat([e, c], dim=-1), state.rnn_state())
            return self._attentional_hidden(out, c, e), None
        out, _ = self.rnn(e, state.rnn_state())  # s_1 .. s_T at once
        c, weights = self.attention(memory.attention, out)
        return self._attentional_hidden(out, c, None), weights

    def _forward_steps(
        self, tgt_in, state: DecoderState, memory: DecoderMemory, output_layer, sampling_prob
    ):
        """Step by step, with the embeddings of a teacher-forced target looked up at once. Outputs
        are gathered in lists and stacked once: writing each step into a preallocated tensor makes
        autograd copy the whole gradient once per step. Training keeps nn.GRU/LSTM for the cell:
        the hand-written one of decoding is no faster under autograd."""
        b, t = tgt_in.shape
        e_steps = None
        if sampling_prob is None:
            # split, not indexing: the backward of t slices would zero-fill t full-size gradients
            e_steps = self.dropout(self.embedding(tgt_in)).split(1, dim=1)
        outputs, all_weights = [], []
        prev = tgt_in[:, 0]
        for i in range(t):
            e = (
                e_steps[i]
                if e_steps is not None
                else self.dropout(self.embedding(prev)).unsqueeze(1)
            )
            h_tilde, state, weights = self._advance(e, state, memory)
            outputs.append(h_tilde)
            if weights is not None:
                all_weights.append(weights)
            if sampling_prob is not None and i + 1 < t:
                prev = tgt_in[:, i + 1]
                with torch.no_grad():
                    predicted = output_layer(h_tilde).argmax(-1)
                    use_own = torch.rand(b, device=tgt_in.device) < sampling_prob
                    prev = torch.where(use_own & (prev != PAD), predicted, prev)
        return torch.stack(outputs, 1), (torch.stack(all_weights, 1) if all_weights else None)
