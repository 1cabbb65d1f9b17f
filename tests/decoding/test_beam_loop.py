"""The one beam loop under its three strategies: the repetition guard, the finished set and the
length cap apply to plain, constrained and sampled decoding alike."""

from collections import Counter

import pytest
import torch

from nmt_cli.config.sections import DecodeConfig
from nmt_cli.decoding.constraints import Forced, constrained_beam_search
from nmt_cli.decoding.decode import decode_ids
from nmt_cli.decoding.sampling import Sampling, sample
from nmt_cli.decoding.search import beam_search, greedy
from nmt_cli.decoding.settings import SearchSettings
from nmt_cli.decoding.shortlist import Shortlist
from nmt_cli.decoding.steps import REPEAT_GUARD_FROM, REPEAT_NGRAM
from tests.decoding.test_search import V, model, ragged_batch

LOOPING = 7  # the token the looping model prefers at every step


def looping_model(seed=0):
    """A tiny model that writes LOOPING over and over, as a model caught in a loop does."""
    m = model(seed)
    with torch.no_grad():
        m.output.bias[LOOPING] += 6.0
    return m


def long_sources(n=4, seed=0):
    """n sources of more subwords than the repetition guard's threshold."""
    g = torch.Generator().manual_seed(seed)
    width = REPEAT_GUARD_FROM + 4
    return torch.randint(4, V, (n, width), generator=g), torch.full((n,), width)


def most_repeated(tokens: list[int]) -> int:
    """How often the most frequent n-gram (n = REPEAT_NGRAM) of ``tokens`` occurs."""
    grams = Counter(tuple(tokens[i : i + REPEAT_NGRAM]) for i in range(len(tokens) - 3))
    return max(grams.values(), default=0)


def test_the_guard_applies_under_a_prefix_and_a_glossary():
    m = looping_model()
    src, lengths = long_sources()
    forced = [Forced([], [9, 10]), Forced([[11]]), Forced([[12, 13]], [14]), Forced()]
    settings = SearchSettings(beam_size=3, max_len_const=4)
    free = constrained_beam_search(m, src, lengths, forced, settings)
    assert all(most_repeated(h[0].tokens) > 2 for h in free)  # the model loops
    guarded = constrained_beam_search(m, src, lengths, forced, settings, max_repeats=2)
    for f, hyps in zip(forced, guarded):
        assert f.satisfied_by(hyps[0].tokens)
        assert most_repeated(hyps[0].tokens) <= 2, hyps[0].tokens


def test_the_guard_applies_to_sampling():
    m = looping_model(1)
    src, lengths = long_sources(seed=1)
    how = Sampling(seed=5, temperature=0.3)
    free = sample(m, src, lengths, how, how.generator(0))
    assert all(most_repeated(h[0].tokens) > 2 for h in free)
    guarded = sample(m, src, lengths, how, how.generator(0), SearchSettings(max_repeats=2))
    assert all(most_repeated(h[0].tokens) <= 2 for h in guarded)


def test_decode_ids_guards_glossary_prefix_and_sampled_lines_with_decode_max_repeats():
    m = looping_model(2)
    src, lengths = long_sources(seed=2)
    sources = [row.tolist() for row in src]
    config = DecodeConfig(beam_size=3, max_len_const=4, workers=1, max_repeats=2)
    forced = [Forced([], [9]), Forced([[11]]), Forced([], [12]), Forced([[13, 14]])]
    for hyps in (
        decode_ids(m, sources, config, forced=forced),
        decode_ids(m, sources, config, sampling=Sampling(seed=1, temperature=0.3)),
    ):
        assert all(most_repeated(h[0].tokens) <= 2 for h in hyps)


@pytest.mark.parametrize("max_repeats", [0, 2])
def test_a_beam_of_one_is_greedy_search_token_for_token(max_repeats):
    m = looping_model(3)
    _, src, lengths = ragged_batch(12, seed=4, width=REPEAT_GUARD_FROM + 6)
    g = torch.Generator().manual_seed(4)
    shortlist = Shortlist(torch.arange(4, 12), torch.randint(4, V, (V, 8), generator=g))
    for vocab in (None, shortlist.candidates(src, lengths)):
        settings = SearchSettings(beam_size=1, alpha=0.0, max_repeats=max_repeats)
        plain = greedy(m, src, lengths, settings, vocab=vocab)
        beam = beam_search(m, src, lengths, settings, vocab=vocab)
        assert [h[0].tokens for h in beam] == [h[0].tokens for h in plain]
        # equal up to rounding: the two shrink their batches at different steps
        assert [h[0].score for h in beam] == pytest.approx([h[0].score for h in plain], abs=1e-4)


def test_sampling_from_the_top_token_alone_is_greedy_search():
    m = looping_model(4)
    _, src, lengths = ragged_batch(10, seed=5, width=REPEAT_GUARD_FROM + 6)
    settings = SearchSettings(max_repeats=2)
    how = Sampling(seed=0, topk=1)
    drawn = sample(m, src, lengths, how, how.generator(0), settings)
    plain = greedy(m, src, lengths, settings)
    assert [h[0].tokens for h in drawn] == [h[0].tokens for h in plain]
    assert [h[0].score for h in drawn] == [h[0].score for h in plain]


def test_the_same_seed_gives_the_same_samples_whatever_the_workers():
    m = model(5)
    _, src, lengths = ragged_batch(20, seed=6)
    sources = [src[i, : lengths[i]].tolist() for i in range(20)]
    how = Sampling(seed=3)
    one = decode_ids(m, sources, DecodeConfig(workers=1, batch_size=6), sampling=how)
    two = decode_ids(m, sources, DecodeConfig(workers=2, batch_size=6), sampling=how)
    assert [h[0].tokens for h in one] == [h[0].tokens for h in two]
    other = decode_ids(m, sources, DecodeConfig(workers=1, batch_size=6), sampling=Sampling(4))
    assert [h[0].tokens for h in one] != [h[0].tokens for h in other]


def test_every_strategy_respects_the_length_cap_and_min_len():
    m = looping_model(6)
    src, lengths = long_sources(seed=6)
    settings = SearchSettings(beam_size=3, max_len_ratio=0.1, max_len_const=2, min_len=3)
    how = Sampling(seed=1)
    cap = int(lengths[0] * 0.1) + 2
    for hyps in (
        beam_search(m, src, lengths, settings),
        constrained_beam_search(m, src, lengths, [Forced([[11]])] * 4, settings),
        sample(m, src, lengths, how, how.generator(0), settings),
    ):
        assert all(3 <= len(h[0].tokens) <= cap for h in hyps)


def test_settings_come_from_the_recipe_and_unknown_keywords_are_refused():
    config = DecodeConfig(beam_size=4, length_penalty=1.0, max_repeats=2, min_len=2)
    settings = SearchSettings.of(config, nbest=3, attention=True)
    assert (settings.beam_size, settings.alpha, settings.max_repeats) == (4, 1.0, 2)
    assert (settings.nbest, settings.attention, settings.min_len) == (3, True, 2)
    src, lengths = long_sources(1)
    with pytest.raises(TypeError, match="beam_width"):
        beam_search(model(), src, lengths, beam_width=3)
