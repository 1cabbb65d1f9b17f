"""Encoder, bridge, decoder and the whole seq2seq (nmt_cli/model/)."""

import itertools

import numpy as np
import pytest
import torch

from nmt_cli.config.sections import ModelConfig
from nmt_cli.model import build_model
from nmt_cli.model.bridge import Bridge
from nmt_cli.model.encoder import Encoder
from nmt_cli.model.fast_decoding import (
    prepare_for_decoding,
    prepared_for_decoding,
    tanh_through_fp32,
    undo_preparation,
)

V = 40


def batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, V, (3, 7), generator=g)
    lengths = torch.tensor([7, 4, 2])
    for i, n in enumerate(lengths):
        src[i, n:] = 0
    tgt = torch.randint(4, V, (3, 5), generator=g)
    return src, lengths, tgt


def small(**kw) -> ModelConfig:
    base = dict(embed_dim=12, hidden_dim=16, dropout=0.0)
    base.update(kw)
    return ModelConfig(**base)


COMBINATIONS = list(
    itertools.product(
        ["gru", "lstm", "rnn"],
        ["none", "dot", "general", "concat", "cosine"],
        ["bahdanau", "luong", "conditional"],
        [False, True],
    )
)


@pytest.mark.parametrize("rnn, attention, decoder, feeding", COMBINATIONS)
def test_every_variant_trains_a_step(rnn, attention, decoder, feeding):
    torch.manual_seed(0)
    m = build_model(
        small(rnn=rnn, attention=attention, decoder=decoder, input_feeding=feeding), V, V
    )
    src, lengths, tgt = batch()
    logits, weights = m(src, lengths, tgt)
    assert logits.shape == (3, 5, V)
    if attention == "none":
        assert weights is None
    else:
        assert weights.shape == (3, 5, 7)
        assert (weights[1, :, 4:] == 0).all()
    logits.logsumexp(-1).mean().backward()
    grads = [p.grad for p in m.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize(
    "rnn, attention, layers, bridge",
    [
        ("gru", "general", 1, "linear"),
        ("lstm", "concat", 2, "mean"),
        ("gru", "none", 2, "last"),
        ("lstm", "dot", 1, "zero"),
        ("gru", "cosine", 1, "mean"),
    ],
)
def test_fused_path_equals_step_by_step(rnn, attention, layers, bridge):
    torch.manual_seed(1)
    m = (
        build_model(
            small(rnn=rnn, attention=attention, layers=layers, bridge=bridge, decoder="luong"), V, V
        )
        .double()
        .eval()
    )
    src, lengths, tgt = batch(1)
    state, memory = m.encode(src, lengths)
    assert m.decoder.fused(False)
    fused, w_fused = m.decoder._forward_fused(tgt, state, memory)
    steps, w_steps = m.decoder._forward_steps(tgt, state, memory, m.output, None)
    assert torch.allclose(fused, steps, atol=1e-10)
    if w_fused is not None:
        assert torch.allclose(w_fused, w_steps, atol=1e-10)


def test_variants_that_cannot_fuse_say_so():
    for kw in (
        dict(decoder="bahdanau"),
        dict(input_feeding=True),
        dict(decoder="conditional"),
        dict(decoder="conditional", attention="none"),
    ):
        m = build_model(small(**kw), V, V)
        assert not m.decoder.fused(False)
    assert not build_model(small(), V, V).decoder.fused(True)


@pytest.mark.parametrize("rnn, layers", [("gru", 1), ("lstm", 2)])
def test_conditional_step_is_two_transitions_around_attention(rnn, layers):
    """s'_i = f1(s_{i-1}, y_{i-1}); c_i = attend(s'_i); s_i = f2(s'_i, c_i) on the top layer;
    h~_i = tanh(W_o [s_i; c_i; y_{i-1}]) -- recomputed here from the modules' own weights."""
    torch.manual_seed(7)
    m = (
        build_model(small(rnn=rnn, layers=layers, decoder="conditional", attention="general"), V, V)
        .double()
        .eval()
    )
    src, lengths, tgt = batch(2)
    d = m.decoder
    state, memory = m.encode(src, lengths)
    h_tilde, new_state, weights = d.step(tgt[:, 0], state, memory)

    e = m.tgt_embedding(tgt[:, 0]).unsqueeze(1)
    first, first_state = d.rnn(e, state.rnn_state())  # s'_i
    first_hidden = first_state[0] if rnn == "lstm" else first_state
    context, expected_weights = d.attention(memory.attention, first)  # query s'_i
    top = (first_state[0][-1:], first_state[1][-1:]) if rnn == "lstm" else first_hidden[-1:]
    second, second_state = d.transition(context, top)  # s_i = f2(s'_i, c_i)
    second_hidden = second_state[0] if rnn == "lstm" else second_state
    expected = torch.tanh(d.combine(torch.cat([second, context, e], -1))).squeeze(1)

    assert torch.allclose(h_tilde, expected, atol=1e-10)
    assert torch.allclose(weights, expected_weights.squeeze(1), atol=1e-10)
    assert torch.allclose(new_state.hidden[-1], second_hidden[0], atol=1e-10)
    if layers > 1:  # lower layers keep f1's state
        assert torch.allclose(new_state.hidden[:-1], first_hidden[:-1], atol=1e-10)
    assert not torch.allclose(second, first)


@pytest.mark.parametrize("rnn", ["gru", "lstm"])
def test_padding_does_not_change_the_encoding(rnn):
    torch.manual_seed(2)
    enc_model = build_model(small(rnn=rnn, layers=2), V, V).eval()
    src = torch.tensor([[5, 6, 7, 8]])
    padded = torch.tensor([[5, 6, 7, 8, 0, 0, 0]])
    a = enc_model.encoder(src, torch.tensor([4]))
    b = enc_model.encoder(padded, torch.tensor([4]))
    assert torch.allclose(a.states, b.states[:, :4], atol=1e-6)
    assert (b.states[:, 4:] == 0).all()
    assert torch.allclose(a.final, b.final, atol=1e-6)


def test_bidirectional_states_join_both_directions():
    torch.manual_seed(3)
    emb = torch.nn.Embedding(V, 6)
    enc = Encoder("gru", emb, 10, 1, True, 0.0).eval()
    src = torch.tensor([[4, 5, 6]])
    out = enc(src, torch.tensor([3]))
    assert out.states.shape == (1, 3, 10)
    # final = [→h_N; ←h_1]
    assert torch.allclose(out.final[0, 0, :5], out.states[0, -1, :5])
    assert torch.allclose(out.final[0, 0, 5:], out.states[0, 0, 5:])


@pytest.mark.parametrize("kind", ["zero", "last", "linear", "mean"])
def test_bridge_kinds(kind):
    torch.manual_seed(4)
    emb = torch.nn.Embedding(V, 6)
    enc = Encoder("lstm", emb, 8, 2, True, 0.0)
    out = enc(torch.tensor([[4, 5, 6], [7, 8, 0]]), torch.tensor([3, 2]))
    bridge = Bridge(kind, 8, 2, lstm=True)
    hidden, cell, summary = bridge(out)
    assert hidden.shape == (2, 2, 8) and cell.shape == (2, 2, 8) and summary.shape == (2, 8)
    if kind == "zero":
        assert (hidden == 0).all() and torch.equal(summary, out.final[-1])
    if kind == "last":
        assert torch.equal(hidden, out.final)
    if kind in ("linear", "mean"):
        assert torch.equal(summary, hidden[-1]) and hidden.abs().max() <= 1


def test_embeddings_shared_and_tied():
    m = build_model(small(tie_embeddings=True, share_embeddings=True), V, V)
    assert m.src_embedding is m.tgt_embedding
    assert m.output.weight is m.tgt_embedding.weight
    separate = build_model(small(tie_embeddings=False, share_embeddings=False), V, V + 5)
    assert separate.src_embedding is not separate.tgt_embedding
    assert separate.output.weight.shape == (V + 5, 16)


def test_multi_head_attention_model():
    m = build_model(
        small(
            attention="concat",
            attention_heads=4,
            decoder="luong",
            input_feeding=True,
            initial_state_attention=True,
        ),
        V,
        V,
    )
    src, lengths, tgt = batch()
    logits, weights = m(src, lengths, tgt)
    assert m.decoder.context_dim == 64 and logits.shape == (3, 5, V)


def test_scheduled_sampling_feeds_back_predictions():
    torch.manual_seed(5)
    m = build_model(small(), V, V).eval()
    src, lengths, tgt = batch()
    teacher, _ = m(src, lengths, tgt, 0.0)
    same, _ = m(src, lengths, tgt, torch.tensor(0.0))
    assert torch.allclose(teacher, same, atol=1e-6)
    own, _ = m(src, lengths, tgt, torch.tensor(1.0))
    assert torch.allclose(own[:, 0], teacher[:, 0], atol=1e-6)  # step 0 always reads BOS
    assert not torch.allclose(own[:, 1:], teacher[:, 1:])


def test_overfits_64_real_pairs(tiny_run):
    from nmt_cli.data.batches import make_batch
    from nmt_cli.data.store import load_split
    from nmt_cli.data.tokenizer import Tokenizer

    _, run_dir = tiny_run
    tok = Tokenizer.load(run_dir)
    split = load_split(run_dir, "train")
    # The 64 pairs with the shortest targets: a step-by-step decoder's cost grows with them
    shortest = np.argsort(split.tgt.lengths, kind="stable")[:64]
    b = make_batch(split, sorted(shortest.tolist()))
    torch.manual_seed(6)
    m = build_model(
        ModelConfig(embed_dim=64, hidden_dim=128, dropout=0.0),
        tok.src_vocab_size,
        tok.tgt_vocab_size,
    )
    opt = torch.optim.Adam(m.parameters(), 3e-3)
    for _ in range(150):
        logits, _ = m(b.src, b.src_lengths, b.tgt_in)
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.size(-1)), b.tgt_out.reshape(-1), ignore_index=0
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.1


