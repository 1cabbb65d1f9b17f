"""Validation during training: loss, perplexity and greedy BLEU on the valid split, and the one
number (``train.valid_metric``) that best checkpoints, early stopping and averaging compare."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import sacrebleu
import torch

from nmt_cli.config.sections import Recipe
from nmt_cli.data.batches import make_batch
from nmt_cli.data.directions import Group
from nmt_cli.data.store import EncodedSplit
from nmt_cli.data.tokenizer import PAD, Tokenizer
from nmt_cli.decoding.decode import decode_ids


@torch.no_grad()
def validate(
    model,
    split: EncodedSplit,
    refs: list[str],
    tokenizer: Tokenizer,
    recipe: Recipe,
    device: torch.device,
    autocast,
    groups: list[Group] | None = None,
) -> dict:
    """Loss, perplexity and greedy-decoding BLEU on (at most valid_max_sentences of) the valid
    split. With ``groups`` (the directions of a multilingual split), at most valid_max_sentences
    of each; ``bleu`` is then the mean of the directions' BLEU, each one in ``directions``."""
    model.eval()
    cap = recipe.train.valid_max_sentences
    if groups:
        picked = [np.arange(g.start, min(g.end, g.start + cap)) for g in groups]
        rows = np.concatenate(picked)
    else:
        rows = np.arange(min(len(split), cap))
    n = len(rows)
    total_nll, total_tokens = 0.0, 0
    order = rows[np.argsort(np.asarray(split.tgt.lengths[rows]), kind="stable")]
    for start in range(0, n, 64):
        batch = make_batch(split, order[start : start + 64]).to(device)
        with autocast():
            summed, _ = model(batch.src, batch.src_lengths, batch.tgt_in, tgt_out=batch.tgt_out)
        total_nll += float(summed)
        total_tokens += batch.tgt_tokens
    sources = [list(split.src.get(i)) for i in rows.tolist()]
    # Greedy, in batches of 100, one worker, over the whole vocabulary: the recipe's length limits.
    greedy = replace(
        recipe.decode, beam_size=1, batch_size=100, batch_tokens=0, shortlist=False, workers=1
    )
    with autocast():
        hyps = decode_ids(model, [s or [PAD] for s in sources], greedy, device)
    texts = tokenizer.decode_tgt([h[0].tokens for h in hyps])
    wanted = [refs[i] for i in rows.tolist()]
    directions = {}
    if groups:
        at = 0
        for g, part in zip(groups, picked):
            ends = at + len(part)
            directions[g.direction] = sacrebleu.corpus_bleu(texts[at:ends], [wanted[at:ends]]).score
            at = ends
        bleu = sum(directions.values()) / len(directions)
    else:
        bleu = sacrebleu.corpus_bleu(texts, [wanted]).score
    model.train()
    loss = total_nll / max(total_tokens, 1)
    result = {
        "loss": loss,
        "ppl": math.exp(min(loss, 50.0)),
        "bleu": bleu,
        "sentences": n,
        "samples": list(zip(texts[:3], wanted[:3])),
    }
    if directions:
        result["directions"] = directions
    return result


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
        groups: list[Group] | None = None,
    ):
        self.split, self.refs, self.tokenizer, self.recipe = split, refs, tokenizer, recipe
        self.device, self.autocast = device, autocast
        self.metric = recipe.train.valid_metric
        self.groups = groups or None  # a multilingual valid split's directions

    @property
    def sentences(self) -> int:
        cap = self.recipe.train.valid_max_sentences
        if self.groups:
            return sum(min(g.size, cap) for g in self.groups)
        return min(len(self.split), cap)

    def __call__(self, model: torch.nn.Module) -> dict:
        return validate(
            model,
            self.split,
            self.refs,
            self.tokenizer,
            self.recipe,
            self.device,
            self.autocast,
            self.groups,
        )

    def score(self, result: dict) -> float:
        """The result as a score where higher is better (``train.valid_metric``)."""
        return result["bleu"] if self.metric == "bleu" else -result["loss"]

    def raw(self, result: dict) -> float:
        """The valid metric as measured (BLEU, or loss), for a schedule that watches it."""
        return result["bleu"] if self.metric == "bleu" else result["loss"]
