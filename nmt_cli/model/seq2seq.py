"""The whole encoder-decoder: embeddings, encoder, bridge, attention, decoder, output layer.

    p(y_i | y_<i, x) = softmax(W_s h~_i)

With ``tie_embeddings`` W_s is the target embedding matrix, so h~ has the embedding size. With
``share_embeddings`` (joint vocabulary) source and target read one embedding table.

The search contract used by greedy and beam search is three calls: ``encode`` -> (state, memory),
``step`` -> (log-probabilities, state, attention weights), and ``select`` on state and memory, with
``memory.shared_by(K)`` for beam search's K hypotheses per sentence. ``step`` computes the output
layer over the columns search asks for (nmt_cli/model/output_layer.py). A model prepared for
decoding (nmt_cli/model/fast_decoding.py) keeps its ``decoding_setup``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from nmt_cli.config.sections import ModelConfig
from nmt_cli.data.tokenizer import PAD
from nmt_cli.model.attention import Attention, CosineScore
from nmt_cli.model.bridge import Bridge
from nmt_cli.model.decoder import Decoder, DecoderMemory, DecoderState
from nmt_cli.model.encoder import Encoder
from nmt_cli.model.loss import output_loss
from nmt_cli.model.output_layer import Columns, logits
from nmt_cli.model.stacked import Between


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
            cfg.rnn,
            self.src_embedding,
            cfg.hidden_dim,
            cfg.encoder_depth,
            cfg.bidirectional,
            cfg.dropout,
            between=Between(cfg.residual, cfg.layer_norm),
        )
        self.bridge = Bridge(
            cfg.bridge, cfg.hidden_dim, cfg.decoder_depth, cfg.rnn == "lstm", cfg.encoder_depth
        )
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
            layers=cfg.decoder_depth,
            memory_dim=cfg.hidden_dim,
            attention=attention,
            order=cfg.decoder,
            input_feeding=cfg.input_feeding,
            initial_state_attention=cfg.initial_state_attention,
            out_dim=out_dim,
            dropout=cfg.dropout,
            between=Between(cfg.residual, cfg.layer_norm),
        )
        self.output = nn.Linear(out_dim, tgt_vocab)
        self._initialize(cfg.init)
        if cfg.tie_embeddings:
            self.output.weight = self.tgt_embedding.weight
        self.decoding_setup = None  # set by fast_decoding.prepare_for_decoding

    def _initialize(self, how: str) -> None:
        """embedding: N(0, 1) embeddings, PyTorch's defaults elsewhere (U(±1/sqrt(fan_in)));
        uniform: every parameter U(-0.1, 0.1) (Luong et al. 2015); xavier: Glorot matrices, zero
        biases, N(0, 1) embeddings (Glorot's bound for an embedding table, about ±0.03 for 8,000 x
        256, gives tied output logits near zero: a bf16 run stayed at the unigram loss). The
        cosine score's scale g is not a weight to draw: it starts at sqrt(Hm) under every init;
        nor are layer normalisation's g and b, which start at 1 and 0."""
        for p in self.parameters():
            if how == "uniform":
                nn.init.uniform_(p, -0.1, 0.1)
            elif how == "xavier":
                if p.dim() > 1:
                    nn.init.xavier_uniform_(p)
                else:
                    nn.init.zeros_(p)
        if how in ("embedding", "xavier"):
            nn.init.normal_(self.src_embedding.weight, 0.0, 1.0)
            nn.init.normal_(self.tgt_embedding.weight, 0.0, 1.0)
        for module in self.modules():
            if isinstance(module, CosineScore):
                module.reset_scale()
            elif isinstance(module, nn.LayerNorm):
                module.reset_parameters()
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

    def step(
        self,
        prev: torch.Tensor,
        state: DecoderState,
        memory: DecoderMemory,
        columns: Columns | None = None,
    ):
        """prev (B,) -> log p(y_i | y_<i, x) (B, V), new state, attention weights (B, S) or None.

            h~_i = decoder.step(y_{i-1}, state, memory);  log p = log_softmax(W_s h~_i + b)

        over ``columns`` (B, U or W), each row normalised over its own set, where given."""
        h_tilde, state, weights = self.decoder.step(prev, state, memory)
        out = logits(self.output, h_tilde, columns)
        # fp32 log-probabilities whatever the model's precision (bf16 decoding): the cast happens
        # inside log_softmax, without a separate copy of the logits
        low = out.dtype in (torch.float16, torch.bfloat16)
        return F.log_softmax(out, dim=-1, dtype=torch.float32 if low else None), state, weights

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
