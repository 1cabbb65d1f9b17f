"""The whole encoder-decoder against a plain reference written from the seed equations.

The reference below reads the model's weights and nothing else: one sentence at a time, an
explicit loop over time steps, every gate and score written out, in float64. Each variant is
compared with the model's teacher-forced log-probabilities, with its step-by-step decoding
(``encode``/``step``, the path search takes), with its loop function (scheduled sampling at
probability 1: each step reads the argmax of the step before) and with greedy search.

    encoder:   →h_j = f(→h_{j-1}, E x_j), ←h_j = f(←h_{j+1}, E x_j), h_j = [→h_j; ←h_j]
    stacks:    layer l >= 2 reads LN(h^{l-1}) (layer_norm) and hands up h^l = o^l + h^{l-1}
               (residual), o^l being its own states (LN(v) = g ⊙ (v - μ)/σ + b)
    bridge:    last s_0 = h_N; linear s_0 = tanh(W h_N + b); mean s_0 = tanh(W mean_j h_j + b)
               (LSTM cell: the same without tanh); c = s_0 (top layer), or h_N for last
    attention: e_kj = score_k(h_j, q), α_k = softmax(e_k), c = [Σ_j α_1j h_j; ...; Σ_j α_Kj h_j]
    decoder:   bahdanau, luong, conditional and the fixed context, see ``decode`` below
    output:    log p(y_i | y_<i, x) = log softmax(W_s h~_i + b_s)
"""

from __future__ import annotations

import math

import pytest
import torch

from nmt_cli.config.sections import ModelConfig
from nmt_cli.data.tokenizer import BOS, EOS, PAD
from nmt_cli.decoding.search import greedy
from nmt_cli.model import build_model
from nmt_cli.model.stacked import StackedRNN

V = 23
D = torch.float64


def w(module, name):
    return getattr(module, name).detach().to(D)


def layer_of(rnn, layer):
    """Stacked layer ``layer``'s module and its index there: PyTorch's multi-layer module holds
    all layers, a StackedRNN one module per layer."""
    if isinstance(rnn, StackedRNN):
        return rnn.layers[layer], 0
    return rnn, layer


# ---------------------------------------------------------------- recurrent cells (one step)


def gru(rnn, layer, x, h, suffix=""):
    """Cho et al. 2014: r = σ(W_r x + U_r h), z = σ(W_z x + U_z h),
    n = tanh(W_n x + r ⊙ (U_n h)), h' = (1 - z) ⊙ n + z ⊙ h (biases on both sides, as stored)."""
    wi, wh = w(rnn, f"weight_ih_l{layer}{suffix}"), w(rnn, f"weight_hh_l{layer}{suffix}")
    bi, bh = w(rnn, f"bias_ih_l{layer}{suffix}"), w(rnn, f"bias_hh_l{layer}{suffix}")
    n_h = h.numel()
    W_r, W_z, W_n = wi[:n_h], wi[n_h : 2 * n_h], wi[2 * n_h :]
    U_r, U_z, U_n = wh[:n_h], wh[n_h : 2 * n_h], wh[2 * n_h :]
    r = torch.sigmoid(W_r @ x + bi[:n_h] + U_r @ h + bh[:n_h])
    z = torch.sigmoid(W_z @ x + bi[n_h : 2 * n_h] + U_z @ h + bh[n_h : 2 * n_h])
    n = torch.tanh(W_n @ x + bi[2 * n_h :] + r * (U_n @ h + bh[2 * n_h :]))
    return (1 - z) * n + z * h, None


def lstm(rnn, layer, x, h, m, suffix=""):
    """i, f, o = σ(W x + U h + b), g = tanh(W_g x + U_g h + b_g);
    m' = f ⊙ m + i ⊙ g, h' = o ⊙ tanh(m')."""
    pre = (
        w(rnn, f"weight_ih_l{layer}{suffix}") @ x
        + w(rnn, f"bias_ih_l{layer}{suffix}")
        + w(rnn, f"weight_hh_l{layer}{suffix}") @ h
        + w(rnn, f"bias_hh_l{layer}{suffix}")
    )
    i, f, g, o = pre.chunk(4)
    m = torch.sigmoid(f) * m + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(m), m


def cell(kind, rnn, layer, x, h, m, suffix=""):
    rnn, layer = layer_of(rnn, layer)
    return gru(rnn, layer, x, h, suffix) if kind == "gru" else lstm(rnn, layer, x, h, m, suffix)


