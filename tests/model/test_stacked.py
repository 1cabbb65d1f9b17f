"""Separate encoder and decoder depths, residual connections and layer normalisation between
stacked layers (nmt_cli/model/stacked.py, the bridge's alignment of depths, the decoding paths).
The equations themselves are checked against the plain reference in tests/model/test_seq2seq.py."""

import itertools

import pytest
import torch
from torch import nn

from nmt_cli.config.recipes import recipe_from_dict
from nmt_cli.config.sections import ModelConfig
from nmt_cli.data.tokenizer import BOS, EOS, PAD
from nmt_cli.decoding.search import beam_search, greedy
from nmt_cli.model import build_model
from nmt_cli.model.fast_decoding import prepare_for_decoding, prepared_for_decoding
from nmt_cli.model.quantize import quantize_int8
from nmt_cli.model.stacked import StackedRNN
from nmt_cli.runtime.errors import ConfigError

V = 40
E, H = 12, 16


def small(**kw) -> ModelConfig:
    return ModelConfig(**{"embed_dim": E, "hidden_dim": H, "dropout": 0.0, **kw})


def batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, V, (3, 7), generator=g)
    lengths = torch.tensor([7, 4, 2])
    for i, n in enumerate(lengths):
        src[i, n:] = PAD
    tgt = torch.randint(4, V, (3, 5), generator=g)
    return src, lengths, tgt


def gru_parameters(inputs: int, hidden: int) -> int:
    """One GRU layer, one direction: W_ih (3H x in), W_hh (3H x H), b_ih and b_hh (3H)."""
    return 3 * hidden * (inputs + hidden) + 6 * hidden


# ---------------------------------------------------------------- separate depths


def test_separate_depths_shape_the_encoder_bridge_and_decoder():
    src, lengths, tgt = batch()
    m = build_model(small(encoder_layers=3, decoder_layers=1), V, V)
    assert m.encoder.rnn.num_layers == 3 and m.decoder.rnn.num_layers == 1
    enc = m.encoder(src, lengths)
    assert enc.final.shape == (3, 3, H) and enc.states.shape == (3, 7, H)
    assert len(m.bridge.hidden) == 1
    state, _ = m.encode(src, lengths)
    assert state.hidden.shape == (1, 3, H)
    logits, weights = m(src, lengths, tgt)
    assert logits.shape == (3, 5, V) and weights.shape == (3, 5, 7)
    # the one decoder layer starts from the encoder's top layer: s_0 = tanh(W h^3_N + b)
    expected = torch.tanh(m.bridge.hidden[0](enc.final[2]))
    assert torch.allclose(state.hidden[0], expected)


