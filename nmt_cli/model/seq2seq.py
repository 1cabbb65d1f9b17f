"""The whole encoder-decoder: embeddings, encoder, bridge, attention, decoder, output layer.

    p(y_i | y_<i, x) = softmax(W_s h~_i)

With ``tie_embeddings`` W_s is the target embedding matrix, so h~ has the embedding size. With
``share_embeddings`` (joint vocabulary) source and target read one embedding table.

The search contract used by greedy and beam search is three calls: ``encode`` -> (state, memory),
``step`` -> (log-probabilities, state, attention weights), and ``select`` on state and memory, with
``memory.shared_by(K)`` for beam search's K hypotheses per sentence.
"""

from __future__ import annotations

import weakref

import torch
import torch.nn.functional as F
from torch import nn

from nmt_cli.config import ModelConfig
from nmt_cli.model.attention import Attention, CosineScore
from nmt_cli.model.bridge import Bridge
from nmt_cli.model.decoder import Decoder, DecoderMemory, DecoderState
from nmt_cli.model.encoder import Encoder
from nmt_cli.model.loss import output_loss
from nmt_cli.tokenizer import PAD

# Rows of the output layer's groups (8 sentences' hypotheses at beam 5); grouping is used when
# the groups' products would do at most GROUPED_SHARE of the arithmetic of one product over the union.
GROUP_ROWS = 40
GROUPED_SHARE = 0.7
# bf16 on the CPU: oneDNN plans a matrix product for each new shape it meets (about 1 ms, against
# 0.1-0.5 ms for the product itself), so the output layer's width (the shortlist union) is rounded
# up to a multiple of this many columns (search._pad_union): 398 distinct shapes in beam 5 on
# test_2016 otherwise. Nor are rows grouped in bf16, where a product costs less than the
# groups' bookkeeping (beam 5: 2.11-2.32 s against 2.39-2.58 s, docs/lab/beam-step.md)
COLUMN_MULTIPLE = 64