def layer_input(cfg, rnn, layer, below):
    """x^l = LN^{l-1}(h^{l-1}) with layer_norm (l >= 2), else h^{l-1}, where
    LN(v) = g ⊙ (v - μ) / σ + b, μ = mean v, σ = sqrt(mean (v - μ)² + ε)."""
    if layer == 0 or not cfg.layer_norm:
        return below
    norm = rnn.norms[layer - 1]
    mu = below.mean()
    sigma = torch.sqrt(((below - mu) ** 2).mean() + norm.eps)
    return w(norm, "weight") * (below - mu) / sigma + w(norm, "bias")


def hand_up(cfg, layer, own, below):
    """h^l = o^l + h^{l-1} with residual (l >= 2), else o^l."""
    return own + below if cfg.residual and layer > 0 else own


def stacked(cfg, rnn, x, hs, ms):
    """A stacked RNN step: layer l reads what layer l-1 hands up. -> each layer's own new state,
    cell, and the top layer's h^L."""
    new_h, new_m = [], []
    for layer, (h, m) in enumerate(zip(hs, ms)):
        own, m = cell(cfg.rnn, rnn, layer, layer_input(cfg, rnn, layer, x), h, m)
        x = hand_up(cfg, layer, own, x)
        new_h.append(own)
        new_m.append(m)
    return new_h, new_m, x


# ---------------------------------------------------------------- encoder and bridge


def encode(model, cfg, src):
    """BiRNN over one unpadded sentence: states h_1..h_N of the top layer and each layer's
    final [→h_N; ←h_1] (and cell states for an LSTM)."""
    enc = model.encoder.rnn
    half = cfg.hidden_dim // 2
    xs = [w(model.src_embedding, "weight")[t] for t in src]
    finals, final_cells = [], []
    for layer in range(cfg.encoder_depth):
        inputs = [layer_input(cfg, enc, layer, x) for x in xs]
        fwd, bwd = [None] * len(xs), [None] * len(xs)
        h, m = torch.zeros(half, dtype=D), torch.zeros(half, dtype=D)
        for j in range(len(xs)):
            h, m = cell(cfg.rnn, enc, layer, inputs[j], h, m)
            fwd[j] = h
        last_fwd_cell = m
        h, m = torch.zeros(half, dtype=D), torch.zeros(half, dtype=D)
        for j in reversed(range(len(xs))):
            h, m = cell(cfg.rnn, enc, layer, inputs[j], h, m, "_reverse")
            bwd[j] = h
        xs = [hand_up(cfg, layer, torch.cat([a, b]), x) for a, b, x in zip(fwd, bwd, xs)]
        finals.append(torch.cat([fwd[-1], bwd[0]]))
        final_cells.append(torch.cat([last_fwd_cell, m]) if cfg.rnn == "lstm" else None)
    return xs, finals, final_cells


def bridge(model, cfg, states, finals, final_cells):
    """-> s_0 per decoder layer, cell per layer, fixed context c. Decoder layer k (1..L_d)
    starts from encoder layer max(1, L_e - L_d + k)."""
    b = model.bridge
    depth, summary = cfg.decoder_depth, finals[-1]
    read = [max(0, cfg.encoder_depth - depth + k) for k in range(depth)]
    finals, final_cells = [finals[j] for j in read], [final_cells[j] for j in read]
    if cfg.bridge == "last":
        return finals, final_cells, summary
    if cfg.bridge == "linear":
        inputs, cell_inputs = finals, final_cells
    else:  # mean over the sentence's own positions only
        mean = sum(states) / len(states)
        inputs, cell_inputs = [mean] * depth, [mean] * depth
    s0 = [
        torch.tanh(w(b.hidden[k], "weight") @ inputs[k] + w(b.hidden[k], "bias"))
        for k in range(depth)
    ]
    m0 = [None] * depth
    if cfg.rnn == "lstm":
        m0 = [w(b.cell[k], "weight") @ cell_inputs[k] + w(b.cell[k], "bias") for k in range(depth)]
    return s0, m0, s0[-1]


# ---------------------------------------------------------------- attention


