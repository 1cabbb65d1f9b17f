"""Denoising pairs of a multilingual recipe: the noise, the stored pairs and their tokens, and a
model trained with them still routing and flagging its zero-shot directions."""

import random

import pytest

from nmt_cli.config.recipes import recipe_from_dict
from nmt_cli.data.denoising import noised
from nmt_cli.data.directions import groups_of
from nmt_cli.data.preprocess import preprocess
from nmt_cli.data.store import load_meta, load_split, load_text
from nmt_cli.data.tokenizer import Tokenizer, normalize
from nmt_cli.runtime.errors import ConfigError
from tests.conftest import multi30k_lines, tiny_recipe_dict
from tests.data.test_multilingual import TRAINED, multi_recipe, write_three


def test_noise_drops_some_words_and_moves_none_more_than_k_places():
    words = [f"w{i}" for i in range(2000)]
    rng = random.Random(0)
    out = noised(words, rng, drop=0.1, shuffle=3)
    assert 0.05 < 1 - len(out) / len(words) < 0.15
    assert len(set(out)) == len(out) and set(out) <= set(words)
    kept = [w for w in words if w in set(out)]  # the survivors in their first order
    assert out != kept  # shuffled
    assert all(abs(out.index(w) - i) <= 3 for i, w in enumerate(kept))
    assert noised(words, random.Random(0), 0.1, 3) == out  # seeded: the same copy again


def test_noise_keeps_a_word_and_zero_noise_is_the_identity():
    rng = random.Random(1)
    assert all(len(noised(["one", "two"], rng, drop=0.9, shuffle=0)) >= 1 for _ in range(200))
    assert noised(["a", "b", "c"], rng, drop=0.0, shuffle=0) == ["a", "b", "c"]
    assert noised([], rng, 0.1, 3) == []


@pytest.mark.parametrize("tagged", [False, True])
def test_denoising_pairs_rebuild_a_language_under_its_own_token(tmp_path, tagged):
    data = write_three(tmp_path / "corpus", n_train=80, n_valid=5)
    raw = multi_recipe(data, denoise=["fr", "de"], denoise_tag=tagged)
    run_dir = tmp_path / "run"
    meta = preprocess(recipe_from_dict(raw), run_dir, log=lambda m: None)
    assert meta["directions"] == TRAINED  # what the model is asked: the real directions
    groups = groups_of(meta, "train")
    assert [g.direction for g in groups] == [*TRAINED, "fr-fr", "de-de"]
    assert [g.direction for g in groups_of(meta, "valid")] == TRAINED
    tok = Tokenizer.load(run_dir)
    denoise = tok.src.piece_to_id("<denoise>")
    assert (denoise != tok.src.unk_id()) is tagged
    stored = load_split(run_dir, "train")
    for g, lang in zip(groups[-2:], ("fr", "de")):
        expected = [tok.src.piece_to_id(f"<2{lang}>")] + ([denoise] if tagged else [])
        for row in range(g.start, g.end):
            assert stored.src.get(row)[: len(expected)].tolist() == expected
        # the target is the language's own training sentence; the source its noised words
        (first_src,) = tok.decode_tgt([stored.src.get(g.start)[len(expected) :].tolist()])
        (first_tgt,) = tok.decode_tgt([stored.tgt.get(g.start).tolist()])
        assert first_tgt == normalize(multi30k_lines("train", lang, 1)[0])
        assert set(first_src.split()) <= set(first_tgt.split())
    noisy = (run_dir / "data" / "denoise.fr.txt").read_text(encoding="utf-8").split("\n")[:-1]
    clean = multi30k_lines("train", "fr", 80)
    assert len(noisy) == len(clean) and sum(n != c for n, c in zip(noisy, clean)) > 60
    assert load_text(run_dir, "valid", "tgt")[0] == normalize(multi30k_lines("val", "fr", 1)[0])


def test_a_model_trained_with_denoising_pairs_keeps_its_directions_and_zero_shot(tmp_path):
    from nmt_cli.training.loop import train
    from nmt_cli.translation.translator import Translator

    data = write_three(tmp_path / "corpus", n_train=80, n_valid=5)
    raw = multi_recipe(data, denoise=["fr", "de"])
    raw["train"].update(max_steps=4, valid_every=4, checkpoint_every=4)
    recipe = recipe_from_dict(raw)
    run_dir = tmp_path / "run"
    preprocess(recipe, run_dir, log=lambda m: None)
    train(recipe, run_dir, device="cpu", progress_bar=False)
    assert set(load_meta(run_dir)["directions"]) == set(TRAINED)
    tr = Translator.load(run_dir, device="cpu", beam_size=1)
    assert tr.directions == TRAINED
    assert sorted(tr.zero_shot_directions) == ["de-fr", "fr-de"]
    (zero,) = tr.translate(["un chien court ."], target="de", source="fr")
    assert zero.zero_shot is True and zero.target_lang == "de"


@pytest.mark.parametrize(
    "data, message",
    [
        ({"denoise": ["fr"]}, "needs data.directions"),
        ({"directions": ["en-fr", "fr-en"], "denoise": ["de"]}, "de: no direction"),
        ({"directions": ["en-fr", "fr-en"], "denoise": ["fr", "fr"]}, "listed twice"),
        ({"directions": ["en-fr"], "denoise": ["fr"], "denoise_drop": 1.5}, "denoise_drop"),
    ],
)
def test_inconsistent_denoise_keys_are_one_config_error(data, message):
    raw = tiny_recipe_dict({"train": "/x/{lang}", "valid": "/x/{lang}", "test": [], **data})
    with pytest.raises(ConfigError, match=message):
        recipe_from_dict(raw)