@pytest.mark.parametrize(
    "rnn, layers, decoder, feeding",
    list(
        itertools.product(
            ["gru", "lstm", "rnn"], [1, 2], ["bahdanau", "luong", "conditional"], [False, True]
        )
    ),
)
def test_decoding_step_from_the_input_table_equals_the_rnn_module(rnn, layers, decoder, feeding):
    torch.manual_seed(0)
    m = (
        build_model(
            small(
                rnn=rnn, layers=layers, decoder=decoder, input_feeding=feeding, attention="general"
            ),
            V,
            V,
        )
        .double()
        .eval()
    )
    src, lengths, tgt = batch()
    with torch.no_grad(), prepared_for_decoding(m):
        assert m.decoder.rnn_step is not None
        state, memory = m.encode(src, lengths)
        fast = [m.step(tgt[:, i], state, memory) for i in range(3)]
    assert m.decoder.rnn_step is None  # undone: PyTorch's own RNN module runs
    state, memory = m.encode(src, lengths)
    slow = [m.step(tgt[:, i], state, memory) for i in range(3)]
    for (lp_fast, st_fast, w_fast), (lp_slow, st_slow, w_slow) in zip(fast, slow):
        assert torch.allclose(lp_fast, lp_slow, atol=1e-10)
        assert torch.allclose(st_fast.hidden, st_slow.hidden, atol=1e-10)
        assert torch.allclose(w_fast, w_slow, atol=1e-10)


