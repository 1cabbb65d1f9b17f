import math

import pytest
import torch

from nmt_cli.model.attention import Attention


def _manual(scores: torch.Tensor, states: torch.Tensor, mask: torch.Tensor):
    scores = scores.masked_fill(~mask, float("-inf"))
    alpha = torch.softmax(scores, dim=-1)
    return alpha @ states, alpha


def test_dot_matches_hand_computation():
    # 1 sentence, 3 source positions (the last one padding), 2-dim states.
    h = torch.tensor([[[1.0, 0.0], [0.0, 2.0], [5.0, 5.0]]])
    s = torch.tensor([[[1.0, 1.0]]])
    mask = torch.tensor([[True, True, False]])
    att = Attention("dot", 2, 2)
    context, weights = att(att.prepare(h, mask), s)
    # scores h^T s = 1 and 2; softmax over the two real positions
    e1, e2 = math.exp(1), math.exp(2)
    expected_alpha = torch.tensor([e1 / (e1 + e2), e2 / (e1 + e2), 0.0])
    assert torch.allclose(weights[0, 0], expected_alpha)
    assert weights[0, 0, 2] == 0.0
    assert torch.allclose(context[0, 0], expected_alpha[0] * h[0, 0] + expected_alpha[1] * h[0, 1])


def test_general_is_h_W_s():
    torch.manual_seed(0)
    h, s = torch.randn(2, 4, 3), torch.randn(2, 5, 3)
    mask = torch.tensor([[True] * 4, [True, True, False, False]])
    att = Attention("general", 3, 3)
    W = att.score.W.weight  # maps memory -> query space: (Hq, Hm)
    context, weights = att(att.prepare(h, mask), s)
    scores = torch.einsum("btq,qm,bsm->bts", s, W, h)
    ctx, alpha = _manual(scores, h, mask[:, None, :])
    assert torch.allclose(weights, alpha, atol=1e-6)
    assert torch.allclose(context, ctx, atol=1e-6)


def test_concat_is_v_tanh_W1h_W2s():
    torch.manual_seed(1)
    h, s = torch.randn(2, 4, 3), torch.randn(2, 2, 5)
    mask = torch.ones(2, 4, dtype=torch.bool)
    att = Attention("concat", 3, 5, attn_dim=6)
    sc = att.score
    hidden = torch.tanh(sc.W1(h)[:, None, :, :] + sc.W2(s)[:, :, None, :])  # (B, T, S, A)
    scores = hidden @ sc.v[0]
    ctx, alpha = _manual(scores, h, mask[:, None, :])
    context, weights = att(att.prepare(h, mask), s)
    assert torch.allclose(weights, alpha, atol=1e-6)
    assert torch.allclose(context, ctx, atol=1e-6)


@pytest.mark.parametrize(
    "scale", [1.0, 30.0]
)  # 30: most units saturated, where 2 sigmoid(2x) - 1 rounds
def test_concat_scores_and_their_gradients_are_the_tanh_formulas_per_head(scale):
    torch.manual_seed(4)
    h, s = scale * torch.randn(2, 5, 6), scale * torch.randn(2, 3, 4)
    sc = Attention("concat", 6, 4, heads=2, attn_dim=7).score
    got = sc.scores(sc.keys(h), s)  # (B, K, T, S)
    w1 = sc.W1(h).view(2, 5, 2, 7)
    w2 = sc.W2(s).view(2, 3, 2, 7)
    want = torch.einsum("btska,ka->bkts", torch.tanh(w1[:, None] + w2[:, :, None]), sc.v)
    assert torch.allclose(got, want, atol=1e-5)
    grads_got = torch.autograd.grad(got.square().sum(), list(sc.parameters()))
    grads_want = torch.autograd.grad(want.square().sum(), list(sc.parameters()))
    for a, b in zip(grads_got, grads_want):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-4 * scale)


@pytest.mark.parametrize("exponential", [False, True])
def test_concat_scores_decoded_a_few_sentences_at_a_time_equal_the_whole_batch(
    monkeypatch, exponential
):
    import nmt_cli.model.fast_decoding as fast_decoding
    from nmt_cli.model.fast_decoding import DecodingConcatScore

    torch.manual_seed(5)
    h, s = torch.randn(7, 5, 6), torch.randn(7, 3, 4)
    sc = Attention("concat", 6, 4, heads=2, attn_dim=8).score
    keys = sc.keys(h)
    decoding = DecodingConcatScore(sc, exponential)
    with torch.no_grad():
        whole = decoding(keys, s, decoding.exp_keys(keys))
        monkeypatch.setattr(fast_decoding, "CHUNK_ELEMENTS", 2 * 3 * 5 * 8 * 2)  # two a chunk
        chunked = decoding(keys, s, decoding.exp_keys(keys))
    # equal but for the last bits: a BLAS may pick its kernel by the rows it is given (MKL on
    # AVX-512 does), so a chunk's product can round differently from the whole batch's
    assert torch.allclose(chunked, whole, rtol=0, atol=1e-6)
    assert torch.allclose(whole, sc.scores(keys, s).detach(), atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("scale", [1.0, 10.0, 1e4])  # 1e4: exponents far past EXP_LIMIT
def test_concat_exponential_form_gives_the_training_scores(dtype, scale):
    """Decoding on the CPU takes sigmoid(k + q) as 1 / (1 + e^-k e^-q), with e^-k kept per batch:
    the same scores as the training form, and the plain form where an exponent is out of range."""
    from nmt_cli.model.fast_decoding import DecodingConcatScore

    torch.manual_seed(6)
    h, s = scale * torch.randn(3, 5, 6), torch.randn(3, 4, 4)
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2, [True] + [False] * 4])
    att = Attention("concat", 6, 4, heads=2, attn_dim=7).to(dtype)
    h, s = h.to(dtype), s.to(dtype)
    plain = att.score.scores(att.score.keys(h), s).detach()  # the training form
    want_context, want_weights = (x.detach().float() for x in att(att.prepare(h, mask), s))
    assert att.prepare(h, mask).exp_keys is None  # not prepared: the plain score
    att.decoding_score = DecodingConcatScore(att.score, exponential=True)
    with torch.no_grad():
        memory = att.prepare(h, mask)
        assert (memory.exp_keys is None) == (scale > 1e3)
        if memory.exp_keys is not None:
            assert memory.select(torch.tensor([2, 0])).exp_keys.shape[0] == 2
        searched = att.decoding_score(memory.keys, s, memory.exp_keys)
        out_of_range = att.decoding_score(memory.keys, 100 * s, memory.exp_keys)  # past the limit
        context, weights = att(memory, s)
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    assert torch.isfinite(searched).all() and torch.isfinite(out_of_range).all()
    assert torch.allclose(searched.float(), plain.float(), atol=tolerance * scale, rtol=tolerance)
    assert torch.allclose(
        out_of_range.float(),
        att.score.scores(att.score.keys(h), 100 * s).detach().float(),
        atol=tolerance * scale,
        rtol=tolerance,
    )
    assert torch.allclose(weights.float(), want_weights, atol=5 * tolerance)
    assert torch.allclose(context.float(), want_context, atol=5 * tolerance * scale)
    assert (weights[2, :, 1:] == 0).all()


