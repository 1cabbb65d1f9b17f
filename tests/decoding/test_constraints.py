import math

import pytest
import torch

from nmt_cli.decoding.constraints import (
    Forced,
    constrained_beam_search,
    contains,
    with_forced_tokens,
)
from nmt_cli.decoding.search import beam_search
from nmt_cli.decoding.shortlist import Candidates
from tests.decoding.test_search import model, ragged_batch, sequence_logprob


def unlikely_tokens(m, src, lengths, n, k=4):
    """For each sentence, n tokens its unconstrained beam output does not use."""
    free = beam_search(m, src, lengths, beam_size=k, max_len_const=4)
    out = []
    for hyps in free:
        used = set(hyps[0].tokens)
        out.append([t for t in range(4, 30) if t not in used][:n])
    return free, out


def test_every_hypothesis_carries_its_terms_and_prefix_and_its_true_score():
    m = model(3)
    _, src, lengths = ragged_batch(8, 5)
    free, unlikely = unlikely_tokens(m, src, lengths, 4)
    forced = [
        Forced([[unlikely[0][0]]]),
        Forced([[unlikely[1][0], unlikely[1][1]]]),
        Forced([[unlikely[2][0]], [unlikely[2][1], unlikely[2][2], unlikely[2][3]]]),
        Forced([], [unlikely[3][0], unlikely[3][1]]),
        Forced([[unlikely[4][2]]], [unlikely[4][0]]),
        Forced(),
        Forced([[unlikely[6][0]], [unlikely[6][1]], [unlikely[6][2]]]),
        Forced([[unlikely[7][0], unlikely[7][0]]]),
    ]
    out = constrained_beam_search(m, src, lengths, forced, beam_size=4, nbest=3, max_len_const=4)
    for i, (f, hyps) in enumerate(zip(forced, out)):
        assert hyps, i
        for h in hyps:
            assert f.satisfied_by(h.tokens), (i, f, h.tokens)
            true = sequence_logprob(m, src[i : i + 1], lengths[i : i + 1], h.tokens)
            assert math.isclose(h.score, true, rel_tol=1e-4, abs_tol=1e-4)
        for a, b in zip(hyps, hyps[1:]):
            assert a.norm_score >= b.norm_score
        if f:
            assert not f.satisfied_by(free[i][0].tokens)  # the model would not choose them


def test_a_sentence_without_terms_keeps_its_plain_translation_in_a_mixed_batch():
    m = model(4)
    _, src, lengths = ragged_batch(6, 9)
    sources = [src[i, : lengths[i]].tolist() for i in range(6)]
    free, unlikely = unlikely_tokens(m, src, lengths, 2)
    forced = [Forced([[u[0]]]) if i % 2 else Forced() for i, u in enumerate(unlikely)]
    from nmt_cli.config.sections import DecodeConfig
    from nmt_cli.translation.translator import decode_ids

    config = DecodeConfig(beam_size=4, max_len_const=4, workers=1, batch_size=3)
    plain = decode_ids(m, sources, config)
    mixed = decode_ids(m, sources, config, forced=forced)
    for i in range(6):
        if i % 2:
            assert contains(mixed[i][0].tokens, [unlikely[i][0]])
            assert mixed[i][0].tokens != plain[i][0].tokens
        else:
            assert mixed[i][0].tokens == plain[i][0].tokens
            assert mixed[i][0].score == plain[i][0].score


def test_a_prefix_is_forced_then_the_beam_continues_as_the_model_scores_it():
    m = model(5)
    _, src, lengths = ragged_batch(4, 2)
    free, unlikely = unlikely_tokens(m, src, lengths, 2)
    forced = [Forced([], u) for u in unlikely]
    out = constrained_beam_search(m, src, lengths, forced, beam_size=4, max_len_const=4)
    for f, hyps, plain in zip(forced, out, free):
        assert hyps[0].tokens[: len(f.prefix)] == f.prefix
        assert hyps[0].tokens != plain[0].tokens
    # the model's own first tokens as the prefix give back its own translation
    own = [Forced([], h[0].tokens[:2]) for h in free]
    again = constrained_beam_search(m, src, lengths, own, beam_size=4, max_len_const=4)
    agree = sum(a[0].tokens == h[0].tokens for a, h in zip(again, free))
    assert agree >= 3


def test_shortlist_sets_gain_the_forced_tokens():
    cands = Candidates(
        torch.tensor([0, 1, 2, 3, 7, 9]),
        torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 0, 1]], dtype=torch.bool),
    )
    out = with_forced_tokens(cands, [Forced([[12, 5]]), Forced([], [9])])
    assert out.ids.tolist() == [0, 1, 2, 3, 5, 7, 9, 12]
    assert out.allowed.tolist() == [
        [True, True, True, True, True, True, False, True],
        [True, True, True, True, False, False, True, False],
    ]


def test_constrained_search_over_a_shortlist_places_a_term_outside_it():
    m = model(6)
    _, src, lengths = ragged_batch(3, 4)
    ids = torch.arange(0, 20)
    cands = Candidates(ids, torch.ones(3, 20, dtype=torch.bool))
    out = constrained_beam_search(
        m, src, lengths, [Forced([[25]]), Forced([[26, 27]]), Forced()], beam_size=3, vocab=cands
    )
    assert 25 in out[0][0].tokens and contains(out[1][0].tokens, [26, 27])
    assert all(t < 20 for t in out[2][0].tokens)


