import pytest
import torch

from nmt_cli.translation.words import (
    alignment_pairs,
    source_coverage,
    word_attention,
    word_index,
    words_of,
)


def test_word_index_starts_a_word_at_each_marked_piece():
    assert word_index(["▁Two", "▁do", "gs", "▁run", "."]) == [0, 1, 1, 2, 2]
    assert word_index(["ab", "▁c"]) == [0, 1]  # the first piece always starts a word
    assert word_index([]) == []


def test_words_keep_the_text_when_the_counts_agree_else_join_pieces():
    pieces = ["▁Two", "▁do", "gs", "▁run", "."]
    assert words_of(pieces, "TWO dogs run.") == ["TWO", "dogs", "run."]
    assert words_of(pieces, "Two dogs") == ["Two", "dogs", "run."]


def test_word_rows_sum_to_one_and_their_argmax_is_the_hard_alignment():
    src = ["▁Two", "▁do", "gs", "▁run", "."]
    tgt = ["▁De", "ux", "▁chiens", "▁cour", "ent", "."]
    weights = torch.softmax(
        torch.randn(len(tgt) + 1, len(src), generator=torch.Generator().manual_seed(3)), -1
    )
    att = word_attention(weights, src, tgt, "Two dogs run.", "Deux chiens courent.")
    assert att.source_words == ["Two", "dogs", "run."]
    assert att.target_words == ["Deux", "chiens", "courent."]
    assert len(att.piece_weights) == len(tgt)  # the EOS row is left out
    assert all(sum(row) == pytest.approx(1, abs=1e-5) for row in att.weights)
    # "Deux" = mean of its two pieces' rows, each summed over "dogs"' two pieces for column 1
    first = (weights[0, 1] + weights[0, 2] + weights[1, 1] + weights[1, 2]) / 2
    assert att.weights[0][1] == pytest.approx(float(first))
    best = {(row.index(max(row)), j) for j, row in enumerate(att.weights)}
    assert set(alignment_pairs(weights, src, tgt)) == best
    assert alignment_pairs(None, src, tgt) == []  # a hypothesis decoded without its attention


def test_coverage_gives_each_unchosen_source_word_its_best_target_word():
    src = ["▁A", "▁man", "▁on", "▁a", "▁bench"]
    tgt = ["▁Un", "▁homme", "▁sur", "▁un", "▁banc"]
    # every target word attends most to the source word at its own place, except "sur", which
    # attends most to "man": no target word chooses "on", though "sur" attends to it most
    weights = torch.eye(5) * 0.6 + 0.1
    weights[2] = torch.tensor([0.05, 0.5, 0.4, 0.0, 0.05])
    assert alignment_pairs(weights, src, tgt) == [(0, 0), (1, 1), (1, 2), (3, 3), (4, 4)]
    assert source_coverage(weights, src, tgt) == [(2, 2)]  # "on" -> "sur"
    assert source_coverage(torch.eye(5), src, tgt) == []  # every source word chosen
    assert source_coverage(None, src, tgt) == []
