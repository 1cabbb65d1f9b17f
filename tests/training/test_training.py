import json
import os
import shutil

import numpy as np
import pytest
import torch

from nmt_cli.config.recipes import recipe_from_dict
from nmt_cli.config.sections import TrainConfig
from nmt_cli.runtime.errors import CheckpointError, DataError, UserError
from nmt_cli.training import checkpoint as ckpt
from nmt_cli.training.checkpoint import load_model
from nmt_cli.training.log import TrainingLog
from nmt_cli.training.loop import Trainer, train
from nmt_cli.training.schedule import LearningRate, sampling_probability


def fresh_run(tiny_run, tmp_path, **train_overrides):
    recipe, run_dir = tiny_run
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    raw = recipe.to_dict()
    raw["train"].update(train_overrides)
    return recipe_from_dict(raw), copy


def params(path):
    return ckpt.load(path)["model"]


@pytest.mark.parametrize("sharded", [False, True], ids=["one-shard", "sharded"])
def test_resume_is_exact(tiny_run, tmp_path, monkeypatch, sharded):
    cut, end = 20, 40
    if (
        sharded
    ):  # 400 pairs, 4 shards of 9-11 batches an epoch: step 51 stops inside epoch 2's second shard
        import nmt_cli.data.batches as data

        monkeypatch.setattr(data, "EPOCH_SHARD", 100)
        monkeypatch.setattr(data, "SHARD_BLOCK", 16)
        cut, end = 51, 60
    r_end, straight = fresh_run(tiny_run, tmp_path / "a", max_steps=end, checkpoint_every=cut)
    train(r_end, straight, device="cpu")
    r_cut, split_run = fresh_run(tiny_run, tmp_path / "b", max_steps=cut, checkpoint_every=cut)
    train(r_cut, split_run, device="cpu")
    r_end_b = recipe_from_dict(
        {**r_cut.to_dict(), "train": {**r_cut.to_dict()["train"], "max_steps": end}}
    )
    summary = train(r_end_b, split_run, device="cpu")
    assert summary["resumed_from"] == cut and summary["final_step"] == end
    a, b = (
        params(straight / "checkpoints" / "last.pt"),
        params(split_run / "checkpoints" / "last.pt"),
    )
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_subword_sampling_changes_training_and_resumes_exactly(tiny_run, tmp_path):
    # Epochs of a few big batches, so the 12 steps cross an epoch boundary and draw new
    # segmentations.
    opts = dict(checkpoint_every=6, subword_alpha=0.5, batch_tokens=3000)
    r12, straight = fresh_run(tiny_run, tmp_path / "a", max_steps=12, **opts)
    assert train(r12, straight, device="cpu")["epoch"] >= 1
    r6, split_run = fresh_run(tiny_run, tmp_path / "b", max_steps=6, **opts)
    train(r6, split_run, device="cpu")
    r12b = recipe_from_dict({**r6.to_dict(), "train": {**r6.to_dict()["train"], "max_steps": 12}})
    train(r12b, split_run, device="cpu")
    a, b = (
        params(straight / "checkpoints" / "last.pt"),
        params(split_run / "checkpoints" / "last.pt"),
    )
    assert all(torch.equal(a[k], b[k]) for k in a)
    plain, plain_run = fresh_run(
        tiny_run, tmp_path / "c", max_steps=12, **{**opts, "subword_alpha": 0.0}
    )
    train(plain, plain_run, device="cpu")
    c = params(plain_run / "checkpoints" / "last.pt")
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_subword_sampling_without_stored_training_text_says_what_to_do(tiny_run, tmp_path):
    recipe, run_dir = fresh_run(tiny_run, tmp_path, max_steps=2, subword_alpha=0.5)
    (run_dir / "data" / "train.tgt.txt").unlink()
    with pytest.raises(DataError, match="train.subword_alpha needs the training text.*re-run it"):
        train(recipe, run_dir, device="cpu")