@pytest.mark.parametrize(
    "attention, heads, feeding",
    [("dot", 1, False), ("general", 2, True), ("concat", 1, False), ("concat", 2, True)],
)
def test_decoding_folds_the_combine_layer_into_the_attention_values(attention, heads, feeding):
    # Luong order, memory shared by several hypotheses (beam search): W_c's columns for c are
    # applied to the encoder states once (Decoder.context_projection) in a prepared model; no
    # step may change
    torch.manual_seed(2)
    m = (
        build_model(
            small(
                attention=attention, attention_heads=heads, decoder="luong", input_feeding=feeding
            ),
            V,
            V,
        )
        .double()
        .eval()
    )
    src, lengths, tgt = batch()
    rows = torch.arange(3).repeat_interleave(2)
    prepare_for_decoding(m)
    with torch.no_grad():
        state, memory = m.encode(src, lengths)
        assert not memory.shared_by(1).attention.projected  # one row per sentence: nothing to save
        shared = memory.shared_by(2)
        assert (
            shared.attention.projected and shared.select(torch.tensor([0, 2])).attention.projected
        )
        state = state.select(rows)
        folded = [m.step(tgt[rows, i], state, shared) for i in range(3)]
    undo_preparation(m)
    state, memory = m.encode(src, lengths)  # the plain path
    shared = memory.shared_by(2)
    assert not shared.attention.projected
    state = state.select(rows)
    plain = [m.step(tgt[rows, i], state, shared) for i in range(3)]
    for (lp_folded, _, w_folded), (lp_plain, _, w_plain) in zip(folded, plain):
        assert torch.allclose(lp_folded, lp_plain, atol=1e-10)
        assert torch.allclose(w_folded, w_plain, atol=1e-10)
    with torch.no_grad():  # the other orders read c itself
        for order in ("bahdanau", "conditional"):
            other = build_model(small(attention=attention, decoder=order), V, V)
            prepare_for_decoding(other)
            assert not other.encode(src, lengths)[1].shared_by(2).attention.projected