def test_separate_depths_count_their_parameters():
    # two more BiGRU encoder layers (input H, H/2 per direction) and nothing else
    one = build_model(small(), V, V).parameter_count()
    deep = build_model(small(encoder_layers=3), V, V).parameter_count()
    assert deep - one == 2 * 2 * gru_parameters(H, H // 2)
    # one more decoder layer (input H) and one more bridge Linear (H x H + H)
    deeper = build_model(small(decoder_layers=2), V, V).parameter_count()
    assert deeper - one == gru_parameters(H, H) + H * H + H
    # residual connections add no parameters; layer normalisation g and b between each two
    # layers of a side
    stack = dict(encoder_layers=3, decoder_layers=2)
    plain = build_model(small(**stack), V, V).parameter_count()
    assert build_model(small(residual=True, **stack), V, V).parameter_count() == plain
    normed = build_model(small(layer_norm=True, **stack), V, V).parameter_count()
    assert normed - plain == (2 + 1) * 2 * H


@pytest.mark.parametrize(
    "encoder, decoder, reads", [(3, 1, [2]), (3, 2, [1, 2]), (1, 3, [0, 0, 0]), (2, 2, [0, 1])]
)
def test_the_bridge_aligns_depths_at_the_top(encoder, decoder, reads):
    src, lengths, _ = batch()
    m = build_model(small(encoder_layers=encoder, decoder_layers=decoder, bridge="last"), V, V)
    enc = m.encoder(src, lengths)
    hidden, _, summary = m.bridge(enc)
    assert torch.equal(hidden, enc.final[reads])
    assert torch.equal(summary, enc.final[-1])


def test_default_depths_keep_pytorch_s_own_modules_and_today_s_parameter_names():
    # a checkpoint written before the depth keys existed loads into the same parameters
    recipe = recipe_from_dict({"model": {"embed_dim": E, "hidden_dim": H, "layers": 2}})
    m = build_model(recipe.model, V, V)
    assert type(m.encoder.rnn) is nn.GRU and type(m.decoder.rnn) is nn.GRU
    assert m.encoder.rnn.num_layers == m.decoder.rnn.num_layers == 2
    names = {n for n in m.state_dict() if ".rnn." in n}
    assert {"encoder.rnn.weight_ih_l1_reverse", "decoder.rnn.bias_hh_l1"} <= names
    assert not any("norms" in n or "layers" in n for n in names)


# ---------------------------------------------------------------- residual and layer norm


def test_the_stack_reads_normalised_inputs_and_hands_up_residual_outputs():
    torch.manual_seed(0)
    stack = StackedRNN(
        "gru", E, H, 3, bidirectional=False, dropout=0.0, residual=True, layer_norm=True
    )
    assert len(stack.norms) == 2  # between layers 1-2 and 2-3
    x = torch.randn(2, 4, E)
    out, final = stack(x)
    assert out.shape == (2, 4, H) and final.shape == (3, 2, H)
    # by hand: h^1 = o^1 = RNN^1(x), h^l = RNN^l(LN^{l-1}(h^{l-1})) + h^{l-1}
    own, last = stack.layers[0](x)
    assert torch.allclose(final[0], last[0])  # the final state is the layer's own
    h = own
    for layer, norm in zip(stack.layers[1:], stack.norms):
        normed = norm(h)
        # what a layer reads has mean 0 and variance 1 per position (g = 1, b = 0 at start)
        assert torch.allclose(normed.mean(-1), torch.zeros(2, 4), atol=1e-5)
        assert torch.allclose(normed.var(-1, unbiased=False), torch.ones(2, 4), atol=1e-3)
        own, last = layer(normed)
        h = own + h
    assert torch.allclose(out, h) and torch.allclose(final[2], last[0])
    # the output keeps the RNN's scale: a sum of three GRU outputs, each within (-1, 1)
    assert out.abs().max() < 3


def test_a_one_layer_side_keeps_pytorch_s_own_module():
    m = build_model(small(encoder_layers=2, residual=True, layer_norm=True), V, V)
    assert isinstance(m.encoder.rnn, StackedRNN) and type(m.decoder.rnn) is nn.GRU


@pytest.mark.parametrize("init", ["embedding", "uniform", "xavier"])
def test_layer_norm_starts_as_the_identity_scale_under_every_init(init):
    m = build_model(small(layer_norm=True, layers=2, init=init), V, V)
    for norm in [*m.encoder.rnn.norms, *m.decoder.rnn.norms]:
        assert torch.equal(norm.weight, torch.ones(norm.weight.shape))
        assert torch.equal(norm.bias, torch.zeros(norm.bias.shape))


@pytest.mark.parametrize(
    "options",
    [
        dict(residual=True, layers=2),
        dict(layer_norm=True, layers=2),
        dict(residual=True, layer_norm=True, encoder_layers=3, decoder_layers=1),
    ],
)
def test_a_residual_or_normalised_model_learns_and_decodes(options):
    torch.manual_seed(3)
    m = build_model(small(attention="concat", **options), V, V)
    src, lengths, tgt = batch(4)
    tgt_in = torch.cat([torch.full((3, 1), BOS), tgt[:, :-1]], dim=1)
    opt = torch.optim.Adam(m.parameters(), 1e-2)
    losses = []
    for _ in range(30):
        summed, _ = m(src, lengths, tgt_in, tgt_out=tgt)
        loss = summed / tgt.numel()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    prepare_for_decoding(m)
    found = greedy(m, src, lengths, max_len_ratio=1.0, max_len_const=3)
    beam1 = beam_search(m, src, lengths, beam_size=1, max_len_ratio=1.0, max_len_const=3)
    assert [h[0].tokens for h in found] == [h[0].tokens for h in beam1]
    # it learned the first target word of each sentence
    assert [h[0].tokens[0] for h in found] == tgt[:, 0].tolist()


ORDERS = list(
    itertools.product(
        [("none", 1), ("dot", 1), ("general", 1), ("concat", 1), ("cosine", 1), ("concat", 3)],
        ["bahdanau", "luong", "conditional"],
    )
)


@pytest.mark.parametrize("attention, decoder", ORDERS)
def test_every_attention_and_decoder_order_takes_the_new_options(attention, decoder):
    score, heads = attention
    rnns = ["gru", "lstm", "rnn"]
    bridges = ["zero", "last", "linear", "mean"]
    for i, (options, bidirectional) in enumerate(
        itertools.product(
            [
                dict(residual=True, encoder_layers=2, decoder_layers=3),
                dict(layer_norm=True, encoder_layers=3, decoder_layers=1),
                dict(residual=True, layer_norm=True, layers=2),
            ],
            [True, False],
        )
    ):
        cfg = small(
            rnn=rnns[i % 3],
            bridge=bridges[i % 4],
            attention=score,
            attention_heads=heads,
            decoder=decoder,
            bidirectional=bidirectional,
            input_feeding=i % 2 == 1,
            **options,
        )
        torch.manual_seed(i)
        m = build_model(cfg, V, V)
        src, lengths, tgt = batch(i)
        summed, _ = m(src, lengths, tgt, tgt_out=tgt)
        summed.backward()
        assert all(torch.isfinite(p.grad).all() for p in m.parameters() if p.grad is not None)
        if cfg.layer_norm and cfg.decoder_depth > 1:  # read by the decoder's upper layers
            assert all(p.grad is not None for p in m.decoder.rnn.norms.parameters())
        with torch.no_grad(), prepared_for_decoding(m):
            assert m.decoder.rnn_step is not None  # the table step takes the stack
            found = greedy(m, src, lengths, max_len_ratio=1.0, max_len_const=3)
            beam1 = beam_search(m, src, lengths, beam_size=1, max_len_ratio=1.0, max_len_const=3)
            beam3 = beam_search(m, src, lengths, beam_size=3, max_len_ratio=1.0, max_len_const=3)
        assert [h[0].tokens for h in found] == [h[0].tokens for h in beam1], cfg
        assert all(hs and not {PAD, BOS, EOS} & set(hs[0].tokens) for hs in beam3), cfg


@pytest.mark.parametrize(
    "rnn, decoder, feeding",
    list(itertools.product(["gru", "lstm", "rnn"], ["bahdanau", "luong", "conditional"], [0, 1])),
)
def test_the_decoding_step_from_the_table_equals_the_stack_module(rnn, decoder, feeding):
    torch.manual_seed(0)
    cfg = small(
        rnn=rnn,
        decoder=decoder,
        input_feeding=bool(feeding),
        attention="general",
        decoder_layers=3,
        residual=True,
        layer_norm=True,
    )
    m = build_model(cfg, V, V).double().eval()
    with torch.no_grad():
        for norm in m.decoder.rnn.norms:  # away from g = 1, b = 0
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
    src, lengths, tgt = batch()
    rows = torch.tensor([0, 0, 1, 1, 1, 2])  # beam search's repeated parents
    with torch.no_grad(), prepared_for_decoding(m):
        assert m.decoder.rnn_step is not None
        state, memory = m.encode(src, lengths)
        state = state.select(rows)
        fast = []
        for i in range(3):
            fast.append(m.step(tgt[rows, i], state, memory.select(rows)))
            state = fast[-1][1]
    with torch.no_grad():
        state, memory = m.encode(src, lengths)
        state = state.select(rows)
        slow = []
        for i in range(3):
            slow.append(m.step(tgt[rows, i], state, memory.select(rows)))
            state = slow[-1][1]
    for (lp_fast, st_fast, _), (lp_slow, st_slow, _) in zip(fast, slow):
        assert torch.allclose(lp_fast, lp_slow, atol=1e-10)
        assert torch.allclose(st_fast.hidden, st_slow.hidden, atol=1e-10)


@pytest.mark.parametrize("rnn", ["gru", "lstm"])
def test_an_int8_stack_decodes_through_its_own_modules(rnn):
    # torch's int8 RNN layers inside the stack: the table step cannot read them and says so by
    # not being installed; the stack, its residual connections and layer norms run as they are
    torch.manual_seed(5)
    m = build_model(
        small(rnn=rnn, attention="concat", layers=2, residual=True, layer_norm=True), V, V
    ).eval()
    q = quantize_int8(m)
    assert all(type(layer) is not type(m.decoder.rnn.layers[0]) for layer in q.decoder.rnn.layers)
    prepare_for_decoding(q)
    assert q.decoder.rnn_step is None
    prepare_for_decoding(m)
    assert m.decoder.rnn_step is not None
    src, lengths, _ = batch(2)
    with torch.no_grad():
        float_logp = m.step(torch.full((3,), BOS), *m.encode(src, lengths))[0]
        int8_logp = q.step(torch.full((3,), BOS), *q.encode(src, lengths))[0]
    assert torch.allclose(float_logp.exp(), int8_logp.exp(), atol=0.05)
    hyps = beam_search(q, src, lengths, beam_size=2, max_len_ratio=1.0, max_len_const=3)
    assert all(hs and not {PAD, BOS, EOS} & set(hs[0].tokens) for hs in hyps)


# ---------------------------------------------------------------- the recipe


@pytest.mark.parametrize(
    "model, message",
    [
        (
            {"layers": 3, "encoder_layers": 4, "decoder_layers": 1},
            "model.layers: 3 is the depth of neither side, as model.encoder_layers (4) and "
            "model.decoder_layers (1) set both; leave model.layers out",
        ),
        (
            {"residual": True},
            "model.residual: acts between stacked layers (l >= 2) and both sides have one "
            "layer; set model.encoder_layers or model.decoder_layers above 1",
        ),
        (
            {"layer_norm": True, "layers": 1},
            "model.layer_norm: acts between stacked layers (l >= 2) and both sides have one "
            "layer; set model.encoder_layers or model.decoder_layers above 1",
        ),
        ({"encoder_layers": 0}, "model.encoder_layers: 0 is out of range (must be >= 1)"),
        ({"decoder_layers": 9}, "model.decoder_layers: 9 is out of range (must be <= 8)"),
        ({"decoder_layers": "two"}, "model.decoder_layers: expected an integer, got 'two'"),
        ({"layer_norm": "yes"}, "model.layer_norm: expected true or false, got 'yes'"),
    ],
)
def test_recipe_errors_are_one_line(model, message):
    with pytest.raises(ConfigError) as err:
        recipe_from_dict({"model": model}, "r.yaml")
    assert str(err.value) == f"r.yaml: {message}"
    assert "\n" not in str(err.value)


def test_the_specific_depth_wins_over_layers():
    m = recipe_from_dict({"model": {"layers": 3, "decoder_layers": 1}}).model
    assert (m.encoder_depth, m.decoder_depth) == (3, 1)
    m = recipe_from_dict({"model": {"layers": 2, "encoder_layers": 4, "decoder_layers": 2}}).model
    assert (m.encoder_depth, m.decoder_depth) == (4, 2)
    m = recipe_from_dict({"model": {"layers": 2}}).model
    assert (m.encoder_depth, m.decoder_depth) == (2, 2)
    m = recipe_from_dict({"model": {"residual": True, "encoder_layers": 2}}).model
    assert m.residual and (m.encoder_depth, m.decoder_depth) == (2, 1)