def test_summary_and_logs(tiny_run, tmp_path):
    recipe, run_dir = fresh_run(
        tiny_run, tmp_path, max_steps=12, valid_every=6, valid_max_sentences=8
    )
    summary = train(recipe, run_dir, device="cpu")
    on_disk = json.loads((run_dir / "summary.json").read_text())
    for key in (
        "steps",
        "wall_s",
        "tgt_tokens",
        "tgt_tokens_per_s",
        "src_tokens_per_s",
        "peak_rss_mb",
    ):
        assert key in on_disk and on_disk[key] > 0, key
    assert summary["steps"] == 12
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    valid = [r for r in records if r["kind"] == "valid"]
    assert [r["step"] for r in valid] == [6, 12]
    assert all(r["valid_ppl"] > 1 for r in valid)
    assert (run_dir / "train.log").read_text().count("valid loss") == 2
    names = {p.name for p in (run_dir / "checkpoints").iterdir()}
    assert {"last.pt", "best.pt", "step-6.pt", "step-12.pt"} <= names


def test_keeps_only_the_newest_checkpoints(tiny_run, tmp_path):
    recipe, run_dir = fresh_run(
        tiny_run, tmp_path, max_steps=10, checkpoint_every=2, keep_checkpoints=2
    )
    train(recipe, run_dir, device="cpu")
    steps = [p.name for p in ckpt.step_checkpoints(run_dir)]
    assert steps == ["step-8.pt", "step-10.pt"]


def test_changed_recipe_refuses_resume_and_lists_keys(tiny_run, tmp_path):
    recipe, run_dir = fresh_run(tiny_run, tmp_path, max_steps=3)
    train(recipe, run_dir, device="cpu")
    raw = recipe.to_dict()
    raw["model"]["hidden_dim"] = 64
    raw["train"]["max_steps"] = 5
    with pytest.raises(
        CheckpointError, match=r"keys that matter: model\.hidden_dim; use --restart"
    ):
        Trainer(recipe_from_dict(raw), run_dir, device="cpu")
    assert Trainer(recipe_from_dict(raw), run_dir, device="cpu", restart=True).progress.step == 0


def test_non_finite_losses_skip_batches_then_stop(tiny_run, tmp_path, monkeypatch):
    recipe, run_dir = fresh_run(tiny_run, tmp_path, max_steps=10, max_nan_batches=3)
    import nmt_cli.model.seq2seq as seq2seq

    monkeypatch.setattr(
        seq2seq, "output_loss", lambda *a, **k: torch.tensor(float("nan"), requires_grad=True)
    )
    with pytest.raises(UserError, match="3 non-finite losses in a row"):
        train(recipe, run_dir, device="cpu")


def test_average_of_checkpoints_translates(tiny_run, tmp_path):
    recipe, run_dir = fresh_run(tiny_run, tmp_path, max_steps=6, checkpoint_every=2)
    train(recipe, run_dir, device="cpu")
    paths = ckpt.step_checkpoints(run_dir)[-3:]
    out = ckpt.average(paths, tmp_path / "avg.pt")
    states = [params(p) for p in paths]
    avg = params(out)
    key = "decoder.combine.weight"
    assert torch.allclose(avg[key], sum(s[key] for s in states) / 3, atol=1e-6)
    model = ckpt.load_model(out).model
    assert model.parameter_count() > 0


