import itertools

import pytest
import torch

from nmt_cli.config import ModelConfig
from nmt_cli.model import build_model
from nmt_cli.search import beam_search, greedy, length_penalty
from nmt_cli.tokenizer import BOS, EOS

V = 30


def model(seed=0, **kw):
    torch.manual_seed(seed)
    cfg = dict(embed_dim=12, hidden_dim=16, dropout=0.0)
    cfg.update(kw)
    return build_model(ModelConfig(**cfg), V, V).eval()


def sources():
    src = torch.tensor([[5, 6, 7, 8, 9], [10, 11, 12, 0, 0], [13, 0, 0, 0, 0]])
    return src, torch.tensor([5, 3, 1])


def sequence_logprob(m, src, length, tokens):
    state, memory = m.encode(src, length)
    prev = torch.tensor([BOS])
    total = 0.0
    for tok in tokens + [EOS]:
        logp, state, _ = m.step(prev, state, memory)
        total += float(logp[0, tok])
        prev = torch.tensor([tok])
    return total


def test_greedy_equals_beam_of_one():
    m = model()
    src, lengths = sources()
    g = greedy(m, src, lengths)
    b = beam_search(m, src, lengths, beam_size=1, alpha=0.0)
    for x, y in zip(g, b):
        assert x[0].tokens == y[0].tokens
        assert x[0].score == pytest.approx(y[0].score, abs=1e-4)


def test_batched_beam_equals_one_sentence_at_a_time():
    m = model(1)
    src, lengths = sources()
    together = beam_search(m, src, lengths, beam_size=4, nbest=3)
    for i in range(3):
        alone = beam_search(m, src[i:i + 1, :int(lengths[i])], lengths[i:i + 1], beam_size=4, nbest=3)
        assert [h.tokens for h in alone[0]] == [h.tokens for h in together[i]]


def test_beam_scores_are_true_log_probabilities_and_sorted():
    m = model(2)
    src, lengths = sources()
    result = beam_search(m, src, lengths, beam_size=5, nbest=5, alpha=0.6)
    for i, hyps in enumerate(result):
        assert len(hyps) == 5
        norms = [h.norm_score for h in hyps]
        assert norms == sorted(norms, reverse=True)
        for h in hyps[:2]:
            lp = sequence_logprob(m, src[i:i + 1, :int(lengths[i])], lengths[i:i + 1], h.tokens)
            assert h.score == pytest.approx(lp, abs=1e-3)
            assert h.norm_score == pytest.approx(h.score / float(length_penalty(torch.tensor(len(h.tokens) + 1), 0.6)), abs=1e-4)


def test_beam_search_finds_the_exhaustive_best_on_a_tiny_space():
    # With max length 2 (one token + EOS or two + forced EOS) the search space is small enough
    # to enumerate; a wide beam must find the best normalised hypothesis.
    m = model(3)
    src, lengths = torch.tensor([[5, 6]]), torch.tensor([2])
    hyps = beam_search(m, src, lengths, beam_size=V, alpha=0.0, max_len_ratio=0.01, max_len_const=1,
                       min_len=0)
    best = max(
        [([], sequence_logprob(m, src, lengths, []))] +
        [([a], sequence_logprob(m, src, lengths, [a])) for a in range(4, V)] +
        [([a, b], sequence_logprob(m, src, lengths, [a, b])) for a, b in itertools.product(range(4, V), repeat=2)],
        key=lambda x: x[1])
    assert hyps[0][0].tokens == best[0]
    assert hyps[0][0].score == pytest.approx(best[1], abs=1e-4)


def test_min_len_bars_the_empty_translation():
    m = model(5)
    with torch.no_grad():
        m.output.bias[EOS] += 20.0  # EOS dominates every step, as in a barely trained model
    src, lengths = sources()
    for search, kw in ((greedy, {}), (beam_search, {"beam_size": 3})):
        assert all(h[0].tokens == [] for h in search(m, src, lengths, min_len=0, **kw))
        for h in search(m, src, lengths, min_len=2, **kw):
            assert len(h[0].tokens) == 2 and EOS not in h[0].tokens
        # The length cap wins over min_len: with room for EOS only, EOS it is, with a real score.
        for h in search(m, src, lengths, min_len=5, max_len_ratio=0.01, max_len_const=0, **kw):
            assert h[0].tokens == [] and h[0].score > float("-inf")


def test_max_length_is_respected():
    m = model(4)
    src, lengths = sources()
    for hyps in (greedy(m, src, lengths, max_len_ratio=1.0, max_len_const=2),
                 beam_search(m, src, lengths, beam_size=3, max_len_ratio=1.0, max_len_const=2)):
        for i, h in enumerate(hyps):
            assert len(h[0].tokens) <= int(lengths[i]) + 2


@pytest.mark.parametrize("decoder, feeding", [("luong", False), ("bahdanau", True), ("conditional", False)])
def test_attention_rows_come_back_from_both_searches(decoder, feeding):
    m = model(5, decoder=decoder, input_feeding=feeding)
    src, lengths = sources()
    for hyps in (greedy(m, src, lengths, attention=True),
                 beam_search(m, src, lengths, beam_size=3, attention=True)):
        for i, h in enumerate(hyps):
            a = h[0].attention
            assert a.shape == (len(h[0].tokens) + 1, int(lengths[i]))
            assert torch.allclose(a.sum(-1), torch.ones(a.size(0)), atol=1e-5)


def test_length_penalty_formula():
    assert float(length_penalty(torch.tensor(7), 1.0)) == pytest.approx(2.0)
    assert float(length_penalty(torch.tensor(7), 0.0)) == 1.0
