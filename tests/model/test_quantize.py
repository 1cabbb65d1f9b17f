import pytest
import torch
from torch import nn

from nmt_cli.data.tokenizer import BOS
from nmt_cli.decoding.search import beam_search, greedy
from nmt_cli.model.quantize import quantize_int8
from tests.decoding.test_search import model as tiny_model
from tests.decoding.test_search import sources

ORDERS = [
    ("luong", False),
    ("luong", True),
    ("bahdanau", False),
    ("conditional", False),
    ("conditional", True),
]


def model(rnn="gru", decoder="luong", input_feeding=False, **kw):
    return tiny_model(rnn=rnn, decoder=decoder, input_feeding=input_feeding, **kw)


def float_modules(m):
    """Modules quantize_int8 should have replaced: exactly nn.Linear / nn.GRU / nn.LSTM, not their
    dynamically quantised subclasses."""
    return [name for name, mod in m.named_modules() if type(mod) in (nn.Linear, nn.GRU, nn.LSTM)]


def first_steps(m, steps=4):
    """Log-probabilities of the first few decoding steps, feeding back tokens 5, 6, 7, ..."""
    src, lengths = sources()
    state, memory = m.encode(src, lengths)
    prev = torch.full((3,), BOS)
    out = []
    for t in range(steps):
        logp, state, _ = m.step(prev, state, memory)
        out.append(logp)
        prev = torch.full((3,), 5 + t)
    return torch.stack(out)


@pytest.mark.parametrize("rnn", ["gru", "lstm"])
@pytest.mark.parametrize("decoder, feeding", ORDERS)
def test_every_linear_and_rnn_weight_becomes_int8(rnn, decoder, feeding):
    m = model(rnn, decoder, feeding)
    assert float_modules(m), "the float model should have modules to quantise"
    q = quantize_int8(m)
    assert float_modules(q) == []
    if decoder == "conditional":  # the second transition s_i = f2(s'_i, c_i) is quantised too
        assert type(q.decoder.transition) is not type(m.decoder.transition)


@pytest.mark.parametrize("rnn", ["gru", "lstm"])
@pytest.mark.parametrize("decoder, feeding", ORDERS)
def test_int8_steps_stay_close_to_float(rnn, decoder, feeding):
    m = model(rnn, decoder, feeding, layers=2)
    q = quantize_int8(m)
    with torch.no_grad():
        exact, approx = first_steps(m), first_steps(q)
    assert torch.allclose(approx.exp().sum(-1), torch.ones(4, 3), atol=1e-4)
    # int8 weights with per-call activation scales: close, not equal. Measured: at most 0.1 of the
    # spread of the log-probabilities over the vocabulary.
    spread = exact.std(-1, keepdim=True)
    assert ((approx - exact).abs() / spread).max() < 0.2
    assert not torch.equal(approx, exact)


@pytest.mark.parametrize("decoder, feeding", ORDERS)
def test_int8_searches_return_scored_hypotheses(decoder, feeding):
    q = quantize_int8(model("lstm", decoder, feeding))
    src, lengths = sources()
    with torch.no_grad():
        g = greedy(q, src, lengths)
        b = beam_search(q, src, lengths, beam_size=3, nbest=2)
    assert len(g) == len(b) == 3
    assert all(len(hyps) == 2 for hyps in b)
    assert all(h.score <= 0 for hyps in b for h in hyps)


def test_float_model_is_left_untouched():
    m = model("gru", "conditional")
    before = {k: v.clone() for k, v in m.state_dict().items()}
    quantize_int8(m)
    assert float_modules(m)
    after = m.state_dict()
    assert before.keys() == after.keys()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_tied_output_is_untied_so_the_embedding_stays_float():
    m = model(tie_embeddings=True, embed_dim=16)
    assert m.output.weight is m.tgt_embedding.weight
    q = quantize_int8(m)
    assert q.tgt_embedding.weight.dtype == torch.float32
    assert torch.equal(q.tgt_embedding.weight, m.tgt_embedding.weight)
    assert float_modules(q) == []
