import pytest
import torch
import torch.nn.functional as F

from nmt_cli.config.sections import ModelConfig
from nmt_cli.decoding import selection
from nmt_cli.decoding.search import beam_search, greedy
from nmt_cli.decoding.selection import best_continuations, best_per_row, block_width
from nmt_cli.model import build_model


def log_probs(rows: int, v: int, seed: int) -> torch.Tensor:
    """Log-probabilities from bf16 logits, as bf16 decoding makes them: many exact ties."""
    g = torch.Generator().manual_seed(seed)
    logits = (torch.randn(rows, v, generator=g) * 3).bfloat16()
    return F.log_softmax(logits, dim=-1, dtype=torch.float32)


def test_block_width_divides_the_row_and_leaves_short_rows_alone():
    assert block_width(8000, 5) == 64
    assert block_width(8000 + 16, 5) == 16
    assert block_width(8000 + 1, 5) is None  # no width divides it
    assert block_width(640, 5) == 32  # 5 blocks of 64 would be half the row
    assert block_width(200, 5) is None


@pytest.mark.parametrize("v", [8000, 1024, 336, 333])
def test_best_per_row_is_max_with_its_first_position(v):
    values = log_probs(37, v, seed=v)
    values[3] = 0.0  # a row of ties: the first position wins
    values[4, v // 2 :] = values[4].max() + 1  # ties in several blocks
    values[5] = float("-inf")
    best, position = best_per_row(values)
    want, want_position = values.max(dim=-1)
    assert torch.equal(best, want)
    assert torch.equal(position, want_position)
    assert position[3] == 0 and position[4] == v // 2


@pytest.mark.parametrize(("v", "k"), [(8000, 5), (8000, 12), (1024, 4), (640, 5), (333, 5)])
def test_best_continuations_are_the_k_best_totals(v, k):
    n = 9
    logp = log_probs(n * k, v, seed=k).view(n, k, v)
    scores = torch.randn(n, k, generator=torch.Generator().manual_seed(v))
    scores[0, 1:] = float("-inf")  # the first step: one hypothesis alive
    scores[1] = float("-inf")  # a done sentence: nothing alive
    scores[2, :] = scores[2, 0]  # hypotheses level with each other: ties across them
    logp[2, :] = logp[2, 0]
    totals, positions = best_continuations(logp, scores, k)
    flat = (scores.unsqueeze(-1) + logp).view(n, k * v)
    # the k best, best first, of equal totals the lower position first (a stable sort)
    want, want_positions = flat.sort(dim=-1, descending=True, stable=True)
    assert torch.equal(totals, want[:, :k])
    assert torch.equal(positions, want_positions[:, :k])


def test_equal_totals_go_to_the_lower_position_whatever_the_row_width():
    """A sentence's choice may not depend on its batch: a shortlist union pads its rows to the
    batch's width, so the same values can sit in rows of different widths."""
    k, v = 5, 1024
    logp = torch.full((1, k, v), float("-inf"))
    logp[0, :, :6] = torch.tensor([-1.0, -2.0, -1.0, -3.0, -2.0, -1.0])  # ties within a row
    scores = torch.tensor([[0.0, 0.0, -5.0, float("-inf"), float("-inf")]])  # and across rows
    wide = torch.full((1, k, 2 * v), float("-inf"))
    wide[..., :v] = logp
    narrow_totals, narrow_positions = best_continuations(logp, scores, k)
    wide_totals, wide_positions = best_continuations(wide, scores, k)
    assert narrow_totals.tolist() == wide_totals.tolist() == [[-1.0, -1.0, -1.0, -1.0, -1.0]]
    # hypothesis 0's columns 0, 2, 5, then hypothesis 1's 0 and 2
    assert narrow_positions.tolist() == [[0, 2, 5, v, v + 2]]
    assert wide_positions.tolist() == [[0, 2, 5, 2 * v, 2 * v + 2]]


def test_beam_and_greedy_search_over_blocks_find_what_a_whole_row_search_finds(monkeypatch):
    torch.manual_seed(3)
    v = 640  # wide enough for blocks (the tests' other models are too small for them)
    m = build_model(ModelConfig(embed_dim=12, hidden_dim=16, dropout=0.0), v, v).eval()
    g = torch.Generator().manual_seed(5)
    src = torch.randint(4, v, (6, 7), generator=g)
    lengths = torch.tensor([7, 6, 5, 4, 2, 1])
    for i, length in enumerate(lengths):
        src[i, length:] = 0
    searched = [beam_search(m, src, lengths, beam_size=5, nbest=5), greedy(m, src, lengths)]
    monkeypatch.setattr(selection, "block_width", lambda columns, chosen: None)
    whole_rows = [beam_search(m, src, lengths, beam_size=5, nbest=5), greedy(m, src, lengths)]
    for got, want in zip(searched, whole_rows):
        assert [[(h.tokens, h.score) for h in hyps] for hyps in got] == [
            [(h.tokens, h.score) for h in hyps] for hyps in want
        ]
