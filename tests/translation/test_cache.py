"""The sentence-translation cache: bounded, least recently used out first, keyed by every option
that changes a result."""

from __future__ import annotations

import torch

from nmt_cli.decoding.sampling import Sampling
from nmt_cli.decoding.search import Hypothesis
from nmt_cli.translation.cache import TranslationCache, options_key
from nmt_cli.translation.contract import TranslateOptions
from nmt_cli.translation.glossary import Glossary, Term
from nmt_cli.translation.results import Translation


def translation(text: str) -> Translation:
    hyp = Hypothesis([1, 2], -1.0, -0.5, attention=torch.ones(3, 2))
    return Translation(text, text.upper(), [hyp], [4, 5])


def test_least_recently_used_goes_first_and_the_size_is_never_passed():
    cache = TranslationCache(2)
    cache.put("a", translation("a"))
    cache.put("b", translation("b"))
    assert cache.get("a").text == "A"  # a is now the most recent
    cache.put("c", translation("c"))
    assert len(cache) == 2
    assert cache.get("b") is None and cache.get("c").text == "C" and cache.get("a").text == "A"
    assert (cache.hits, cache.misses) == (3, 1)
    for i in range(100):
        cache.put(i, translation(str(i)))
    assert len(cache) == 2


def test_size_zero_keeps_nothing_and_entries_drop_their_attention_weights():
    off = TranslationCache(0)
    off.put("a", translation("a"))
    assert len(off) == 0 and off.get("a") is None
    cache = TranslationCache(4)
    original = translation("a")
    cache.put("a", original)
    assert cache.get("a").hypotheses[0].attention is None
    assert original.hypotheses[0].attention is not None  # the caller's own is untouched
    assert cache.get("a").hypotheses[0].tokens == [1, 2]


def test_every_option_that_changes_a_result_changes_the_key():
    base = TranslateOptions()
    glossary = Glossary([Term("dog", "chien", "request")])
    changed = [
        TranslateOptions(beam_size=3),
        TranslateOptions(nbest=2),
        TranslateOptions(alignments=True),
        TranslateOptions(target="de"),
        TranslateOptions(source="en"),
        TranslateOptions(decode={"length_penalty": 0.6}),
        TranslateOptions(glossary=glossary),
    ]
    keys = {options_key(o) for o in [base, *changed]}
    assert len(keys) == len(changed) + 1
    # equal options give equal keys, whatever object holds them
    same = Glossary([Term("dog", "chien", "another request")])
    assert options_key(TranslateOptions(glossary=same)) == options_key(changed[-1])
    assert options_key(TranslateOptions(decode={"length_penalty": 0.6})) == options_key(changed[5])
    assert options_key(TranslateOptions(warn_cut=False)) == options_key(base)


def test_sampling_prefixes_and_attention_are_not_cached():
    assert options_key(TranslateOptions(sampling=Sampling(seed=1))) is None
    assert options_key(TranslateOptions(prefixes=("Le",))) is None
    assert options_key(TranslateOptions(attention=True)) is None
    assert options_key(TranslateOptions(weights=True)) is None