def test_an_ensemble_places_the_terms_too():
    from nmt_cli.model.ensemble import Ensemble

    members = Ensemble([model(7), model(8)]).eval()
    _, src, lengths = ragged_batch(4, 6)
    free, unlikely = unlikely_tokens(members, src, lengths, 2)
    forced = [Forced([[u[0]], [u[1]]]) for u in unlikely]
    out = constrained_beam_search(members, src, lengths, forced, beam_size=4, max_len_const=4)
    for f, hyps, plain in zip(forced, out, free):
        assert f.satisfied_by(hyps[0].tokens) and not f.satisfied_by(plain[0].tokens)


def test_a_term_ends_its_word_when_continuations_are_given():
    m = model(9)
    _, src, lengths = ragged_batch(6, 8)
    free, unlikely = unlikely_tokens(m, src, lengths, 1)
    continuations = torch.zeros(30, dtype=torch.bool)
    continuations[4:20] = True  # these would go on with the word before them
    forced = [Forced([[u[0]]], [], continuations) for u in unlikely]
    out = constrained_beam_search(m, src, lengths, forced, beam_size=4, max_len_const=4)
    for f, hyps in zip(forced, out):
        tokens = hyps[0].tokens
        assert f.satisfied_by(tokens)
        at = tokens.index(f.terms[0][0])
        assert at + 1 == len(tokens) or not continuations[tokens[at + 1]]


def test_sentences_leaving_the_batch_change_no_result():
    m = model(10)
    _, src, lengths = ragged_batch(10, 12)
    _, unlikely = unlikely_tokens(m, src, lengths, 2)
    forced = [
        Forced([[u[0]]] if i % 3 else [], [u[1]] if i % 2 else []) for i, u in enumerate(unlikely)
    ]
    # each done sentence leaves at once; nobody leaves
    leaving = constrained_beam_search(
        m, src, lengths, forced, beam_size=3, max_len_const=6, leave_share=0.01
    )
    staying = constrained_beam_search(
        m, src, lengths, forced, beam_size=3, max_len_const=6, leave_share=2.0
    )
    assert [h[0].tokens for h in leaving] == [h[0].tokens for h in staying]
    assert [h[0].score for h in leaving] == pytest.approx([h[0].score for h in staying], abs=1e-5)


def test_a_term_starts_where_the_attention_points_at_its_source_words(monkeypatch):
    from nmt_cli.decoding import constraints

    m = model(11)
    _, src, lengths = ragged_batch(6, 13, width=14)
    lengths = torch.full((6,), 14)
    src[src == 0] = 5
    _, unlikely = unlikely_tokens(m, src, lengths, 1)
    forced = [Forced([[u[0]]], [], None, [[3 + i]]) for i, u in enumerate(unlikely)]
    cap = int(14 * 1.5) + 4
    threshold = 0.07  # this random model's attention is nearly flat, about 1/14 everywhere

    def starts(gate: float):
        monkeypatch.setattr(constraints, "ATTENDED", gate)
        out = constrained_beam_search(
            m, src, lengths, forced, beam_size=4, max_len_const=4, attention=True
        )
        found = []
        for i, (f, hyps) in enumerate(zip(forced, out)):
            h = hyps[0]
            at = h.tokens.index(f.terms[0][0])
            row = h.attention[at]
            pointed = float(row[3 + i]) >= threshold or int(row.argmax()) == 3 + i
            found.append(pointed or at >= cap - 2 - constraints.ROOM)
        return found

    assert all(starts(threshold))
    assert not all(starts(-1.0))  # without the gate some term starts elsewhere


def test_terms_that_find_no_place_under_the_attention_rule_are_placed_without_it(monkeypatch):
    from nmt_cli.config.sections import DecodeConfig
    from nmt_cli.decoding import constraints
    from nmt_cli.decoding.forced import forced_decode_ids
    from nmt_cli.translation.translator import decode_ids

    m = model(12)
    _, src, lengths = ragged_batch(4, 14)
    sources = [src[i, : lengths[i]].tolist() for i in range(4)]
    _, unlikely = unlikely_tokens(m, src, lengths, 1)
    forced = [Forced([[u[0]]], [], None, [[0]]) for u in unlikely]
    never = lambda weights, attends, anywhere: torch.zeros(  # noqa: E731
        weights.size(0), weights.size(1), attends.size(1), dtype=torch.bool
    )
    monkeypatch.setattr(constraints, "_attending", never)  # the attention never points there
    monkeypatch.setattr(constraints, "ROOM", -100)  # and the room never runs short
    config = DecodeConfig(beam_size=3, max_len_const=4, workers=1)
    first = constrained_beam_search(m, src, lengths, forced, beam_size=3, max_len_const=4)
    assert all(not h for h in first)
    out = forced_decode_ids(
        m, sources, forced, config, "cpu", plain=lambda s: decode_ids(m, s, config)
    )
    assert all(f.satisfied_by(h[0].tokens) for f, h in zip(forced, out))


def test_terms_that_begin_alike_are_all_placed():
    m = model(1)
    _, src, lengths = ragged_batch(3, 3)
    for terms in ([[7, 8, 9], [7, 8, 10]], [[7, 8], [7, 9]], [[7], [7, 8]], [[7, 8], [7]]):
        f = Forced(terms)
        out = constrained_beam_search(m, src, lengths, [f] * 3, beam_size=5, max_len_const=6)
        assert all(h and f.satisfied_by(h[0].tokens) for h in out), terms
