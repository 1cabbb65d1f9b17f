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


class ConcatScore(nn.Module):
    """score = v^T tanh(W1 h + W2 s) (Bahdanau et al. 2015; Vinyals et al. 2015; Luong "concat").

    W1 h is precomputed per sentence, so each step costs one W2 s and the tanh. The tanh is taken
    as tanh(x) = 2 sigmoid(2x) - 1, so score = 2 v^T sigmoid(2 W1 h + 2 W2 s) - sum(v): the same
    function, as torch's float tanh costs several times its sigmoid on the CPU. The keys are
    stored as 2 W1 h. (Decoding: nmt_cli/model/fast_decoding.py's DecodingConcatScore.)
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

    def doubled_query(self, query: torch.Tensor) -> torch.Tensor:
        """2 W2 s, (B, T, Hq) -> (B, K, T, A)."""
        b, t, _ = query.shape
        return self.W2(query).mul_(2.0).view(b, t, self.heads, self.attn_dim).transpose(1, 2)

    def scores(self, keys: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        v2, shift = 2.0 * self.v, self.v.sum(dim=1).view(1, self.heads, 1, 1)
        return self.doubled_scores(keys, self.doubled_query(query), v2) - shift

    @staticmethod
    def doubled_scores(keys: torch.Tensor, q: torch.Tensor, v2: torch.Tensor) -> torch.Tensor:
        """2 v^T sigmoid(2 W1 h + 2 W2 s) from the doubled keys and query, v2 = 2 v."""
        hidden = (keys.unsqueeze(2) + q.unsqueeze(3)).sigmoid_()  # (B, K, T, S, A)
        # einsum makes v^T one matrix product per head, where a broadcast matmul against v as an
        # (A, 1) matrix is slower forward and backward
        return torch.einsum("bktsa,ka->bkts", hidden, v2)


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
    exp_keys: torch.Tensor | None = None  # the keys' exponential form, for a decoding score

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
        # would first copy the weight once per sentence
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
        # The score's decoding path, installed by nmt_cli/model/fast_decoding.py; None: the plain
        self.decoding_score = None

    def prepare(self, states: torch.Tensor, mask: torch.Tensor) -> AttentionMemory:
        """The memory for ``forward``: the keys, and what the decoding score computes once per
        batch."""
        keys = self.score.keys(states)
        if self.decoding_score is None:
            return AttentionMemory(states, keys, mask)
        return AttentionMemory(states, keys, mask, exp_keys=self.decoding_score.exp_keys(keys))

    def forward(
        self, memory: AttentionMemory, query: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """query (B, T, Hq) -> context (B, T, K*Hm) (or W c + b (B, T, D) from a projected
        memory), weights (B, T, S)."""
        if self.decoding_score is None:
            scores = self.score.scores(memory.keys, query)  # (B, K', T, S)
        else:
            scores = self.decoding_score(memory.keys, query, memory.exp_keys)
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