def _output_plan(allowed: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor):
    """How the rows of a shortlisted batch go through the output layer: a list of (first row,
    columns of the union or None for all of them, those rows of W_s, offsets b or -inf for the
    rows over those columns). One entry over the whole union, unless runs of GROUP_ROWS rows,
    each over its own run's union, save enough arithmetic; never off the CPU, where the one
    product costs little and each group would add kernel launches, nor in bf16."""
    neg_inf = bias.new_full((), float("-inf"))
    whole = lambda: [(0, None, weight, torch.where(allowed, bias, neg_inf))]  # noqa: E731
    rows, union = allowed.shape
    if allowed.device.type != "cpu" or rows <= GROUP_ROWS or weight.dtype == torch.bfloat16:
        return whole()
    groups = -(-rows // GROUP_ROWS)
    padded = allowed if groups * GROUP_ROWS == rows else \
        torch.cat([allowed, allowed.new_zeros(groups * GROUP_ROWS - rows, union)])
    # amax over bytes: torch's any(dim=1) over bools took 16x as long (1.3 ms a plan here)
    used = padded.view(torch.uint8).view(groups, GROUP_ROWS, union).amax(dim=1).bool()  # (groups, union)
    widths = used.sum(dim=1)
    group_rows = torch.full((groups,), GROUP_ROWS)
    group_rows[-1] = rows - (groups - 1) * GROUP_ROWS
    if int((widths * group_rows).sum()) > GROUPED_SHARE * rows * union:
        return whole()
    # All groups' columns, rows of W_s and b at once (one copy each), then split per group
    columns = used.nonzero(as_tuple=True)[1]
    weights, biases = weight.index_select(0, columns), bias.index_select(0, columns)
    plan, at = [], 0
    for g, width in enumerate(widths.tolist()):
        start, cols = g * GROUP_ROWS, columns[at:at + width]
        mask = allowed[start:start + GROUP_ROWS].index_select(1, cols)
        plan.append((start, cols, weights[at:at + width], torch.where(mask, biases[at:at + width], neg_inf)))
        at += width
    return plan


class Seq2Seq(nn.Module):
    def __init__(self, cfg: ModelConfig, src_vocab: int, tgt_vocab: int):
        super().__init__()
        self.cfg = cfg
        self.src_embedding = nn.Embedding(src_vocab, cfg.embed_dim, padding_idx=PAD)
        if cfg.share_embeddings and src_vocab == tgt_vocab:
            self.tgt_embedding = self.src_embedding
        else:
            self.tgt_embedding = nn.Embedding(tgt_vocab, cfg.embed_dim, padding_idx=PAD)
        self.encoder = Encoder(cfg.rnn, self.src_embedding, cfg.hidden_dim, cfg.layers,
                               cfg.bidirectional, cfg.dropout)
        self.bridge = Bridge(cfg.bridge, cfg.hidden_dim, cfg.layers, cfg.rnn == "lstm")
        attention = None
        if cfg.attention != "none":
            attention = Attention(cfg.attention, cfg.hidden_dim, cfg.hidden_dim, cfg.attention_heads)
        out_dim = cfg.embed_dim if cfg.tie_embeddings else cfg.hidden_dim
        self.decoder = Decoder(rnn=cfg.rnn, embedding=self.tgt_embedding, hidden_dim=cfg.hidden_dim,
                               layers=cfg.layers, memory_dim=cfg.hidden_dim, attention=attention,
                               order=cfg.decoder, input_feeding=cfg.input_feeding,
                               initial_state_attention=cfg.initial_state_attention,
                               out_dim=out_dim, dropout=cfg.dropout)
        self.output = nn.Linear(out_dim, tgt_vocab)
        self._initialize(cfg.init)
        if cfg.tie_embeddings:
            self.output.weight = self.tgt_embedding.weight

    def _initialize(self, how: str) -> None:
        """embedding: N(0, 1) embeddings, PyTorch's defaults elsewhere (U(±1/sqrt(fan_in)));
        uniform: every parameter U(-0.1, 0.1) (Luong et al. 2015); xavier: Glorot matrices, zero biases.
        The cosine score's scale g is not a weight to draw: it starts at sqrt(Hm) under every init."""
        if how == "embedding":
            nn.init.normal_(self.src_embedding.weight, 0.0, 1.0)
            nn.init.normal_(self.tgt_embedding.weight, 0.0, 1.0)
        for name, p in self.named_parameters():
            if how == "uniform":
                nn.init.uniform_(p, -0.1, 0.1)
            elif how == "xavier":
                if p.dim() > 1:
                    nn.init.xavier_uniform_(p)
                else:
                    nn.init.zeros_(p)
        for module in self.modules():
            if isinstance(module, CosineScore):
                module.reset_scale()
        with torch.no_grad():
            self.src_embedding.weight[PAD].zero_()
            self.tgt_embedding.weight[PAD].zero_()

    # ------------------------------------------------------------------ search contract

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor) -> tuple[DecoderState, DecoderMemory]:
        enc = self.encoder(src, src_lengths)
        hidden, cell, summary = self.bridge(enc)
        attention = self.decoder.attention
        memory = DecoderMemory(None if attention is None else attention.prepare(enc.states, enc.mask), summary,
                               fold=self.decoder.context_projection())
        return self.decoder.init_state(hidden, cell, memory), memory

    def step(self, prev: torch.Tensor, state: DecoderState, memory: DecoderMemory,
             vocab: torch.Tensor | None = None, allowed: torch.Tensor | None = None):
        """prev (B,) -> log p(y | ...) (B, V), new state, attention weights (B, S) or None.
        With ``vocab`` (sorted target ids) only those rows of W_s are used: (B, len(vocab)); with
        ``allowed`` (B, len(vocab)) bool each row is normalised over its own True entries."""
        h_tilde, state, weights = self.decoder.step(prev, state, memory)
        if vocab is None:
            logits = self.output(h_tilde)
        else:
            weight, bias = self._output_rows(vocab)
            if allowed is None:
                logits = F.linear(h_tilde, weight, bias)
            else:
                logits = self._restricted_logits(h_tilde, weight, bias, allowed)
        # fp32 log-probabilities whatever the model's precision (bf16 decoding): the cast happens
        # inside log_softmax, without a separate copy of the logits
        low = logits.dtype in (torch.float16, torch.bfloat16)
        return F.log_softmax(logits, dim=-1, dtype=torch.float32 if low else None), state, weights

    def _restricted_logits(self, h_tilde: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                           allowed: torch.Tensor) -> torch.Tensor:
        """(B, U) logits over the union ``vocab``: W_s h~ + b on each row's own set, -inf elsewhere.

        The offsets (b, or -inf off a row's set) ride in the product, and the plan is built once
        per batch and per narrowing of its union, not at every step. The union of a batch's sets is
        several times one row's set (test_2016, batches of 64: about 2,000-3,000 columns against
        450), so on the CPU rows may go through in groups of ``GROUP_ROWS`` consecutive rows (a
        few sentences' hypotheses), each multiplied by its own group's union only; the other
        columns stay -inf, as they are in the one product (``_output_plan``)."""
        plan = self._per_batch("_plan_cache", (allowed, weight, bias),
                               lambda: _output_plan(allowed, weight, bias))
        if plan[0][1] is None:
            return torch.addmm(plan[0][3], h_tilde, weight.t())
        logits = h_tilde.new_full((h_tilde.size(0), weight.size(0)), float("-inf"))
        for start, columns, group_weight, group_offsets in plan:
            stop = start + group_offsets.size(0)
            logits[start:stop].index_copy_(1, columns, torch.addmm(group_offsets, h_tilde[start:stop],
                                                                   group_weight.t()))
        return logits

    def _output_rows(self, vocab: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """W_s and b rows for ``vocab``, cut once per batch (and once per narrowing of its union,
        search._narrow) rather than once per step."""
        def cut():
            weight, bias = self.output.weight, self.output.bias
            if callable(weight):  # an int8 dynamic-quantised layer keeps them behind methods
                weight, bias = weight().dequantize(), bias()
            return weight.index_select(0, vocab), bias.index_select(0, vocab)
        return self._per_batch("_rows_cache", (vocab,), cut)

    def _per_batch(self, name: str, keys: tuple[torch.Tensor, ...], build):
        """``build()``, remembered while ``keys`` are the very same tensors: keyed by the tensors
        themselves, so batches decoded side by side in threads keep their own. The entry holds
        weak references to the keys and leaves the cache when the first key is freed (its batch,
        or the union it had before narrowing, is done), so a long-running server keeps no more
        than the batches in flight."""
        cache = self.__dict__.setdefault(name, {})
        slot = id(keys[0])
        hit = cache.get(slot)
        if hit is None or any(ref() is not key for ref, key in zip(hit[0], keys)):
            if len(cache) >= 16:  # a bound all the same, should a caller keep its keys alive
                cache.clear()
            hit = cache[slot] = (tuple(weakref.ref(key) for key in keys), build())
            weakref.finalize(keys[0], cache.pop, slot, None)
        return hit[1]

    # ------------------------------------------------------------------ training

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor, tgt_in: torch.Tensor,
                sampling_prob: float | torch.Tensor = 0.0, tgt_out: torch.Tensor | None = None,
                label_smoothing: float = 0.0):
        """Teacher-forced logits (B, T, V) and attention weights (B, T, S) or None.

        Given ``tgt_out``, the first value is instead the summed (label-smoothed) cross-entropy
        over its non-pad tokens, from ``output_loss`` without a (B, T, V) logits tensor. It is
        an argument of forward, not a separate method, so DistributedDataParallel sees the call.
        """
        state, memory = self.encode(src, src_lengths)
        h_tilde, weights = self.decoder(tgt_in, state, memory, self.output, sampling_prob)
        if tgt_out is not None:
            return output_loss(h_tilde, self.output.weight, self.output.bias, tgt_out, label_smoothing), weights
        return self.output(h_tilde), weights

    def parameter_count(self) -> int:
        return sum(p.numel() for p in self.parameters())
