"""Validation alone: a model measured on the valid split, and the metric turned higher-is-better."""

import math
from contextlib import nullcontext

import pytest
import torch

from nmt_cli.config.recipes import recipe_from_dict
from nmt_cli.data.store import load_split, load_text
from nmt_cli.data.tokenizer import Tokenizer
from nmt_cli.model import build_model
from nmt_cli.training.validation import Validator


def validator(tiny_run, **train):
    recipe, run_dir = tiny_run
    raw = recipe.to_dict()
    raw["train"].update(train)
    recipe = recipe_from_dict(raw)
    tokenizer = Tokenizer.load(run_dir)
    v = Validator(
        load_split(run_dir, "valid"),
        load_text(run_dir, "valid", "tgt"),
        tokenizer,
        recipe,
        torch.device("cpu"),
        nullcontext,
    )
    torch.manual_seed(0)
    model = build_model(recipe.model, tokenizer.src_vocab_size, tokenizer.tgt_vocab_size)
    return v, model


def test_measures_an_untrained_model_on_the_capped_split(tiny_run):
    v, model = validator(tiny_run, valid_max_sentences=8)
    model.train()
    result = v(model)
    assert result["sentences"] == v.sentences == 8
    # an untrained model is about as unsure as a uniform guess over the vocabulary
    uniform = math.log(v.tokenizer.tgt_vocab_size)
    assert 0.5 * uniform < result["loss"] < 2 * uniform
    assert result["ppl"] == pytest.approx(math.exp(result["loss"]))
    assert 0.0 <= result["bleu"] < 5.0 and len(result["samples"]) == 3
    assert model.training  # handed back in training mode
    assert v(model)["loss"] == pytest.approx(result["loss"])  # no dropout while measuring


def test_score_is_higher_is_better_for_either_metric(tiny_run):
    result = {"bleu": 20.0, "loss": 3.0}
    bleu, _ = validator(tiny_run, valid_metric="bleu")
    loss, _ = validator(tiny_run, valid_metric="loss")
    assert bleu.score(result) == 20.0 and bleu.raw(result) == 20.0
    assert loss.score(result) == -3.0 and loss.raw(result) == 3.0