def attend(model, cfg, states, q):
    """K heads, each with its own parameters; contexts concatenated, weights averaged."""
    score = model.decoder.attention.score
    heads, hm = cfg.attention_heads, cfg.hidden_dim
    contexts, alphas = [], []
    for k in range(heads):
        if cfg.attention == "dot":  # e_j = h_j^T q
            e = torch.stack([h @ q for h in states])
        elif cfg.attention == "general":  # e_j = q^T W_a h_j
            W_a = w(score.W, "weight")[k * hm : (k + 1) * hm]
            e = torch.stack([q @ (W_a @ h) for h in states])
        elif cfg.attention == "concat":  # e_j = v^T tanh(W1 h_j + W2 q + b)
            a = score.attn_dim
            W1, W2 = (
                w(score.W1, "weight")[k * a : (k + 1) * a],
                w(score.W2, "weight")[k * a : (k + 1) * a],
            )
            b2, v = w(score.W2, "bias")[k * a : (k + 1) * a], w(score, "v")[k]
            e = torch.stack([v @ torch.tanh(W1 @ h + W2 @ q + b2) for h in states])
        else:  # e_j = g cos(h_j, W q)
            Wq = w(score.W, "weight")[k * hm : (k + 1) * hm] @ q
            g = float(w(score, "scale")[k])
            e = torch.stack([g * (h @ Wq) / (h.norm() * Wq.norm()) for h in states])
        alpha = torch.exp(e - e.max()) / torch.exp(e - e.max()).sum()
        contexts.append(sum(a_j * h for a_j, h in zip(alpha, states)))
        alphas.append(alpha)
    return torch.cat(contexts), sum(alphas) / heads


# ---------------------------------------------------------------- decoder


def decode(model, cfg, src, targets=None, steps=None, greedy_rules=False):
    """Log-probabilities of each step for one sentence, and the tokens read. ``targets``: teacher
    forcing with y_0 = BOS, y_1.. = targets; otherwise each step reads the argmax of the step
    before (the loop function), for ``steps`` steps. ``greedy_rules``: greedy search's choice --
    never PAD or BOS, no EOS at the first step, only EOS at the last, stop after EOS.

    bahdanau:    c_i = att(s_{i-1}); s_i = f(s_{i-1}, [E y_{i-1}; c_i (; h~_{i-1})])
                 h~_i = tanh(W_o [s_i; c_i; E y_{i-1}] + b_o)
    luong:       s_i = f(s_{i-1}, [E y_{i-1} (; h~_{i-1}) (; c_{i-1})]); c_i = att(s_i)
                 h~_i = tanh(W_c [c_i; s_i] + b_c)
    conditional: s'_i = f1(s_{i-1}, [E y_{i-1} (; h~_{i-1}) (; c_{i-1})]); c_i = att(s'_i)
                 s_i = f2(s'_i, c_i) (top layer); h~_i = tanh(W_o [s_i; c_i; E y_{i-1}] + b_o)
    none:        c_i = c (the bridge's summary) in the bahdanau order (Cho et al. 2014)
    initial_state_attention: c_0 = att(s_0) (TF's legacy attention_decoder)
    """
    d = model.decoder
    E = w(model.tgt_embedding, "weight")
    W_s, b_s = w(model.output, "weight"), w(model.output, "bias")
    W_comb, b_comb = w(d.combine, "weight"), w(d.combine, "bias")
    states, finals, final_cells = encode(model, cfg, src)
    s, m, summary = bridge(model, cfg, states, finals, final_cells)
    h_tilde = torch.zeros(W_comb.size(0), dtype=D)  # h~_0
    read_out = attend(model, cfg, states, s[-1])[0] if cfg.initial_state_attention else None  # c_0
    y = BOS
    out, chosen = [], []
    for i in range(len(targets) + 1 if targets is not None else steps):
        e = E[y]
        fed = ([h_tilde] if cfg.input_feeding else []) + (
            [read_out] if read_out is not None else []
        )
        # ``up``: the stack's output h^L_i, which is s_i (s'_i) without residual or layer_norm
        if cfg.attention == "none":
            c = summary
            s, m, up = stacked(cfg, d.rnn, torch.cat([e, c, *fed]), s, m)
            h_tilde = torch.tanh(W_comb @ torch.cat([up, c, e]) + b_comb)
        elif cfg.decoder == "bahdanau":
            c, _ = attend(model, cfg, states, s[-1])  # query s_{i-1}
            s, m, up = stacked(cfg, d.rnn, torch.cat([e, c, *fed]), s, m)
            h_tilde = torch.tanh(W_comb @ torch.cat([up, c, e]) + b_comb)
        elif cfg.decoder == "luong":
            s, m, up = stacked(cfg, d.rnn, torch.cat([e, *fed]), s, m)
            c, _ = attend(model, cfg, states, up)  # query s_i
            h_tilde = torch.tanh(W_comb @ torch.cat([c, up]) + b_comb)
        else:
            s, m, up = stacked(cfg, d.rnn, torch.cat([e, *fed]), s, m)  # s'_i
            c, _ = attend(model, cfg, states, up)  # query s'_i
            top, top_m = cell(cfg.rnn, d.transition, 0, c, up, m[-1])  # s_i = f2(s'_i, c_i)
            s, m = s[:-1] + [top], m[:-1] + [top_m]
            h_tilde = torch.tanh(W_comb @ torch.cat([s[-1], c, e]) + b_comb)
        if read_out is not None:
            read_out = c
        logits = W_s @ h_tilde + b_s
        logp = logits - torch.logsumexp(logits, 0)
        out.append(logp)
        if targets is not None:
            y = targets[i] if i < len(targets) else EOS
        else:
            pick = logp.clone()
            if greedy_rules:
                pick[PAD] = pick[BOS] = -math.inf
                if i == 0:
                    pick[EOS] = -math.inf  # min_len 1
                if i == steps - 1:
                    pick[:] = -math.inf
                    pick[EOS] = logp[EOS]  # the length cap
            y = int(pick.argmax())
            chosen.append(y)
            if greedy_rules and y == EOS:
                break
    return torch.stack(out), chosen


