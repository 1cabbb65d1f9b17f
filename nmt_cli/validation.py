"""Validation during training: loss, perplexity and greedy BLEU on the valid split, and the one
number (``train.valid_metric``) that best checkpoints, early stopping and averaging compare."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import sacrebleu
import torch

from nmt_cli.batches import make_batch
from nmt_cli.config import Recipe
from nmt_cli.store import EncodedSplit
from nmt_cli.tokenizer import PAD, Tokenizer
from nmt_cli.translate import decode_ids


@torch.no_grad()
def validate(
    model,
    split: EncodedSplit,
    refs: list[str],
    tokenizer: Tokenizer,
    recipe: Recipe,
    device: torch.device,
    autocast,
) -> dict:
    """Loss, perplexity and greedy-decoding BLEU on (at most valid_max_sentences of) the valid
    split."""
    model.eval()
    n = min(len(split), recipe.train.valid_max_sentences)
    total_nll, total_tokens = 0.0, 0
    order = np.argsort(np.asarray(split.tgt.lengths[:n]), kind="stable")
    for start in range(0, n, 64):
        batch = make_batch(split, order[start : start + 64]).to(device)
        with autocast():
            summed, _ = model(batch.src, batch.src_lengths, batch.tgt_in, tgt_out=batch.tgt_out)
        total_nll += float(summed)
        total_tokens += batch.tgt_tokens
    sources = [list(split.src.get(i)) for i in range(n)]
    # Greedy, in batches of 100, one worker, over the whole vocabulary: the recipe's length limits.
    greedy = replace(
        recipe.decode, beam_size=1, batch_size=100, batch_tokens=0, shortlist=False, workers=1
    )
    with autocast():
        hyps = decode_ids(model, [s or [PAD] for s in sources], greedy, device)
    texts = tokenizer.decode_tgt([h[0].tokens for h in hyps])
    bleu = sacrebleu.corpus_bleu(texts, [refs[:n]]).score
    model.train()
    loss = total_nll / max(total_tokens, 1)
    return {
        "loss": loss,
        "ppl": math.exp(min(loss, 50.0)),
        "bleu": bleu,
        "sentences": n,
        "samples": list(zip(texts[:3], refs[:3])),
    }


class Validator:
    """Measures a model on one valid split; ``score`` turns a result into higher-is-better."""

    def __init__(
        self,
        split: EncodedSplit,
        refs: list[str],
        tokenizer: Tokenizer,
        recipe: Recipe,
        device: torch.device,
        autocast: Callable,
    ):
        self.split, self.refs, self.tokenizer, self.recipe = split, refs, tokenizer, recipe
        self.device, self.autocast = device, autocast
        self.metric = recipe.train.valid_metric

    @property
    def sentences(self) -> int:
        return min(len(self.split), self.recipe.train.valid_max_sentences)

    def __call__(self, model: torch.nn.Module) -> dict:
        return validate(
            model, self.split, self.refs, self.tokenizer, self.recipe, self.device, self.autocast
        )

    def score(self, result: dict) -> float:
        """The result as a score where higher is better (``train.valid_metric``)."""
        return result["bleu"] if self.metric == "bleu" else -result["loss"]

    def raw(self, result: dict) -> float:
        """The valid metric as measured (BLEU, or loss), for a schedule that watches it."""
        return result["bleu"] if self.metric == "bleu" else result["loss"]