def test_learning_rate_schedules():
    cfg = TrainConfig(lr=1.0, schedule="inverse_sqrt", warmup_steps=100)
    lr = LearningRate(cfg)
    assert (
        lr(50) == pytest.approx(0.5)
        and lr(100) == pytest.approx(1.0)
        and lr(400) == pytest.approx(0.5)
    )
    cos = LearningRate(TrainConfig(lr=1.0, schedule="cosine", max_steps=100, min_lr=0.0))
    assert cos(50) == pytest.approx(0.5) and cos(100) == pytest.approx(0.0, abs=1e-9)
    timed = LearningRate(TrainConfig(lr=1.0, schedule="cosine", max_minutes=10, min_lr=0.1))
    assert timed(1, 0.0) == pytest.approx(1.0) and timed(1, 5.0) == pytest.approx(0.55)
    assert timed(1, 10.0) == pytest.approx(0.1) and timed(1, 12.0) == pytest.approx(0.1)
    both = LearningRate(
        TrainConfig(lr=1.0, schedule="cosine", max_steps=100, max_minutes=10, min_lr=0.0)
    )
    assert both(50, 1.0) == pytest.approx(0.5) and both(10, 5.0) == pytest.approx(
        0.5
    )  # whichever ends first
    plateau = LearningRate(
        TrainConfig(lr=1.0, schedule="plateau", plateau_patience=1, plateau_factor=0.5)
    )
    assert not plateau.observe(10.0, True)
    assert not plateau.observe(9.0, True)
    assert plateau.observe(9.0, True) and plateau(5) == pytest.approx(0.5)


def test_sampling_schedules():
    assert sampling_probability(TrainConfig(sampling="none"), 100) == 0.0
    lin = TrainConfig(sampling="linear", sampling_prob=0.4, sampling_steps=100)
    assert sampling_probability(lin, 50) == pytest.approx(0.2)
    inv = TrainConfig(sampling="inverse_sigmoid", sampling_prob=1.0, sampling_steps=1000)
    assert (
        sampling_probability(inv, 0)
        < 0.02
        < sampling_probability(inv, 1000)
        < sampling_probability(inv, 3000)
    )


def test_tensorboard_gets_each_numeric_metric_at_its_step(tiny_run, tmp_path, monkeypatch):
    scalars = []

    class Writer:
        def add_scalar(self, tag, value, step):
            scalars.append((tag, value, step))

        def close(self):
            scalars.append("closed")

    monkeypatch.setattr(TrainingLog, "open_tensorboard", lambda self: Writer())
    recipe, run_dir = fresh_run(
        tiny_run,
        tmp_path,
        max_steps=12,
        checkpoint_every=4,
        valid_every=6,
        valid_max_sentences=16,
        average_last=3,
    )
    summary = train(recipe, run_dir, device="cpu")
    assert scalars[-1] == "closed"
    tags = {tag: (value, step) for tag, value, step in scalars[:-1]}
    # the average of steps 6, 8 and 12 is plotted at step 12; flags are not plotted
    assert tags["averaged/valid_bleu"] == (summary["averaged"]["valid_bleu"], 12)
    assert "averaged/best" not in tags
    assert tags["valid/valid_loss"][1] == 12
    assert all(1 <= step <= 12 for _, step in tags.values())


def test_early_stopping_and_max_minutes(tiny_run, tmp_path):
    # lr so small that valid BLEU cannot move: patience 2 stops after the 3rd validation.
    recipe, run_dir = fresh_run(
        tiny_run,
        tmp_path / "early",
        max_steps=500,
        valid_every=4,
        valid_max_sentences=4,
        patience=2,
        lr=1e-9,
        schedule="constant",
    )
    summary = train(recipe, run_dir, device="cpu")
    assert summary["stop_reason"].startswith("early stopping") and summary["final_step"] == 12
    recipe, run_dir = fresh_run(tiny_run, tmp_path / "clock", max_steps=100000, max_minutes=0.002)
    summary = train(recipe, run_dir, device="cpu")
    assert summary["stop_reason"] == "reached max_minutes 0.002" and summary["final_step"] < 1000


