"""Attention: scores between encoder states h_j and a decoder query s, and the context they give.

    α_ij = softmax_j(score(h_j, s_i))  (padding positions masked to exactly 0)
    c_i  = Σ_j α_ij h_j

One small class per score. Each splits its work into ``keys`` (everything that depends on the
encoder states alone, computed once per sentence) and ``scores`` (the per-query part), and
handles K heads at once: every head has its own parameters, as in TensorFlow's legacy
``attention_decoder``, and the K contexts are concatenated.

Shapes: memory h (B, S, Hm), queries s (B, T, Hq), scores (B, K, T, S).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


class DotScore(nn.Module):
    """score = h^T s (Luong et al. 2015, "dot"); needs Hq == Hm and has no parameters."""

    def __init__(self, memory_dim: int, query_dim: int, heads: int, attn_dim: int):
        super().__init__()
        if memory_dim != query_dim:
            raise ValueError(
                f"dot attention needs equal sizes, got memory {memory_dim} and query {query_dim}"
            )
        if heads != 1:
            raise ValueError("dot attention has no parameters, so its heads would be identical")

    def keys(self, memory: torch.Tensor) -> torch.Tensor:
        return memory.unsqueeze(1)  # (B, 1, S, H)

    def scores(self, keys: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        return torch.matmul(query.unsqueeze(1), keys.transpose(-1, -2))  # (B, 1, T, S)


class GeneralScore(nn.Module):
    """score = h^T W s (Luong et al. 2015, "general"); h^T W is precomputed per sentence."""

    def __init__(self, memory_dim: int, query_dim: int, heads: int, attn_dim: int):
        super().__init__()
        self.heads, self.query_dim = heads, query_dim
        self.W = nn.Linear(memory_dim, heads * query_dim, bias=False)

    def keys(self, memory: torch.Tensor) -> torch.Tensor:
        b, s, _ = memory.shape
        return (
            self.W(memory).view(b, s, self.heads, self.query_dim).transpose(1, 2)
        )  # (B, K, S, Hq)

    def scores(self, keys: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        return torch.matmul(query.unsqueeze(1), keys.transpose(-1, -2))  # (B, K, T, S)


# Elements of the additive score's hidden tensor computed at a time when decoding (2 MB of float32)
CHUNK_ELEMENTS = 1 << 19


class ConcatScore(nn.Module):
    """score = v^T tanh(W1 h + W2 s) (Bahdanau et al. 2015; Vinyals et al. 2015; Luong "concat").

    W1 h is precomputed per sentence, so each step costs one W2 s and the tanh. The tanh is taken
    as tanh(x) = 2 sigmoid(2x) - 1, so score = 2 v^T sigmoid(2 W1 h + 2 W2 s) - sum(v): the same
    function, but torch's float tanh costs three to four times its sigmoid on an AVX2 CPU (3.6-4.3
    against 1.0-1.3 ns an element, bench/attention_speed.py), and the tanh was a fifth of a beam
    search's time. The keys are stored as 2 W1 h.

    Decoding on the CPU also keeps them as e^{-2 W1 h} (``exp_keys``), and a step takes
    sigmoid(2 W1 h + 2 W2 s) = 1 / (1 + e^{-2 W1 h} e^{-2 W2 s}): a fused multiply-add and a
    reciprocal per element where the sum and the sigmoid were an add and an exponential (278
    against 417 us for 5 hypotheses x 6 sentences x 34 positions x 512, bf16, one thread). Only
    while every exponent is within +-EXP_LIMIT (checked per batch for the keys, per step for the
    queries; else the plain form), so neither factor is ever 0 or inf: their product may be, which
    gives the sigmoid's own limits 1 and 0, never inf x 0. Only in fp32 and bf16, whose range
    holds e^EXP_LIMIT (fp16's ends at e^11).
    """

    def __init__(self, memory_dim: int, query_dim: int, heads: int, attn_dim: int):
        super().__init__()
        self.heads, self.attn_dim = heads, attn_dim
        self.W1 = nn.Linear(memory_dim, heads * attn_dim, bias=False)
        self.W2 = nn.Linear(query_dim, heads * attn_dim, bias=True)
        self.v = nn.Parameter(torch.empty(heads, attn_dim))
        nn.init.uniform_(self.v, -0.1, 0.1)

    def keys(self, memory: torch.Tensor) -> torch.Tensor:
        b, s, _ = memory.shape
        return (
            self.W1(memory).mul_(2.0).view(b, s, self.heads, self.attn_dim).permute(0, 2, 1, 3)
        )  # (B, K, S, A)

    @staticmethod
    def exp_keys(keys: torch.Tensor) -> torch.Tensor | None:
        """e^{-2 W1 h} from ``keys``, for ``scores(..., exp_keys)``; None when an exponent is out of range."""
        return torch.exp(-keys) if float(keys.abs().amax()) <= EXP_LIMIT else None

    def scores(
        self, keys: torch.Tensor, query: torch.Tensor, exp_keys: torch.Tensor | None = None
    ) -> torch.Tensor:
        b, t, _ = query.shape
        q = (
            self.W2(query).mul_(2.0).view(b, t, self.heads, self.attn_dim).transpose(1, 2)
        )  # (B, K, T, A)
        exponentials = exp_keys is not None and float(q.abs().amax()) <= EXP_LIMIT
        if exponentials:
            keys, q = exp_keys, q.neg_().exp_()
        v2, shift = 2.0 * self.v, self.v.sum(dim=1).view(1, self.heads, 1, 1)
        rows = max(1, CHUNK_ELEMENTS // (self.heads * t * keys.size(2) * self.attn_dim))
        if rows >= b or torch.is_grad_enabled():
            return self._scores(keys, q, v2, exponentials) - shift
        # Decoding: a few sentences at a time, so that the (B, K, T, S, A) tensor that the add
        # writes and the sigmoid and v^T read again stays in the cache (64 sentences x 5
        # hypotheses x 20 source pieces: 8.5 instead of 13.0 ms, bench/attention_speed.py)
        out = q.new_empty(b, self.heads, t, keys.size(2))
        for start in range(0, b, rows):
            out[start : start + rows] = self._scores(
                keys[start : start + rows], q[start : start + rows], v2, exponentials
            )
        return out.sub_(shift)

    @staticmethod
    def _scores(
        keys: torch.Tensor, q: torch.Tensor, v2: torch.Tensor, exponentials: bool
    ) -> torch.Tensor:
        """2 v^T sigmoid(keys + q), keys and q already doubled (or, ``exponentials``, both as e^-x)."""
        if exponentials:
            hidden = torch.addcmul(
                keys.new_ones(()), keys.unsqueeze(2), q.unsqueeze(3)
            ).reciprocal_()
        else:
            hidden = (keys.unsqueeze(2) + q.unsqueeze(3)).sigmoid_()  # (B, K, T, S, A)
        # einsum makes v^T one matrix product per head; a broadcast matmul against v as an (A, 1)
        # matrix took 1.5x as long forward and backward (B=190, S=20, A=512, on the CPU)
        return torch.einsum("bktsa,ka->bkts", hidden, v2)


EXP_LIMIT = 80.0  # e^80 = 5.5e34: within fp32's and bf16's range


class CosineScore(nn.Module):
    """score = g · cos(h, W s): cosine similarity scaled by a learned g (starts at sqrt(Hm))."""

    def __init__(self, memory_dim: int, query_dim: int, heads: int, attn_dim: int):
        super().__init__()
        self.heads, self.memory_dim = heads, memory_dim
        self.W = nn.Linear(query_dim, heads * memory_dim, bias=False)
        self.scale = nn.Parameter(torch.empty(heads, 1, 1))
        self.reset_scale()

    def reset_scale(self) -> None:
        """g starts at sqrt(Hm), whatever the model's ``init`` does to other parameters: a scale
        drawn from U(-0.1, 0.1) (or zeroed as a 1-d "bias") would flatten every softmax."""
        with torch.no_grad():
            self.scale.fill_(math.sqrt(self.memory_dim))

    def keys(self, memory: torch.Tensor) -> torch.Tensor:
        return F.normalize(memory, dim=-1).unsqueeze(1)  # (B, 1, S, Hm)

    def scores(self, keys: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        b, t, _ = query.shape
        q = F.normalize(self.W(query).view(b, t, self.heads, self.memory_dim), dim=-1).transpose(
            1, 2
        )
        return self.scale * torch.matmul(q, keys.transpose(-1, -2))  # (B, K, T, S)


SCORES = {"dot": DotScore, "general": GeneralScore, "concat": ConcatScore, "cosine": CosineScore}


@dataclass
class AttentionMemory:
    """Encoder states prepared for attention: the values the weights average, their precomputed
    keys and the mask. The values are the states h_j (B, S, Hm), or, when ``projected``, each
    head's W^(k) h_j (B, K, S, D) for a linear map W that the context would go through next
    (``project``)."""

    states: torch.Tensor  # (B, S, Hm), or (B, K, S, D) when projected
    keys: torch.Tensor  # score-specific, batch first
    mask: torch.Tensor  # (B, S) bool, True on real positions
    projected: bool = False
    exp_keys: torch.Tensor | None = None  # the keys' exponential form, where the score has one

    def select(self, index: torch.Tensor) -> AttentionMemory:
        return AttentionMemory(
            self.states.index_select(0, index),
            self.keys.index_select(0, index),
            self.mask.index_select(0, index),
            self.projected,
            None if self.exp_keys is None else self.exp_keys.index_select(0, index),
        )

    def project(self, weight: torch.Tensor, bias: torch.Tensor) -> AttentionMemory:
        """The same memory for a reader that needs W c + b rather than the context c itself
        (W (D, K*Hm), b (D,)). As the weights sum to one, W c + b = Σ_k Σ_j α_kj (W^(k) h_j) + b,
        with W^(k) the columns of W for head k; the values become W^(k) h_j (b added to the first
        head's), and ``Attention.forward`` returns W c + b (B, T, D). W h is then computed once
        per source position instead of W c once per decoding step and hypothesis."""
        b, s, hm = self.states.shape
        heads, d = weight.size(1) // hm, weight.size(0)
        # One (B*S, Hm) x (Hm, K*D) product: a broadcast matmul against each head's (D, Hm) block
        # would first copy the weight once per sentence (64 x 512 x 512 per batch of beam search)
        per_head = weight.view(d, heads, hm).permute(2, 1, 0).reshape(hm, heads * d)  # (Hm, K*D)
        values = torch.mm(self.states.reshape(b * s, hm), per_head)
        values = values.view(b, s, heads, d).permute(0, 2, 1, 3).contiguous()  # (B, K, S, D)
        values[:, 0] += bias
        return AttentionMemory(values, self.keys, self.mask, projected=True, exp_keys=self.exp_keys)


class Attention(nn.Module):
    """Masked soft attention with K heads; returns the concatenated contexts and the weights.

    The weights returned for alignments and pictures are the mean over heads.
    """

    def __init__(
        self,
        score: str,
        memory_dim: int,
        query_dim: int,
        heads: int = 1,
        attn_dim: int | None = None,
    ):
        super().__init__()
        self.heads = heads
        self.memory_dim = memory_dim
        self.context_dim = heads * memory_dim
        self.score = SCORES[score](memory_dim, query_dim, heads, attn_dim or query_dim)

    def prepare(self, states: torch.Tensor, mask: torch.Tensor) -> AttentionMemory:
        """The memory for ``forward``; when decoding on the CPU in fp32 or bf16 (no gradient
        wanted), with the keys' exponential form too, where the score has one."""
        keys = self.score.keys(states)
        if (
            hasattr(self.score, "exp_keys")
            and not torch.is_grad_enabled()
            and states.device.type == "cpu"
            and states.dtype in (torch.float32, torch.bfloat16)
        ):
            return AttentionMemory(states, keys, mask, exp_keys=self.score.exp_keys(keys))
        return AttentionMemory(states, keys, mask)

    def forward(
        self, memory: AttentionMemory, query: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """query (B, T, Hq) -> context (B, T, K*Hm) (or W c + b (B, T, D) from a projected
        memory), weights (B, T, S)."""
        scores = (
            self.score.scores(memory.keys, query)
            if memory.exp_keys is None
            else self.score.scores(memory.keys, query, memory.exp_keys)
        )  # (B, K', T, S)
        scores = scores.masked_fill(~memory.mask[:, None, None, :], float("-inf"))
        alpha = torch.softmax(scores, dim=-1)
        if memory.projected:
            contexts = torch.matmul(alpha, memory.states)  # (B, K, T, D)
            return contexts.sum(dim=1) if self.heads > 1 else contexts.squeeze(1), _head_mean(alpha)
        contexts = torch.matmul(alpha, memory.states.unsqueeze(1))  # (B, K', T, Hm)
        b, k, t, h = contexts.shape
        context = contexts.transpose(1, 2).reshape(b, t, k * h)
        return context, _head_mean(alpha)


def _head_mean(alpha: torch.Tensor) -> torch.Tensor:
    """(B, K, T, S) -> (B, T, S): the weights' mean over heads; one head's as they are, a view."""
    return alpha.mean(dim=1) if alpha.size(1) > 1 else alpha.squeeze(1)
