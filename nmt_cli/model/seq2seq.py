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
from typing import NamedTuple

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

# bf16 on the CPU: oneDNN plans a matrix product for each new shape it meets (about 1 ms, against
# 0.1-0.5 ms for the product itself), so the output layer's width (the shortlist union) is rounded
# up to a multiple of this many columns (search._pad_union): 398 distinct shapes in beam 5 on
# test_2016 otherwise. Nor are rows grouped in bf16 (search._group_columns), where a product costs
# less than the groups' bookkeeping (beam 5: 2.11-2.32 s against 2.39-2.58 s, docs/lab/beam-step.md)
COLUMN_MULTIPLE = 64


class RowGroups(NamedTuple):
    """Runs of consecutive rows that each go through the output layer over their own columns:
    each run's row count, and how many of its columns are its own (the rest pad to the widest),
    the first ``shared`` of them the same for every run and allowed to every row."""

    rows: tuple[int, ...]
    widths: tuple[int, ...]
    shared: int = 0


class Seq2Seq(nn.Module):
    def __init__(self, cfg: ModelConfig, src_vocab: int, tgt_vocab: int):
        super().__init__()
        self.cfg = cfg
        self.src_embedding = nn.Embedding(src_vocab, cfg.embed_dim, padding_idx=PAD)
        if cfg.share_embeddings and src_vocab == tgt_vocab:
            self.tgt_embedding = self.src_embedding
        else:
            self.tgt_embedding = nn.Embedding(tgt_vocab, cfg.embed_dim, padding_idx=PAD)
        self.encoder = Encoder(
            cfg.rnn, self.src_embedding, cfg.hidden_dim, cfg.layers, cfg.bidirectional, cfg.dropout
        )
        self.bridge = Bridge(cfg.bridge, cfg.hidden_dim, cfg.layers, cfg.rnn == "lstm")
        attention = None
        if cfg.attention != "none":
            attention = Attention(
                cfg.attention, cfg.hidden_dim, cfg.hidden_dim, cfg.attention_heads
            )
        out_dim = cfg.embed_dim if cfg.tie_embeddings else cfg.hidden_dim
        self.decoder = Decoder(
            rnn=cfg.rnn,
            embedding=self.tgt_embedding,
            hidden_dim=cfg.hidden_dim,
            layers=cfg.layers,
            memory_dim=cfg.hidden_dim,
            attention=attention,
            order=cfg.decoder,
            input_feeding=cfg.input_feeding,
            initial_state_attention=cfg.initial_state_attention,
            out_dim=out_dim,
            dropout=cfg.dropout,
        )
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

    def encode(
        self, src: torch.Tensor, src_lengths: torch.Tensor
    ) -> tuple[DecoderState, DecoderMemory]:
        enc = self.encoder(src, src_lengths)
        hidden, cell, summary = self.bridge(enc)
        attention = self.decoder.attention
        memory = DecoderMemory(
            None if attention is None else attention.prepare(enc.states, enc.mask),
            summary,
            fold=self.decoder.context_projection(),
        )
        return self.decoder.init_state(hidden, cell, memory), memory

    def prepare_decoding(self) -> None:
        """What search would otherwise build at its first step: see Decoder.prepare_decoding."""
        self.decoder.prepare_decoding()

    def step(
        self,
        prev: torch.Tensor,
        state: DecoderState,
        memory: DecoderMemory,
        vocab: torch.Tensor | None = None,
        allowed: torch.Tensor | None = None,
        groups: RowGroups | None = None,
    ):
        """prev (B,) -> log p(y | ...) (B, V), new state, attention weights (B, S) or None.
        With ``vocab`` (sorted target ids) only those rows of W_s are used: (B, len(vocab)); with
        ``allowed`` (B, len(vocab)) bool each row is normalised over its own True entries. With
        ``groups``, ``vocab`` is (G, W): the ids of each run of rows, and the result is (B, W),
        each row over its own group's ids."""
        h_tilde, state, weights = self.decoder.step(prev, state, memory)
        if vocab is None:
            logits = self.output(h_tilde)
        elif allowed is None:
            weight, bias = self._output_rows(vocab)
            logits = F.linear(h_tilde, weight, bias)
        elif groups is None:
            weight, offsets = self._per_batch(
                "_plan_cache", (allowed, vocab), lambda: self._union_offsets(vocab, allowed)
            )
            logits = torch.addmm(offsets, h_tilde, weight.t())
        else:
            logits = self._grouped_logits(h_tilde, vocab, allowed, groups)
        # fp32 log-probabilities whatever the model's precision (bf16 decoding): the cast happens
        # inside log_softmax, without a separate copy of the logits
        low = logits.dtype in (torch.float16, torch.bfloat16)
        return F.log_softmax(logits, dim=-1, dtype=torch.float32 if low else None), state, weights

    def _union_offsets(self, vocab: torch.Tensor, allowed: torch.Tensor):
        """The rows of W_s for the union ``vocab`` (U, D) and each row's offsets (B, U): b on the
        row's own set, -inf elsewhere, so they ride in the product."""
        weight, bias = self._output_rows(vocab)
        return weight, torch.where(allowed, bias, bias.new_full((), float("-inf")))

    def _grouped_logits(
        self, h_tilde: torch.Tensor, vocab: torch.Tensor, allowed: torch.Tensor, groups: RowGroups
    ) -> torch.Tensor:
        """W_s h~ + b on each row's own set, -inf elsewhere, (B, W) over each group's own ids
        ``vocab`` (G, W): the ``groups.shared`` leading columns in one product for all rows, then
        one product per group over its other columns, each straight into its place in the
        logits. The rows of W_s are cut once per ``vocab`` (sentences leaving keep their groups);
        the offsets and the logits tensor, whose columns past each group's own width stay -inf,
        once per ``allowed``. The logits tensor is overwritten at each step: log_softmax's output
        is a new one."""
        shared = groups.shared
        common, cut = self._per_batch(
            "_group_cache", (vocab,), lambda: self._group_rows_of_w(vocab, groups.widths, shared)
        )

        def plan():
            logits = h_tilde.new_full((allowed.size(0), vocab.size(1)), float("-inf"))
            parts, start = [], 0
            neg_inf = logits.new_full((), float("-inf"))
            for rows, (weight, bias) in zip(groups.rows, cut):
                if rows and bias.numel():
                    end = shared + bias.size(0)
                    offsets = torch.where(allowed[start : start + rows, shared:end], bias, neg_inf)
                    parts.append((start, start + rows, weight, offsets))
                start += rows
            return logits, parts

        logits, parts = self._per_batch("_plan_cache", (allowed, vocab), plan)
        if shared:  # every row allows these: the bias is their offset
            torch.addmm(common[1], h_tilde, common[0].t(), out=logits[:, :shared])
        for start, stop, weight, offsets in parts:
            torch.addmm(
                offsets,
                h_tilde[start:stop],
                weight.t(),
                out=logits[start:stop, shared : shared + offsets.size(1)],
            )
        return logits

    def _group_rows_of_w(self, vocab: torch.Tensor, widths: tuple[int, ...], shared: int):
        """The rows of W_s and b for the ``shared`` leading ids, and per group for its own others
        (one copy for all, then views)."""
        weight, bias = self._output_weights()
        flat = torch.cat([vocab[0, :shared], *[ids[shared:w] for ids, w in zip(vocab, widths)]])
        cut_weight, cut_bias = weight.index_select(0, flat), bias.index_select(0, flat)
        bounds = [shared, *(shared + torch.tensor(widths).sub(shared).cumsum(0)).tolist()]
        return (
            (cut_weight[:shared], cut_bias[:shared]),
            [(cut_weight[a:b], cut_bias[a:b]) for a, b in zip(bounds, bounds[1:])],
        )

    def _output_weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        weight, bias = self.output.weight, self.output.bias
        if callable(weight):  # an int8 dynamic-quantised layer keeps them behind methods
            weight, bias = weight().dequantize(), bias()
        return weight, bias

    def _output_rows(self, vocab: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """W_s and b rows for ``vocab``, cut once per batch (and once per narrowing of its union,
        search._narrow) rather than once per step."""

        def cut():
            weight, bias = self._output_weights()
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

    def forward(
        self,
        src: torch.Tensor,
        src_lengths: torch.Tensor,
        tgt_in: torch.Tensor,
        sampling_prob: float | torch.Tensor = 0.0,
        tgt_out: torch.Tensor | None = None,
        label_smoothing: float = 0.0,
    ):
        """Teacher-forced logits (B, T, V) and attention weights (B, T, S) or None.

        Given ``tgt_out``, the first value is instead the summed (label-smoothed) cross-entropy
        over its non-pad tokens, from ``output_loss`` without a (B, T, V) logits tensor. It is
        an argument of forward, not a separate method, so DistributedDataParallel sees the call.
        """
        state, memory = self.encode(src, src_lengths)
        h_tilde, weights = self.decoder(tgt_in, state, memory, self.output, sampling_prob)
        if tgt_out is not None:
            return output_loss(
                h_tilde, self.output.weight, self.output.bias, tgt_out, label_smoothing
            ), weights
        return self.output(h_tilde), weights

    def parameter_count(self) -> int:
        return sum(p.numel() for p in self.parameters())
