"""The training log alone: records, regular progress lines with totals and ETA, summary.json."""

import json
import logging

import pytest

from nmt_cli.config.sections import TrainConfig
from nmt_cli.training import log as train_log
from nmt_cli.training.log import TrainingLog, format_duration, remaining_seconds


def test_remaining_time_is_whichever_limit_comes_first():
    assert remaining_seconds(TrainConfig(max_steps=100), 50, 0, 10.0) == pytest.approx(10.0)
    assert remaining_seconds(TrainConfig(max_steps=100), 60, 20, 10.0) == pytest.approx(
        10.0
    )  # resumed at 20
    assert remaining_seconds(TrainConfig(max_minutes=1.0), 5, 0, 15.0) == pytest.approx(45.0)
    assert remaining_seconds(
        TrainConfig(max_steps=1000, max_minutes=1.0), 10, 0, 15.0
    ) == pytest.approx(45.0)
    assert remaining_seconds(TrainConfig(max_steps=0, max_minutes=0), 10, 0, 15.0) is None
    assert remaining_seconds(TrainConfig(max_steps=100), 0, 0, 3.0) is None  # no rate yet
    assert format_duration(75) == "1m15s" and format_duration(3 * 3600 + 60) == "3h01m"


def test_lines_come_early_and_regularly_with_total_and_eta(tmp_path, monkeypatch, caplog):
    clock = [100.0]
    monkeypatch.setattr(train_log.time, "perf_counter", lambda: clock[0])
    tl = TrainingLog(tmp_path, TrainConfig(max_steps=1000), progress_bar=False)
    tl.start(0)
    lines = []
    with caplog.at_level(logging.INFO, logger="nmt"):
        for step in range(1, 61):
            clock[0] += 1.0  # one step a second
            tl.step(step, 0, 2.5, 1e-3, tgt_tokens=100 * step, train_time=step, data_wait=0.0)
        lines = [r.getMessage() for r in caplog.records]
    # the first after 5 s, then every 30 s of silence, and at every 50th step
    assert [line.split()[1] for line in lines] == ["5/1000", "35/1000", "50/1000"]
    assert "100 tgt tok/s" in lines[0] and lines[0].endswith("ETA 16m35s")
    records = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [50] and records[0]["kind"] == "train"


def test_validation_is_announced_recorded_and_summarised(tmp_path, caplog):
    tl = TrainingLog(tmp_path, TrainConfig(max_minutes=5.0), progress_bar=False)
    tl.start(0)
    history = []
    with caplog.at_level(logging.INFO, logger="nmt"):
        tl.validating(10, 40)
        tl.validation(
            history,
            10,
            {"loss": 3.21, "ppl": 24.8, "bleu": 12.345, "samples": [("a", "b")]},
            improved=True,
            lowered=False,
        )
        record = tl.averaged([5, 10], {"loss": 3.0, "bleu": 13.0}, better=True)
    text = caplog.text
    assert "step 10: validating on 40 sentences" in text
    assert "step 10: valid loss 3.210  ppl 24.80  BLEU 12.35  (best)" in text and "hyp: a" in text
    assert history[0]["valid_bleu"] == 12.35 and record == {
        "steps": [5, 10],
        "valid_loss": 3.0,
        "valid_bleu": 13.0,
        "best": True,
    }
    kinds = [json.loads(x)["kind"] for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert kinds == ["valid", "averaged"]
    tl.finish(
        {
            "stop_reason": "finished",
            "steps": 10,
            "wall_s": 1.0,
            "tgt_tokens_per_s": 5.0,
            "peak_rss_mb": 1.0,
        }
    )
    assert json.loads((tmp_path / "summary.json").read_text())["steps"] == 10
    assert not list(tmp_path.glob("*.part"))


def test_a_disabled_log_writes_nothing(tmp_path):
    tl = TrainingLog(tmp_path, TrainConfig(), enabled=False, progress_bar=True)
    tl.start(0)
    tl.step(50, 0, 1.0, 1e-3, 10, 1.0, 0.0)
    tl.finish({})
    assert list(tmp_path.iterdir()) == [] and tl.bar is None


def test_the_model_line_names_separate_depths_and_what_stands_between_layers(tmp_path, caplog):
    import torch

    from nmt_cli.config.sections import ModelConfig

    tl = TrainingLog(tmp_path, TrainConfig(), progress_bar=False)
    with caplog.at_level(logging.INFO, logger="nmt"):
        tl.describe(1_000_000, ModelConfig(), torch.device("cpu"), "fp32", 10)
        deep = ModelConfig(encoder_layers=3, decoder_layers=1, residual=True, layer_norm=True)
        tl.describe(2_000_000, deep, torch.device("cpu"), "fp32", 10)
    first, second = [r.getMessage() for r in caplog.records if r.getMessage().startswith("model:")]
    assert "layers" not in first  # a one-layer model reads as before
    assert "decoder, 3 + 1 layers residual layer_norm; device cpu" in second
