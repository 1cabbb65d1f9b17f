"""The checkpoint policy alone: files written and kept, best and early stopping, averaging."""

import os

import pytest
import torch

from nmt_cli.config.sections import TrainConfig
from nmt_cli.training import checkpoint as ckpt
from nmt_cli.training.checkpoint_policy import CheckpointPolicy
from nmt_cli.training.loop import Progress


def policy(tmp_path, progress, **cfg):
    """A policy whose checkpoints hold one weight equal to the step they were written at."""

    def payload():
        return {
            "format": ckpt.FORMAT,
            "model": {"w": torch.full((2,), float(progress.step))},
            "recipe": {},
            "tokenizer": {},
            "progress": {"step": progress.step},
        }

    return CheckpointPolicy(tmp_path, TrainConfig(**cfg), payload)


def names(tmp_path):
    return sorted(p.name for p in (tmp_path / "checkpoints").iterdir())


def test_keeps_the_newest_numbered_checkpoints_and_links_last_and_best(tmp_path):
    p = Progress()
    pol = policy(tmp_path, p, checkpoint_every=2, valid_every=4, keep_checkpoints=2)
    for p.step in (2, 4, 6):
        pol.save(p.step, best=p.step == 4)
    assert names(tmp_path) == ["best.pt", "last.pt", "step-4.pt", "step-6.pt"]
    assert ckpt.load(tmp_path / "checkpoints" / "last.pt")["progress"]["step"] == 6
    assert os.path.samefile(
        tmp_path / "checkpoints" / "best.pt", tmp_path / "checkpoints" / "step-4.pt"
    )


def test_an_interruption_between_regular_steps_stays_out_of_averaging(tmp_path):
    p = Progress()
    pol = policy(tmp_path, p, checkpoint_every=10, valid_every=20)
    p.step = 10
    pol.save(10)
    p.step = 13
    assert pol.save(13, interrupted=True).name == "interrupted-13.pt"
    assert [x.name for x in ckpt.step_checkpoints(tmp_path)] == ["step-10.pt"]
    assert ckpt.load(tmp_path / "checkpoints" / "last.pt")["progress"]["step"] == 13
    p.step = 20  # an interruption at a step the recipe checkpoints anyway is a regular checkpoint
    assert pol.save(20, interrupted=True).name == "step-20.pt"
    assert "interrupted-13.pt" not in names(tmp_path)


def test_judge_tracks_the_best_and_patience(tmp_path):
    p = Progress()
    pol = policy(tmp_path, p, patience=2)
    verdicts = []
    for p.step, score in ((1, 5.0), (2, 7.0), (3, 6.0), (4, 7.0)):
        verdicts.append(pol.judge(p, score))
    assert verdicts == [True, True, False, False]
    assert (p.best_metric, p.best_step, p.bad_validations) == (7.0, 2, 2)
    assert pol.patience_exhausted(p)
    assert not policy(tmp_path, p, patience=0).patience_exhausted(p)


@pytest.mark.parametrize("averaged_score, becomes_best", [(9.0, True), (1.0, False)])
def test_average_of_the_newest_becomes_best_only_when_better(
    tmp_path, averaged_score, becomes_best
):
    p = Progress()
    pol = policy(tmp_path, p, checkpoint_every=1, valid_every=100, average_last=3)
    for p.step in (1, 2, 3, 4):
        pol.save(p.step, best=p.step == 4)
    p.best_metric = 5.0
    seen = []
    steps, result, better = pol.average(
        p, lambda state: seen.append(state) or {"bleu": averaged_score}, lambda r: r["bleu"]
    )
    assert steps == [2, 3, 4] and better is becomes_best
    assert torch.equal(seen[0]["w"], torch.full((2,), 3.0))  # the mean of 2, 3 and 4
    best = tmp_path / "checkpoints" / "best.pt"
    assert os.path.samefile(best, tmp_path / "checkpoints" / "averaged.pt") is becomes_best
    assert p.best_metric == (9.0 if becomes_best else 5.0)


def test_a_full_disk_costs_the_checkpoint_not_the_run(tmp_path, monkeypatch, caplog):
    p = Progress(step=1)
    pol = policy(tmp_path, p)
    monkeypatch.setattr(
        ckpt, "save_atomic", lambda *a: (_ for _ in ()).throw(OSError(28, "No space left"))
    )
    assert pol.save(1) is None
    assert "could not write checkpoint" in caplog.text


def test_only_the_writing_rank_writes(tmp_path):
    pol = CheckpointPolicy(tmp_path, TrainConfig(), lambda: {}, writes=False)
    assert pol.save(1) is None and not (tmp_path / "checkpoints").exists()