@pytest.mark.parametrize("rnn, layers", list(itertools.product(["gru", "lstm", "rnn"], [1, 2])))
def test_a_step_from_repeated_rows_equals_the_rnn_module(rnn, layers):
    # beam search selects rows that repeat their parents; the decoding step then computes
    # W_hh h once per distinct parent, which must change nothing
    torch.manual_seed(1)
    m = build_model(small(rnn=rnn, layers=layers, attention="general"), V, V).double().eval()
    src, lengths, tgt = batch()
    rows = torch.tensor([0, 0, 1, 1, 1, 0])
    with torch.no_grad(), prepared_for_decoding(m):
        state, memory = m.encode(src, lengths)
        repeated = state.select(rows)
        assert repeated.parents is not None and repeated.parents[0].size(1) == 2
        fast = m.step(tgt[rows, 0], repeated, memory.select(rows))
        assert state.select(torch.tensor([1, 0])).parents is None  # nothing repeated: plain rows
    state, memory = m.encode(src, lengths)  # not prepared: PyTorch's own RNN module runs
    assert state.select(rows).parents is None
    slow = m.step(tgt[rows, 0], state.select(rows), memory.select(rows))
    assert torch.allclose(fast[0], slow[0], atol=1e-10)
    assert torch.allclose(fast[1].hidden, slow[1].hidden, atol=1e-10)


def test_validation_prepares_afresh_after_weight_updates_and_trains_plain_after():
    # Validation during training prepares inside its block and undoes it at the end: a table of
    # the weights before an optimiser step must never be read after it
    torch.manual_seed(0)
    m = build_model(small(), V, V)
    with prepared_for_decoding(m):
        before = m.decoder.rnn_step.table.clone()
    assert m.decoder.rnn_step is None and m.decoding_setup is None
    with torch.no_grad():
        m.tgt_embedding.weight.add_(0.5)  # what an optimiser step does between validations
    with prepared_for_decoding(m) as setup:
        after = m.decoder.rnn_step.table
        assert m.decoding_setup is setup and setup.group_rows > 0
    assert not torch.allclose(before, after)
    expected = m.tgt_embedding.weight @ m.decoder.rnn.weight_ih_l0.t() + m.decoder.rnn.bias_ih_l0
    assert torch.allclose(after, expected.detach(), atol=1e-5)
    m.train()  # and training runs the plain modules, gradients and all
    src, lengths, tgt = batch()
    m(src, lengths, tgt)[0].sum().backward()
    assert m.tgt_embedding.weight.grad is not None


def test_preparation_decides_the_paths_once_for_the_device_and_dtype():
    torch.manual_seed(0)
    m = build_model(small(attention="concat", decoder="luong"), V, V)
    setup = prepare_for_decoding(m)
    assert not m.training and m.decoding_setup is setup
    assert setup.group_rows and setup.column_multiple == 1 and not setup.bf16_on_cpu
    assert m.decoder.rnn_step.share_parents and m.decoder.fold_context
    assert m.decoder.attention.decoding_score.exponential and m.decoder.tanh is torch.tanh
    low = prepare_for_decoding(m.to(torch.bfloat16))  # again, after the dtype changed
    assert low.bf16_on_cpu and not low.group_rows and low.column_multiple > 1
    assert m.decoder.tanh is tanh_through_fp32 and not m.decoder.rnn_step.share_parents
    assert m.decoder.rnn_step.table.dtype == torch.bfloat16
    undo_preparation(m)
    assert m.decoder.rnn_step is None and m.decoder.attention.decoding_score is None
    assert not m.decoder.fold_context and m.decoder.tanh is torch.tanh


