"""Sampled translations (for back-translation): each token drawn from the model's distribution.

    y_i ~ softmax(log p(y | y_<i, x) / T), over the K most probable tokens when ``topk`` = K > 0

Batched as greedy search is (nmt_cli/decoding/search.py), with its length cap and ``min_len``. The
draws come from a torch generator seeded per batch from the seed and the batch's first sentence, so
that a given input and seed give the same translations whatever the number of workers or
threads; N sentences in give N out. A Hypothesis's score is the sampled tokens' log-probability
under the model (not the tempered distribution).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from nmt_cli.data.tokenizer import BOS, EOS, PAD
from nmt_cli.decoding.decode import padded_sources
from nmt_cli.decoding.language_vocabulary import restricted_ids
from nmt_cli.decoding.search import Hypothesis, max_lengths, restrict_steps, trimmed


@dataclass(frozen=True)
class Sampling:
    seed: int = 0
    topk: int = 0  # 0: the whole distribution
    temperature: float = 1.0

    def __post_init__(self):
        from nmt_cli.runtime.errors import UserError

        if self.temperature <= 0:
            raise UserError(f"--temperature {self.temperature}: give a number above 0")
        if self.topk < 0:
            raise UserError(f"--sampling-topk {self.topk}: give 0 (all) or more")


@torch.no_grad()
def sample(
    model,
    src: torch.Tensor,
    src_lengths: torch.Tensor,
    how: Sampling,
    generator: torch.Generator,
    *,
    max_len_ratio: float = 1.5,
    max_len_const: int = 10,
    min_len: int = 1,
    vocab: torch.Tensor | None = None,
) -> list[list[Hypothesis]]:
    """One sampled hypothesis per sentence (module doc); ``vocab``: sorted target ids to draw
    from (None = all)."""
    from nmt_cli.model.output_layer import Columns

    b = src.size(0)
    device = src.device
    columns = None if vocab is None else Columns(vocab, None)
    state, memory = model.encode(src, src_lengths)
    limit = max_lengths(src_lengths, max_len_ratio, max_len_const).to(device)
    steps = int(limit.max())
    tokens = torch.full((b, steps), PAD, dtype=torch.long, device=device)
    scores = torch.zeros(b, device=device)
    done = torch.zeros(b, dtype=torch.bool, device=device)
    prev = torch.full((b,), BOS, dtype=torch.long, device=device)
    for t in range(steps):
        logp, state, _ = model.step(prev, state, memory, columns)
        logp = restrict_steps(logp, limit - 1 <= t, t < min_len)
        tempered = logp / how.temperature
        if 0 < how.topk < tempered.size(-1):
            kth = tempered.topk(how.topk, dim=-1).values[:, -1:]
            tempered = tempered.masked_fill(tempered < kth, float("-inf"))
        probs = torch.softmax(tempered.float(), dim=-1).cpu()
        column = torch.multinomial(probs, 1, generator=generator).squeeze(1).to(device)
        picked = logp.gather(1, column.unsqueeze(1)).squeeze(1)
        token = column if columns is None else columns.token_ids(column)
        token = token.masked_fill(done, PAD)
        scores += picked.masked_fill(done, 0.0)
        tokens[:, t] = token
        done |= token == EOS
        if bool(done.all()):
            break
        prev = token.masked_fill(token == PAD, EOS)
    out = []
    for i, row in enumerate(tokens.tolist()):
        s = float(scores[i])
        out.append([Hypothesis(trimmed(row), s, s)])
    return out


def sample_ids(
    model,
    sources: Sequence[Sequence[int]],
    config,
    device,
    how: Sampling,
    *,
    shortlist=None,
    language=None,
) -> list[list[Hypothesis]]:
    """Sampled translations of token-id sources (non-empty), in input order; batches of
    ``config.batch_size`` sentences (128 when 0), length-sorted, each with its own generator;
    ``language``: the target language's pieces, the only ones drawn."""
    order = sorted(range(len(sources)), key=lambda i: (-len(sources[i]), i))
    size = config.batch_size if config.batch_size > 0 else 128
    results: list[list[Hypothesis]] = [[] for _ in sources]
    use_shortlist = shortlist if config.shortlist else None
    for start in range(0, len(order), size):
        batch = order[start : start + size]
        src, src_lengths = padded_sources(sources, batch)
        vocab = None
        if use_shortlist is not None:
            vocab = use_shortlist.vocabulary(
                src, config.shortlist_per_source, config.shortlist_frequent
            )
        vocab = restricted_ids(vocab, language)
        vocab = None if vocab is None else vocab.to(device)
        generator = torch.Generator().manual_seed(how.seed * 1_000_003 + batch[0])
        hyps = sample(
            model,
            src.to(device),
            src_lengths,
            how,
            generator,
            max_len_ratio=config.max_len_ratio,
            max_len_const=config.max_len_const,
            min_len=config.min_len,
            vocab=vocab,
        )
        for i, h in zip(batch, hyps):
            results[i] = h
    return results