def _ddp_rank(
    rank: int, world: int, port: int, recipe_dict: dict, run_dir: str, out: str, late_start_s: float
) -> None:
    import os
    import time
    from pathlib import Path

    import torch.distributed as dist

    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank),
    )
    torch.set_num_threads(1)
    trainer = Trainer(
        recipe_from_dict(recipe_dict), Path(run_dir), device="cpu", progress_bar=False
    )
    if rank == 1:
        time.sleep(late_start_s)  # its clock reads less: a time-driven lr must still agree
    trainer.train()
    torch.save(trainer.model.state_dict(), Path(out) / f"rank{rank}.pt")
    dist.barrier()  # neither rank tears the group down while the other still talks to it
    dist.destroy_process_group()


def test_two_process_gloo_run_keeps_ranks_identical(tiny_run, tmp_path):
    import socket

    import torch.multiprocessing as mp

    # Cosine over a 9 s budget with rank 1 starting 4 s late: rank 0 waits for it in the first
    # all-reduce, so from step 2 its clock (4/9 of the budget > 2/6 of the steps) sets the lr
    # unless the ranks share one clock.
    recipe, run_dir = fresh_run(
        tiny_run,
        tmp_path,
        max_steps=6,
        valid_every=6,
        valid_max_sentences=4,
        checkpoint_every=6,
        schedule="cosine",
        max_minutes=0.15,
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(
        _ddp_rank, args=(2, port, recipe.to_dict(), str(run_dir), str(tmp_path), 4.0), nprocs=2
    )
    a, b = (torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in (0, 1))
    start = params(run_dir / "checkpoints" / "step-6.pt")
    for name in a:
        assert torch.equal(a[name], b[name]), name
        assert torch.equal(a[name], start[name]), name  # rank 0 wrote what both ranks hold
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["final_step"] == 6
    # Throughput counts both ranks' batches: the first 12 of the shared order (6 steps x 2 ranks).
    from nmt_cli.data.batches import iterate_epoch
    from nmt_cli.data.store import load_split

    split, cfg = load_split(run_dir, "train"), recipe.train
    both = [b.tgt_tokens for _, b in iterate_epoch(split, cfg.batch_tokens, cfg.seed, 0)][:12]
    assert summary["tgt_tokens"] == sum(both)


def test_average_last_writes_the_mean_and_keeps_the_better_as_best(tiny_run, tmp_path):
    recipe, run_dir = fresh_run(
        tiny_run,
        tmp_path,
        max_steps=12,
        checkpoint_every=4,
        valid_every=6,
        valid_max_sentences=16,
        average_last=3,
    )
    summary = train(recipe, run_dir, device="cpu")
    ckpts = run_dir / "checkpoints"
    averaged = params(ckpts / "averaged.pt")
    parts = [params(ckpts / f"step-{s}.pt") for s in (6, 8, 12)]  # the three newest numbered ones
    assert summary["averaged"]["steps"] == [6, 8, 12]
    for name, value in averaged.items():
        if value.is_floating_point():
            assert torch.allclose(value, sum(p[name] for p in parts) / 3, atol=1e-6), name
    best_is_averaged = os.path.samefile(ckpts / "best.pt", ckpts / "averaged.pt")
    assert best_is_averaged == summary["averaged"]["best"]
    # what a resumed run will compare new checkpoints against
    resumed_best = ckpt.load(ckpts / "last.pt")["progress"]["best_metric"]
    if best_is_averaged:
        assert resumed_best == pytest.approx(summary["averaged"]["valid_bleu"], abs=0.01)
    else:
        assert resumed_best >= summary["averaged"]["valid_bleu"] - 0.01
    if not best_is_averaged:
        assert summary["averaged"]["valid_bleu"] <= summary["best_valid_bleu"]
    model = load_model(run_dir).model  # the run dir still translates
    assert model is not None


def test_ema_checkpoints_translate_with_the_average_and_resume_exactly(tiny_run, tmp_path):
    r40, straight = fresh_run(
        tiny_run, tmp_path / "a", max_steps=40, checkpoint_every=20, ema_decay=0.99
    )
    train(r40, straight, device="cpu")
    r20, split_run = fresh_run(
        tiny_run, tmp_path / "b", max_steps=20, checkpoint_every=20, ema_decay=0.99
    )
    train(r20, split_run, device="cpu")
    r40b = recipe_from_dict({**r20.to_dict(), "train": {**r20.to_dict()["train"], "max_steps": 40}})
    assert train(r40b, split_run, device="cpu")["resumed_from"] == 20
    a = ckpt.load(straight / "checkpoints" / "last.pt")
    b = ckpt.load(split_run / "checkpoints" / "last.pt")
    assert a["ema_updates"] == b["ema_updates"] == 40
    for key in ("model", "raw_model"):
        for k in a[key]:
            assert torch.equal(a[key][k], b[key][k]), (key, k)
    # the average is not the raw weights, and it is what translation loads
    assert any(not torch.equal(a["model"][k], a["raw_model"][k]) for k in a["model"])
    model = load_model(straight / "checkpoints" / "last.pt").model
    for k, v in model.state_dict().items():
        assert torch.equal(v, a["model"][k]), k


def test_accumulated_batches_weigh_every_target_token_the_same(tiny_run, tmp_path):
    """Two accumulated batches of 1 and 8 sentences make the same update as one batch of all 9
    (in fp32: under bf16 autocast, which ``auto`` picks on a bf16 CPU, the two differ by
    rounding)."""
    from nmt_cli.data.batches import make_batch
    from nmt_cli.data.store import load_split

    recipe, run = fresh_run(
        tiny_run,
        tmp_path,
        optimizer="sgd",
        lr=0.5,
        clip_norm=0.0,
        accumulate=2,
        label_smoothing=0.0,
        precision="fp32",
    )
    raw = recipe.to_dict()
    raw["model"]["dropout"] = 0.0
    trainer = Trainer(recipe_from_dict(raw), run, device="cpu", progress_bar=False)
    split = load_split(run, "train")
    start = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer._step([(0, make_batch(split, [0])), (1, make_batch(split, list(range(1, 9))))], 0.0)
    accumulated = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.model.load_state_dict(start)
    trainer._step([(0, make_batch(split, list(range(9))))], 0.0)
    for name, value in trainer.model.state_dict().items():
        assert torch.allclose(accumulated[name], value, atol=1e-6), name
    assert any(not torch.equal(start[k], accumulated[k]) for k in start)


def test_case_augmentation_recases_each_epoch_alike_on_resume_and_changes_training(
    tiny_run, tmp_path
):
    from nmt_cli.data.store import load_split
    from nmt_cli.data.tokenizer import Tokenizer
    from nmt_cli.training.run_state import TrainingBatches

    recipe, run_dir = tiny_run
    tokenizer = Tokenizer.load(run_dir)
    split = load_split(run_dir, "train")
    batches = TrainingBatches(run_dir, split, tokenizer, recipe.train, augment_case=0.5)
    first, again, second = (batches._epoch_split(e) for e in (0, 0, 1))
    assert len(first) == len(split)
    rows = range(len(split))
    texts = tokenizer.decode_tgt([first.tgt.get(i).tolist() for i in rows])
    upper = sum(t == t.upper() and t != t.lower() for t in texts)
    assert 0.15 * len(split) < upper < 0.4 * len(split)  # half of the half drawn
    assert all(np.array_equal(first.src.get(i), again.src.get(i)) for i in rows)
    assert any(not np.array_equal(first.src.get(i), second.src.get(i)) for i in rows)
    runs = []
    for share in (0.5, 0.0):
        raw = recipe.to_dict()
        raw["train"].update(max_steps=4, checkpoint_every=4)
        raw["data"]["augment_case"] = share
        copy = tmp_path / f"run-{share}"
        shutil.copytree(run_dir, copy)
        train(recipe_from_dict(raw), copy, device="cpu")
        runs.append(params(copy / "checkpoints" / "last.pt"))
    assert not all(torch.equal(runs[0][k], runs[1][k]) for k in runs[0])
