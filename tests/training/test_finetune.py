import pytest
import torch
import yaml

from nmt_cli.config.recipes import recipe_from_dict
from nmt_cli.data.preprocess import ensure_preprocessed, preprocess
from nmt_cli.data.store import load_meta
from nmt_cli.data.tokenizer import Tokenizer
from nmt_cli.runtime.errors import CheckpointError, DataError
from nmt_cli.training import checkpoint as ckpt
from nmt_cli.training.finetune import initial_tokenizer
from nmt_cli.training.loop import Trainer, train
from tests.cli.test_cli import nmt, one_line_error
from tests.conftest import tiny_recipe_dict, trained_copy, write_slice


@pytest.fixture(scope="module")
def initial(tiny_run, tmp_path_factory):
    """A tiny model trained for a few steps: what fine-tuning starts from."""
    return trained_copy(
        tiny_run, tmp_path_factory, "initial", max_steps=6, checkpoint_every=6, ema_decay=0.9
    )


def new_data_recipe(tmp_path, initial, **model):
    # Other sentences (the Multi30k val split) and another vocabulary size that must be ignored.
    data = write_slice(tmp_path / "new", n_train=60, n_valid=10)
    data["train"] = data["valid"]
    raw = tiny_recipe_dict(
        data,
        tokenizer={"vocab_size": 150},
        model=model,
        train={"init_from": str(initial), "max_steps": 2, "lr": 5e-4},
    )
    return raw


def test_fine_tuning_keeps_the_tokenizer_and_starts_from_the_weights(initial, tmp_path):
    recipe = recipe_from_dict(new_data_recipe(tmp_path, initial))
    run = tmp_path / "ft"
    logs = []
    ensure_preprocessed(recipe, run, log=logs.append, inherited=initial_tokenizer(recipe))
    assert any(f"using the tokenizer of {initial / 'checkpoints'}" in line for line in logs)
    assert Tokenizer.load(run).src_proto == Tokenizer.load(initial).src_proto
    assert load_meta(run)["src_vocab"] == Tokenizer.load(initial).src_vocab_size  # not 150
    trainer = Trainer(recipe, run, device="cpu")
    start = ckpt.load(ckpt.resolve(initial))
    for name, value in trainer.model.state_dict().items():
        assert torch.equal(value, start["model"][name]), (
            name
        )  # the moving average, which translates
    assert trainer.progress.step == 0 and not trainer.optimizer.state  # fresh optimiser
    assert trainer.lr.state_dict() == type(trainer.lr)(recipe.train).state_dict()
    summary = trainer.train()
    assert summary["final_step"] == 2 and summary["resumed_from"] is None
    # Run again with more steps: it resumes its own checkpoint, not the initial weights.
    raw = recipe.to_dict()
    raw["train"]["max_steps"] = 3
    again = train(recipe_from_dict(raw), run, device="cpu")
    assert again["resumed_from"] == 2 and again["final_step"] == 3


def test_data_preprocessed_without_init_from_is_refused(initial, tmp_path):
    raw = new_data_recipe(tmp_path, initial)
    plain = dict(raw, train={**raw["train"], "init_from": None})
    preprocess(recipe_from_dict(plain), tmp_path / "run", log=lambda m: None)
    with pytest.raises(DataError, match="train.init_from"):
        ensure_preprocessed(recipe_from_dict(raw), tmp_path / "run", log=lambda m: None)


def test_a_model_of_another_shape_is_refused_in_one_line(initial, tmp_path):
    raw = new_data_recipe(tmp_path, initial, hidden_dim=64, dropout=0.3)
    with pytest.raises(CheckpointError, match=r"model.hidden_dim \(32 there, 64 here\)") as info:
        initial_tokenizer(recipe_from_dict(raw))
    assert "dropout" not in str(info.value)  # dropout leaves the shapes alone
    path = tmp_path / "r.yaml"
    raw["train"].pop("init_from")
    path.write_text(yaml.safe_dump(raw))
    result = nmt("train", path, "--run-dir", tmp_path / "cli", "--init-from", initial)
    one_line_error(result, "does not match the initial model's shape", "model.hidden_dim")
    missing = nmt(
        "train", path, "--run-dir", tmp_path / "cli2", "--init-from", tmp_path / "nowhere.pt"
    )
    one_line_error(missing, "nowhere.pt")
