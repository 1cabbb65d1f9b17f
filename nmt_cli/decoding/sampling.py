"""Sampled translations (for back-translation): each token drawn from the model's distribution,

    y_t ~ softmax(log p(y | y_<t, x) / T), over the K most probable tokens when ``topk`` = K > 0,

as the one beam loop's step (nmt_cli/decoding/beam.py) with a beam of one: the same length cap,
``min_len``, repetition guard and shortlist columns as every search. The draws come from a torch
generator seeded per batch from the seed and the batch's first sentence, so that a given input
and seed give the same translations whatever the number of workers or threads; N sentences in
give N out. A Hypothesis's score is the sampled tokens' log-probability under the model (not the
tempered distribution).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from nmt_cli.data.tokenizer import EOS
from nmt_cli.decoding.beam import NEG_INF, Step, Strategy, beam_loop
from nmt_cli.decoding.settings import SearchSettings
from nmt_cli.decoding.steps import Hypothesis
from nmt_cli.runtime.errors import UserError

# The seed of a batch's generator: seed * SEED_STRIDE + the batch's first sentence
SEED_STRIDE = 1_000_003


@dataclass(frozen=True)
class Sampling:
    seed: int = 0
    topk: int = 0  # 0: the whole distribution
    temperature: float = 1.0

    def __post_init__(self):
        if self.temperature <= 0:
            raise UserError(f"--temperature {self.temperature}: give a number above 0")
        if self.topk < 0:
            raise UserError(f"--sampling-topk {self.topk}: give 0 (all) or more")

    def generator(self, first_sentence: int) -> torch.Generator:
        """The draws of the batch that begins with sentence ``first_sentence``."""
        return torch.Generator().manual_seed(self.seed * SEED_STRIDE + first_sentence)


class Sampled(Strategy):
    """The beam step that draws one token per sentence, y_t ~ softmax(log p(y | y_<t, x) / T)
    over the ``topk`` most probable (all when 0), and adds its untempered log-probability to the
    score. Done sentences stay in the batch: every step draws for every row of the batch, so a
    row leaving would change the draws of the rows after it."""

    leaves = False
    fixed_union = False

    def __init__(self, how: Sampling, generator: torch.Generator):
        self.how, self.generator = how, generator

    def step(self, t, logp, alive_logp, weights, columns, limit) -> Step:
        n, k, v = logp.shape
        logp = logp.view(n * k, v)
        tempered = logp / self.how.temperature
        if 0 < self.how.topk < v:
            kth = tempered.topk(self.how.topk, dim=-1).values[:, -1:]
            tempered = tempered.masked_fill(tempered < kth, NEG_INF)
        probs = torch.softmax(tempered.float(), dim=-1).cpu()
        column = torch.multinomial(probs, 1, generator=self.generator).to(logp.device)
        picked = logp.gather(1, column)
        token = column if columns is None else columns.token_ids(column.squeeze(1)).unsqueeze(1)
        score = alive_logp + picked
        ends = token == EOS
        first = torch.zeros_like(column)
        return Step(first, token, score, ends, first, score.masked_fill(ends, NEG_INF))

    def retire(self, done: torch.Tensor) -> None:
        """Nothing to do: the loop's alive scores of ``done`` are -inf."""

    def keep(self, live: torch.Tensor) -> None:
        raise AssertionError("sampled sentences never leave the batch")


def sample(
    model,
    src: torch.Tensor,
    src_lengths: torch.Tensor,
    how: Sampling,
    generator: torch.Generator,
    settings: SearchSettings | None = None,
    vocab: torch.Tensor | None = None,
) -> list[list[Hypothesis]]:
    """One sampled hypothesis per sentence (module doc), drawn with ``generator``; ``settings``:
    its length cap, ``min_len`` and repetition guard (beam, n-best and length penalty do not
    apply); ``vocab``: sorted target ids to draw from (None = all)."""
    settings = replace(
        settings or SearchSettings(), beam_size=1, nbest=1, alpha=0.0, attention=False
    )
    return beam_loop(model, src, src_lengths, settings, Sampled(how, generator), vocab)
