import pytest
import torch
import torch.nn.functional as F

from nmt_cli.model import loss as loss_module
from nmt_cli.model.loss import output_loss


def _case(vocab=50, dim=16, shape=(7, 5), seed=0):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(*shape, dim, dtype=torch.float64, generator=g, requires_grad=True)
    weight = torch.randn(vocab, dim, dtype=torch.float64, generator=g, requires_grad=True)
    bias = torch.randn(vocab, dtype=torch.float64, generator=g, requires_grad=True)
    target = torch.randint(1, vocab, shape, generator=g)
    target[0, :3] = 0  # padding: no loss, no gradient
    target[-1, -1] = 0
    return h, weight, bias, target


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("chunk_bytes", [16 << 20, 4 * 50 * 4])  # one chunk; chunks of 4 rows
def test_matches_linear_then_cross_entropy(monkeypatch, smoothing, chunk_bytes):
    monkeypatch.setattr(loss_module, "CHUNK_BYTES", chunk_bytes)
    h, weight, bias, target = _case()
    fused = output_loss(h, weight, bias, target, smoothing)
    fused_grads = torch.autograd.grad(fused, (h, weight, bias))
    plain = F.cross_entropy(
        F.linear(h, weight, bias).reshape(-1, 50),
        target.reshape(-1),
        ignore_index=0,
        label_smoothing=smoothing,
        reduction="sum",
    )
    plain_grads = torch.autograd.grad(plain, (h, weight, bias))
    assert fused.item() == pytest.approx(plain.item(), rel=1e-12)
    for a, b in zip(fused_grads, plain_grads):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-12)
    assert torch.all(fused_grads[0][0, :3] == 0) and torch.all(fused_grads[0][-1, -1] == 0)


def test_gradient_is_scaled_by_the_upstream_gradient():
    h, weight, bias, target = _case()
    (g1,) = torch.autograd.grad(output_loss(h, weight, bias, target), (h,))
    (g3,) = torch.autograd.grad(3.0 * output_loss(h, weight, bias, target), (h,))
    assert torch.allclose(g3, 3.0 * g1)


def test_all_padding_gives_zero_loss_and_zero_gradients():
    h, weight, bias, target = _case()
    loss = output_loss(h, weight, bias, torch.zeros_like(target))
    grads = torch.autograd.grad(loss, (h, weight, bias))
    assert loss.item() == 0.0 and all(torch.all(g == 0) for g in grads)


def test_a_second_backward_is_refused_not_wrong():
    h, weight, bias, target = _case()
    loss = output_loss(h, weight, bias, target)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="runs once per forward"):
        loss.backward()


def test_under_autocast_it_falls_back_to_the_plain_route():
    h, weight, bias, target = _case()
    h, weight, bias = (t.detach().float() for t in (h, weight, bias))
    plain = F.cross_entropy(
        F.linear(h, weight, bias).reshape(-1, 50),
        target.reshape(-1),
        ignore_index=0,
        reduction="sum",
    )
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed = output_loss(h, weight, bias, target)
    assert mixed.dtype == torch.float32 and mixed.item() == pytest.approx(plain.item(), rel=0.05)