# ---------------------------------------------------------------- the variants

SMALL = dict(embed_dim=6, hidden_dim=8, dropout=0.0)
VARIANTS = {
    "bahdanau": dict(decoder="bahdanau", attention="concat"),
    "bahdanau+feeding": dict(decoder="bahdanau", attention="general", input_feeding=True),
    "luong": dict(decoder="luong", attention="general"),
    "luong+feeding": dict(decoder="luong", attention="dot", input_feeding=True),
    "conditional": dict(decoder="conditional", attention="concat"),
    "conditional+feeding, lstm": dict(
        decoder="conditional", attention="general", input_feeding=True, rnn="lstm"
    ),
    "rnnenc (no attention)": dict(decoder="bahdanau", attention="none"),
    "bridge last": dict(bridge="last", attention="general"),
    "bridge linear, 2 layers": dict(bridge="linear", layers=2, attention="concat"),
    "bridge mean, lstm": dict(bridge="mean", rnn="lstm", attention="concat"),
    "bridge mean, no attention": dict(bridge="mean", attention="none", decoder="bahdanau"),
    "multi-head concat": dict(attention="concat", attention_heads=3, input_feeding=True),
    "multi-head cosine": dict(attention="cosine", attention_heads=2, decoder="bahdanau"),
    "initial_state_attention": dict(
        decoder="luong", attention="concat", initial_state_attention=True
    ),
    "initial_state_attention+feeding, 2 heads": dict(
        decoder="luong",
        attention="general",
        attention_heads=2,
        input_feeding=True,
        initial_state_attention=True,
    ),
    "initial_state_attention, conditional": dict(
        decoder="conditional", attention="concat", initial_state_attention=True
    ),
    "residual, 2 layers": dict(layers=2, residual=True, attention="concat"),
    "layer_norm, lstm, bahdanau, encoder 2 decoder 1": dict(
        rnn="lstm",
        layer_norm=True,
        decoder="bahdanau",
        attention="general",
        encoder_layers=2,
        decoder_layers=1,
    ),
    "residual+layer_norm, conditional+feeding, encoder 3 decoder 2": dict(
        encoder_layers=3,
        decoder_layers=2,
        residual=True,
        layer_norm=True,
        decoder="conditional",
        attention="concat",
        input_feeding=True,
    ),
    "encoder 3 decoder 1, bridge last": dict(encoder_layers=3, decoder_layers=1, bridge="last"),
    "encoder 1 decoder 2, bridge mean, lstm, residual": dict(
        encoder_layers=1, decoder_layers=2, bridge="mean", rnn="lstm", residual=True
    ),
    "residual+layer_norm, no attention, 2 layers": dict(
        layers=2, residual=True, layer_norm=True, attention="none", decoder="bahdanau"
    ),
    "layer_norm, initial_state_attention, 2 heads": dict(
        layers=2,
        layer_norm=True,
        attention="cosine",
        attention_heads=2,
        initial_state_attention=True,
    ),
}


