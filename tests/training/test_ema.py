import pytest
import torch

from nmt_cli.training.ema import WeightAverage


def _set(model, value):
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(value)


def test_first_update_copies_then_blends_with_the_ramped_decay():
    model = torch.nn.Linear(3, 2)
    ema = WeightAverage(model, decay=0.999)
    _set(model, 1.0)
    ema.update(model)
    assert all(torch.all(p == 1.0) for p in ema.module.parameters())
    _set(model, 3.0)
    d = ema.current_decay()  # t = 1: min(0.999, 2/11)
    assert d == pytest.approx(2 / 11)
    ema.update(model)
    expected = d * 1.0 + (1 - d) * 3.0
    for p in ema.module.parameters():
        assert torch.allclose(p, torch.full_like(p, expected))
    # the trained model itself is untouched
    assert all(torch.all(p == 3.0) for p in model.parameters())


def test_decay_ramps_up_to_its_cap():
    ema = WeightAverage(torch.nn.Linear(2, 2), decay=0.99)
    ema.updates = 10
    assert ema.current_decay() == pytest.approx(11 / 20)
    ema.updates = 100_000
    assert ema.current_decay() == 0.99


def test_state_round_trip_continues_the_same_average():
    model = torch.nn.Linear(4, 4)
    a = WeightAverage(model, decay=0.9)
    for step in range(5):
        _set(model, float(step))
        a.update(model)
    b = WeightAverage(torch.nn.Linear(4, 4), decay=0.9)
    b.load_state_dict(a.state_dict(), a.updates)
    _set(model, 10.0)
    a.update(model)
    b.update(model)
    for pa, pb in zip(a.module.parameters(), b.module.parameters()):
        assert torch.equal(pa, pb)


def test_rejects_a_decay_outside_the_open_unit_interval():
    with pytest.raises(ValueError):
        WeightAverage(torch.nn.Linear(2, 2), decay=1.0)