@pytest.mark.parametrize("feeding", [False, True])
def test_loss_from_forward_equals_cross_entropy_of_its_logits(feeding):
    import torch.nn.functional as F

    torch.manual_seed(4)
    m = build_model(small(attention="concat", input_feeding=feeding), V, V).double().eval()
    src, lengths, tgt = batch(2)
    tgt_in, tgt_out = tgt, torch.cat([tgt[:, 1:], torch.zeros(3, 1, dtype=torch.long)], dim=1)
    logits, w_logits = m(src, lengths, tgt_in)
    summed, w_loss = m(src, lengths, tgt_in, tgt_out=tgt_out, label_smoothing=0.1)
    expected = F.cross_entropy(
        logits.reshape(-1, V),
        tgt_out.reshape(-1),
        ignore_index=0,
        label_smoothing=0.1,
        reduction="sum",
    )
    assert summed.item() == pytest.approx(expected.item(), rel=1e-12)
    assert torch.equal(w_logits, w_loss)


@pytest.mark.parametrize("init", ["embedding", "uniform", "xavier"])
def test_cosine_scale_starts_at_sqrt_of_the_memory_size_under_every_init(init):
    m = build_model(small(attention="cosine", attention_heads=2, init=init), V, V)
    assert torch.equal(m.decoder.attention.score.scale.detach(), torch.full((2, 1, 1), 16**0.5))


def test_output_layer_in_row_groups_equals_one_product_over_the_union(monkeypatch):
    # Shortlist decoding: each row is normalised over its own candidate set. With rows in groups,
    # the columns every row allows go through one product for all rows and each group multiplies
    # only its own others; the log-probabilities must not change.
    import nmt_cli.model.output_layer as output_layer
    from nmt_cli.model.output_layer import Columns, group_columns

    torch.manual_seed(3)
    m = build_model(small(attention="concat", tie_embeddings=False), V, V).double().eval()
    g = torch.Generator().manual_seed(4)
    rows = 14
    allowed = torch.rand(rows, 30, generator=g) < 0.15
    allowed[:, :4] = True  # the specials, everywhere
    allowed[:6, 20:] = False  # the first group's columns leave out a third
    allowed[:, 9] = True  # a frequent piece, everywhere too
    vocab = torch.arange(4, 34)
    src, lengths, tgt = batch()
    index = torch.arange(rows) % 3
    monkeypatch.setattr(output_layer, "GROUPED_SHARE", 1.0)
    columns = group_columns(vocab, allowed, 6)  # 6, 6 and a last group of 2 rows
    assert columns.group_rows == (6, 6, 2) and columns.ids.size(1) < 30
    assert columns.shared == 5 and all(ids[:5].tolist() == [4, 5, 6, 7, 13] for ids in columns.ids)
    with torch.no_grad():
        state, memory = m.encode(src, lengths)
        state, memory = state.select(index), memory.select(index)
        one, _, _ = m.step(tgt[index, 0], state, memory, Columns(vocab, allowed))
        grouped, _, _ = m.step(tgt[index, 0], state, memory, columns)
        again, _, _ = m.step(tgt[index, 0], state, memory, columns)
        # the same columns with nothing shared: every group multiplies all of its own
        unshared = Columns(
            columns.ids.clone(),
            columns.allowed.clone(),
            columns.group_rows,
            columns.group_of_row,
            columns.widths,
            columns.positions,
        )
        unshared, _, _ = m.step(tgt[index, 0], state, memory, unshared)
        # the middle group's rows gone, the groups kept: the other rows as before
        kept_rows = torch.tensor([*range(6), 12, 13])
        kept = columns.keep(kept_rows)
        assert kept.cuts is columns.cuts  # the rows of W_s cut for these groups stay valid
        fewer, _, _ = m.step(
            tgt[index, 0][kept_rows], state.select(kept_rows), memory.select(kept_rows), kept
        )
    assert grouped.shape == (rows, columns.ids.size(1))
    assert torch.equal(torch.isinf(grouped), ~columns.allowed)
    assert torch.allclose(grouped, one.gather(1, columns.union_positions()), atol=1e-12)
    assert torch.equal(again, grouped)  # the plan's logits, overwritten step after step
    assert torch.allclose(unshared, grouped, atol=1e-12)
    assert kept.group_rows == (6, 0, 2) and torch.allclose(fewer, grouped[kept_rows], atol=1e-12)