def build(name):
    cfg = ModelConfig(**{**SMALL, **VARIANTS[name]})
    torch.manual_seed(sorted(VARIANTS).index(name))
    model = build_model(cfg, V, V).to(D).eval()
    with (
        torch.no_grad()
    ):  # PyTorch's default init makes tiny models nearly uniform; spread them out
        for p in model.parameters():
            p.mul_(3.0)
        model.tgt_embedding.weight[PAD].zero_()
    return cfg, model


def batch():
    g = torch.Generator().manual_seed(11)
    src_lengths = torch.tensor([5, 2, 4])
    src = torch.randint(4, V, (3, 5), generator=g)
    tgt_lengths = [4, 2, 3]
    tgt = torch.randint(4, V, (3, 4), generator=g)
    for i in range(3):
        src[i, src_lengths[i] :] = PAD
        tgt[i, tgt_lengths[i] :] = PAD
    tgt_in = torch.cat([torch.full((3, 1), BOS), tgt], dim=1)  # BOS y_1 .. y_T
    return src, src_lengths, tgt, tgt_lengths, tgt_in


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_teacher_forced_and_step_by_step_equal_the_reference(name):
    cfg, model = build(name)
    src, src_lengths, tgt, tgt_lengths, tgt_in = batch()
    with torch.no_grad():
        forced = torch.log_softmax(model(src, src_lengths, tgt_in)[0], dim=-1)
        state, memory = model.encode(src, src_lengths)
        stepwise = []
        for i in range(tgt_in.size(1)):
            logp, state, _ = model.step(tgt_in[:, i], state, memory)
            stepwise.append(logp)
        stepwise = torch.stack(stepwise, dim=1)
    for i in range(3):
        n = tgt_lengths[i]
        expected, _ = decode(
            model, cfg, src[i, : src_lengths[i]].tolist(), targets=tgt[i, :n].tolist()
        )
        assert torch.allclose(forced[i, : n + 1], expected, atol=1e-9, rtol=0), name
        assert torch.allclose(stepwise[i, : n + 1], expected, atol=1e-9, rtol=0), name


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_hypotheses_sharing_one_memory_row_equal_the_reference(name):
    # Beam search's layout: K rows per sentence read one memory row (memory.shared_by(K)), each
    # row following its own target; every row must still be its own reference decoding.
    cfg, model = build(name)
    src, src_lengths, _, _, _ = batch()
    k, steps = 3, 4
    g = torch.Generator().manual_seed(5)
    targets = torch.randint(4, V, (3 * k, steps), generator=g)
    with torch.no_grad():
        state, memory = model.encode(src, src_lengths)
        state, memory = state.select(torch.arange(3).repeat_interleave(k)), memory.shared_by(k)
        prev = torch.full((3 * k,), BOS)
        stepwise, attention = [], []
        for i in range(steps):
            logp, state, weights = model.step(prev, state, memory)
            stepwise.append(logp)
            attention.append(weights)
            prev = targets[:, i]
        stepwise = torch.stack(stepwise, dim=1)
    for row in range(3 * k):
        i = row // k
        expected, _ = decode(
            model,
            cfg,
            src[i, : src_lengths[i]].tolist(),
            targets=targets[row, : steps - 1].tolist(),
        )
        assert torch.allclose(stepwise[row], expected[:steps], atol=1e-9, rtol=0), (name, row)
        if attention[0] is not None:  # padding positions of the shared row stay at zero weight
            assert float(attention[-1][row, int(src_lengths[i]) :].abs().sum()) == 0.0


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_loop_function_and_greedy_search_equal_the_reference(name):
    cfg, model = build(name)
    src, src_lengths, _, tgt_lengths, tgt_in = batch()
    with torch.no_grad():
        looped = torch.log_softmax(model(src, src_lengths, tgt_in, torch.tensor(1.0))[0], dim=-1)
        searched = greedy(model, src, src_lengths, max_len_ratio=1.0, max_len_const=3)
    for i in range(3):
        sentence = src[i, : src_lengths[i]].tolist()
        n = tgt_lengths[i] + 1  # where the padded target ends, PAD is read
        expected, _ = decode(model, cfg, sentence, steps=n)
        assert torch.allclose(looped[i, :n], expected, atol=1e-9, rtol=0), name
        path, tokens = decode(
            model, cfg, sentence, steps=int(src_lengths[i]) + 3 + 1, greedy_rules=True
        )
        assert tokens[-1] == EOS and searched[i][0].tokens == tokens[:-1], name
        score = sum(float(path[j, t]) for j, t in enumerate(tokens))
        assert searched[i][0].score == pytest.approx(score, abs=1e-5), name  # summed in float32