def test_cosine_scores_are_bounded_by_the_scale():
    torch.manual_seed(2)
    h, s = torch.randn(1, 6, 4), torch.randn(1, 3, 4)
    att = Attention("cosine", 4, 4)
    raw = att.score.scores(att.score.keys(h), s)
    assert raw.abs().max() <= att.score.scale.max() + 1e-5


@pytest.mark.parametrize("score", ["dot", "general", "concat", "cosine"])
def test_padding_gets_zero_weight_and_does_not_change_results(score):
    torch.manual_seed(3)
    att = Attention(score, 8, 8)
    h = torch.randn(1, 5, 8)
    s = torch.randn(1, 2, 8)
    short_ctx, short_w = att(att.prepare(h[:, :3], torch.ones(1, 3, dtype=torch.bool)), s)
    padded = torch.cat([h[:, :3], torch.full((1, 2, 8), 100.0)], dim=1)
    mask = torch.tensor([[True, True, True, False, False]])
    ctx, w = att(att.prepare(padded, mask), s)
    assert (w[..., 3:] == 0).all()
    assert torch.allclose(ctx, short_ctx, atol=1e-5)
    assert torch.allclose(w[..., :3], short_w, atol=1e-6)
    assert torch.allclose(w.sum(-1), torch.ones(1, 2))


def test_heads_have_their_own_parameters_and_concatenate():
    torch.manual_seed(4)
    att = Attention("concat", 4, 4, heads=3)
    h, s = torch.randn(2, 5, 4), torch.randn(2, 1, 4)
    mask = torch.ones(2, 5, dtype=torch.bool)
    context, weights = att(att.prepare(h, mask), s)
    assert context.shape == (2, 1, 12) and att.context_dim == 12
    parts = context.view(2, 1, 3, 4)
    assert not torch.allclose(parts[:, :, 0], parts[:, :, 1])
    assert torch.allclose(weights.sum(-1), torch.ones(2, 1))


def test_keys_are_computed_once_per_sentence():
    att = Attention("concat", 4, 4)
    calls = {"n": 0}
    original = att.score.W1.forward

    def counting(x):
        calls["n"] += 1
        return original(x)

    att.score.W1.forward = counting
    memory = att.prepare(torch.randn(1, 5, 4), torch.ones(1, 5, dtype=torch.bool))
    for _ in range(7):
        att(memory, torch.randn(1, 1, 4))
    assert calls["n"] == 1


@pytest.mark.parametrize("score", ["general", "concat", "cosine"])
def test_gradcheck(score):
    torch.manual_seed(5)
    att = Attention(score, 3, 3, heads=2).double()
    h = torch.randn(2, 4, 3, dtype=torch.double, requires_grad=True)
    s = torch.randn(2, 2, 3, dtype=torch.double, requires_grad=True)
    mask = torch.tensor([[True] * 4, [True, True, True, False]])
    fn = lambda h_, s_: att(att.prepare(h_, mask), s_)[0]
    assert torch.autograd.gradcheck(fn, (h, s))


@pytest.mark.parametrize(
    "score, heads", [("dot", 1), ("general", 2), ("concat", 1), ("concat", 3), ("cosine", 2)]
)
def test_projected_values_give_the_projected_context(score, heads):
    # W c + b from values W^(k) h_j (b on the first head's) equals W applied to the context itself
    torch.manual_seed(3)
    h, s = torch.randn(2, 5, 4, dtype=torch.double), torch.randn(2, 3, 4, dtype=torch.double)
    mask = torch.tensor([[True] * 5, [True, True, False, False, False]])
    att = Attention(score, 4, 4, heads).double()
    W, b = torch.randn(6, 4 * heads, dtype=torch.double), torch.randn(6, dtype=torch.double)
    context, weights = att(att.prepare(h, mask), s)
    memory = att.prepare(h, mask).project(W, b)
    assert memory.projected and memory.select(torch.tensor([1])).projected
    projected, projected_weights = att(memory, s)
    assert torch.allclose(projected, context @ W.t() + b, atol=1e-12)
    assert torch.equal(projected_weights, weights)