def test_the_output_layers_cuts_live_and_die_with_their_columns():
    # What the output layer cuts for a batch's columns (rows of W_s, offsets) is kept on the
    # Columns object of that batch, per layer: a server decoding batch after batch keeps none of
    # a finished batch's, and an ensemble's members each cut their own
    from nmt_cli.model.output_layer import Columns, logits

    torch.manual_seed(0)
    a, b = (build_model(small(tie_embeddings=False), V, V).eval() for _ in range(2))
    vocab = torch.arange(4, 20)
    allowed = torch.ones(3, 16, dtype=torch.bool)
    allowed[0, 5:] = False
    columns = Columns(vocab, allowed)
    h = torch.randn(3, 16)
    with torch.no_grad():
        first = logits(a.output, h, columns)
        assert len(columns.cuts) == 1 and len(columns.plans) == 1
        assert torch.equal(logits(a.output, h, columns), first)
        other = logits(b.output, h, columns)
    assert len(columns.cuts) == 2 and not torch.equal(first, other)
    expected = torch.nn.functional.linear(h, a.output.weight[vocab], a.output.bias[vocab])
    assert torch.allclose(first[~torch.isinf(first)], expected[allowed].detach(), atol=1e-6)
    assert torch.isinf(first[0, 5:]).all()


@pytest.mark.parametrize("init", ["embedding", "uniform", "xavier"])
@pytest.mark.parametrize(
    "kw", [{}, dict(rnn="lstm", attention="cosine", tie_embeddings=False, layers=2)]
)
def test_a_model_built_without_initial_values_loads_to_the_same_model(init, kw):
    torch.manual_seed(0)
    trained = build_model(small(init=init, **kw), V, V).eval()
    rng = torch.get_rng_state()
    bare = build_model(small(init=init, **kw), V, V, initialise=False)
    assert torch.equal(torch.get_rng_state(), rng)  # nothing was drawn
    bare.load_state_dict(trained.state_dict())
    bare.eval()
    src, lengths, tgt = batch()
    with torch.no_grad():
        assert torch.equal(bare(src, lengths, tgt)[0], trained(src, lengths, tgt)[0])
    # the skipping ends with the build: initialisers work again afterwards
    t = torch.empty(3)
    assert torch.equal(t.fill_(2.0), torch.full((3,), 2.0))
    torch.randn(1)
    assert not torch.equal(torch.get_rng_state(), rng)


def test_decoder_tanh_in_bf16_is_torch_tanh_exactly():
    """Decoding in bf16 on the CPU takes tanh through fp32: the values must be torch's own, for
    every bf16 number."""
    every = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    for x in (every, (torch.randn(320, 512) * 3).to(torch.bfloat16)):
        got, want = tanh_through_fp32(x), torch.tanh(x)
        assert torch.equal(got.isnan(), want.isnan())
        assert torch.equal(got[~got.isnan()], want[~want.isnan()])


def test_xavier_draws_glorot_matrices_zero_biases_and_unit_embeddings():
    """Glorot's bound for an embedding table is tiny (tied output logits start near zero, and a
    bf16 run stayed at the unigram loss), so xavier draws embeddings as the default init does."""
    torch.manual_seed(0)
    m = build_model(small(init="xavier", tie_embeddings=False), 200, 200)
    assert 0.9 < m.src_embedding.weight[1:].std().item() < 1.1
    assert 0.9 < m.tgt_embedding.weight[1:].std().item() < 1.1
    w = m.output.weight
    bound = (6 / (w.size(0) + w.size(1))) ** 0.5
    assert w.abs().max().item() <= bound and w.abs().max().item() > 0.9 * bound
    assert all(
        torch.count_nonzero(p).item() == 0
        for name, p in m.named_parameters()
        if p.dim() == 1 and "norm" not in name and "scale" not in name
    )
