"""One model, several directions: tags, the epoch's mix, per-direction validation, routing and
zero-shot selection, back-translated corpora, and translating a file in shards."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from nmt_cli.config.recipes import recipe_from_dict
from nmt_cli.data.directions import (
    EpochMix,
    Group,
    epoch_counts,
    groups_of,
    temperature_shares,
)
from nmt_cli.data.preprocess import preprocess
from nmt_cli.data.store import load_meta, load_split, load_text
from nmt_cli.data.tokenizer import Tokenizer, normalize
from nmt_cli.runtime.errors import ConfigError, DataError, UserError
from nmt_cli.translation.shards import ShardReader, parse_shard, shard_range
from tests.conftest import ROOT, multi30k_lines, tiny_recipe_dict

TRAINED = ["en-fr", "fr-en", "en-de", "de-en"]  # fr-de and de-fr are left zero-shot


def write_three(directory, n_train=300, n_valid=30):
    """Local en/fr/de files cut from real Multi30k (three-way parallel)."""
    directory.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("val", n_valid), ("test_2016_flickr", n_valid)):
        for lang in ("en", "fr", "de"):
            (directory / f"{split}.{lang}").write_text(
                "\n".join(multi30k_lines(split, lang, n)) + "\n", encoding="utf-8"
            )
    return {
        "train": str(directory / "train.{lang}"),
        "valid": str(directory / "val.{lang}"),
        "test": [str(directory / "test_2016_flickr.{lang}")],
    }


def multi_recipe(data, **data_keys):
    raw = tiny_recipe_dict({**data, "directions": list(TRAINED), **data_keys})
    raw["train"].update(max_steps=12, valid_every=6, checkpoint_every=6, valid_max_sentences=10)
    return raw


@pytest.fixture(scope="module")
def multi_run(tmp_path_factory):
    """A tiny multilingual model: four directions over en, fr, de, fr-en drawn twice as often
    as the others, trained for a few steps."""
    from nmt_cli.training.loop import train

    base = tmp_path_factory.mktemp("multi")
    recipe = recipe_from_dict(multi_recipe(write_three(base / "corpus"), weights={"fr-en": 2.0}))
    run_dir = base / "run"
    preprocess(recipe, run_dir, log=lambda m: None)
    summary = train(recipe, run_dir, device="cpu", progress_bar=False)
    return recipe, run_dir, summary


def test_every_source_starts_with_its_target_token_as_one_piece(multi_run):
    recipe, run_dir, _ = multi_run
    tok = Tokenizer.load(run_dir)
    tags = {lang: tok.src.piece_to_id(f"<2{lang}>") for lang in ("en", "fr", "de")}
    assert len(set(tags.values())) == 3 and 1 not in tags.values()  # pieces, not unk
    meta = load_meta(run_dir)
    assert meta["directions"] == TRAINED
    for split in ("train", "valid", "test"):
        stored = load_split(run_dir, split)
        groups = groups_of(meta, split)
        assert [g.direction for g in groups] == TRAINED
        assert groups[-1].end == len(stored)
        for g in groups:
            tgt = g.direction.split("-")[1]
            firsts = {int(stored.src.get(i)[0]) for i in range(g.start, g.end)}
            assert firsts == {tags[tgt]}
            # the tag is the only one: the second piece is the sentence's own
            assert all(
                int(stored.src.get(i)[1]) not in tags.values() for i in range(g.start, g.end)
            )
    # held-out text stays untagged: it can be translated again with --target
    valid_src = load_text(run_dir, "valid", "src")
    first = groups_of(meta, "valid")[1]  # fr-en: French sources
    assert valid_src[first.start] == normalize(multi30k_lines("val", "fr", 1)[0])


def test_validation_reports_each_direction_and_ranks_by_their_mean(multi_run):
    _, run_dir, summary = multi_run
    records = [
        json.loads(line)
        for line in (run_dir / "metrics.jsonl").read_text().splitlines()
        if json.loads(line).get("kind") == "valid"
    ]
    assert records
    for r in records:
        by = r["valid_bleu_by_direction"]
        assert list(by) == TRAINED
        assert r["valid_bleu"] == pytest.approx(sum(by.values()) / len(by), abs=0.02)
    assert list(summary["best_valid_bleu_by_direction"]) == TRAINED
    log = (run_dir / "train.log").read_text()
    assert "BLEU by direction: en-fr" in log
    assert "each epoch draws en-fr 240, fr-en 480, en-de 240, de-en 240 pairs" in log


def test_translator_knows_its_directions_and_flags_zero_shot(multi_run):
    from nmt_cli.translation.translator import TranslateOptions, Translator

    _, run_dir, _ = multi_run
    tr = Translator.load(run_dir, device="cpu", beam_size=1)
    assert tr.multilingual and tr.directions == TRAINED
    assert sorted(tr.zero_shot_directions) == ["de-fr", "fr-de"]
    assert tr.routing.pivots("fr", "de") == ["en"] and tr.routing.pivots("en", "de") == []
    line = ["a dog runs on the grass ."]
    (trained,) = tr.translate(line, target="de", source="en")
    assert (trained.source_lang, trained.target_lang, trained.zero_shot) == ("en", "de", False)
    (zero,) = tr.translate(["un chien court ."], target="de", source="fr")
    assert zero.zero_shot is True and zero.target_lang == "de"
    # one trained source into fr: the source may be left out
    (implied,) = tr.translate(line, target="fr")
    assert (implied.source_lang, implied.zero_shot) == ("en", False)
    # into en from fr and from de, no source token: the source does not matter, and is unknown
    (unknown,) = tr.translate(["un chien court ."], target="en")
    assert unknown.source_lang is None and unknown.zero_shot is None
    # the token routes: the same source asked for two languages is read differently
    (fr,), (de,) = tr.translate(line, target="fr"), tr.translate(line, target="de")
    assert fr.score != de.score
    assert fr.src_ids == de.src_ids  # the caller's own pieces, the token left out
    with pytest.raises(UserError, match=r"--target es: .* it has de, en, fr"):
        tr.translate(line, target="es")
    with pytest.raises(UserError, match="--target: this model translates into de, en, fr"):
        tr.translate(line)
    into_de = TranslateOptions(target="de")  # what nmt translate --target de asks of each call
    assert tr.translate(line, into_de)[0].target_lang == "de"
    assert tr.translate([""], target="fr")[0].text == ""


def test_one_pair_model_refuses_another_target(tiny_run, tmp_path_factory):
    from nmt_cli.translation.translator import Translator
    from tests.conftest import trained_copy

    run_dir = trained_copy(tiny_run, tmp_path_factory, "pair", max_steps=2)
    tr = Translator.load(run_dir, device="cpu", beam_size=1)
    assert tr.directions == ["en-fr"] and not tr.multilingual and tr.zero_shot_directions == []
    assert tr.translate(["a dog ."], target="fr")[0].zero_shot is None
    with pytest.raises(UserError, match="--target de: this model translates into fr only"):
        tr.translate(["a dog ."], target="de")


def nmt(*args, input=None, env=None):
    return subprocess.run(
        [sys.executable, "-m", "nmt_cli", *map(str, args)],
        input=input,
        env=env,
        capture_output=True,
        cwd=ROOT,
        timeout=300,
    )


def test_cli_target_errors_are_one_line_and_shards_merge_in_input_order(multi_run, tmp_path):
    _, run_dir, _ = multi_run
    bad = nmt("translate", "-m", run_dir, "--target", "es", "--threads", "1", input=b"a dog\n")
    err = bad.stderr.decode().strip().splitlines()
    assert bad.returncode == 2 and len(err) == 1 and "it has de, en, fr" in err[0], err
    lines = [f"a dog number {i} runs ." for i in range(7)]
    src = tmp_path / "src.en"
    src.write_text("\n".join(lines) + "\n")
    common = ["-m", run_dir, "--target", "de", "--beam-size", "1", "--threads", "1", "-i", src]
    whole = nmt("translate", *common)
    assert whole.returncode == 0, whole.stderr.decode()
    parts = []
    for i in range(3):
        part = nmt("translate", *common, "--shard", f"{i}/3")
        assert part.returncode == 0, part.stderr.decode()
        parts.append(part.stdout.decode())
    assert "".join(parts) == whole.stdout.decode()
    # under torchrun every rank has one command line: {shard} names each one's file
    for rank in range(3):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": "3"}
        named = nmt(
            "translate", *common, "--shard", "rank", "-o", tmp_path / "out.{shard}", env=env
        )
        assert named.returncode == 0, named.stderr.decode()
        assert (tmp_path / f"out.{rank}").read_text() == parts[rank]
    same = nmt("translate", *common, "--shard", "rank", "-o", tmp_path / "out", env=env)
    err = same.stderr.decode().strip().splitlines()
    assert same.returncode == 2 and len(err) == 1 and "{shard}" in err[0], err
    assert len(whole.stdout.decode().splitlines()) == 7
    zero = nmt("translate", *common[:-2], "--source", "fr", input=b"un chien\n")
    note = zero.stderr.decode()
    assert zero.returncode == 0 and "fr-de is zero-shot" in note and "fr-en and en-de" in note
    scored = nmt(
        "eval", "-m", run_dir, "--src", src, "--ref", src, "--target", "fr", "--metrics", "bleu"
    )
    assert scored.returncode == 0 and "BLEU" in scored.stdout.decode(), scored.stderr.decode()


def test_shard_ranges_cover_the_file_once():
    for lines in (0, 1, 7, 100):
        spans = [shard_range(lines, i, 3) for i in range(3)]
        assert spans[0][0] == 0 and spans[-1][1] == lines
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    import io

    reader = ShardReader(io.BytesIO(b"a\nb\nc\nd\n"), 1, 3)
    assert [reader.readline() for _ in range(3)] == [b"b\n", b"c\n", b""]
    assert parse_shard("2/4") == (2, 4)
    for bad in ("4/4", "x", "1/0"):
        with pytest.raises(UserError):
            parse_shard(bad)


def test_direction_whose_data_is_missing_fails_preprocessing_naming_it(tmp_path):
    data = write_three(tmp_path / "corpus", n_train=50, n_valid=5)
    raw = multi_recipe(data)
    raw["data"]["directions"] = ["en-fr", "en-es"]
    run_dir = tmp_path / "run"
    with pytest.raises(DataError, match=r"data.directions: en-es: .*train\.es.*not found"):
        preprocess(recipe_from_dict(raw), run_dir, log=lambda m: None)
    assert not run_dir.exists()
    raw["data"] = {"corpus": "multi30k", "directions": ["en-fr", "en-cs"]}
    with pytest.raises(DataError, match="data.directions: en-cs: multi30k: no file"):
        preprocess(recipe_from_dict(raw), tmp_path / "run2", log=lambda m: None)


@pytest.mark.parametrize(
    "data, message",
    [
        ({"directions": ["en-fr", "en-fr"]}, "en-fr listed twice"),
        ({"directions": ["en-en"]}, "two different languages"),
        ({"directions": ["enfr"]}, "not a direction"),
        ({"directions": ["en-fr"], "pairs": {"de-en": "/x/{split}.{lang}"}}, "data.pairs.de-en"),
        ({"back_translated": {"en-fr": "/x/bt.txt"}}, "must contain {lang}"),
        ({"back_translated": {"fr-en": "/x/bt.{lang}"}}, "not one of the recipe's directions"),
    ],
)
def test_inconsistent_multilingual_keys_are_one_config_error(data, message):
    raw = tiny_recipe_dict({"train": "/x/{lang}", "valid": "/x/{lang}", "test": [], **data})
    with pytest.raises(ConfigError, match=message):
        recipe_from_dict(raw)


def test_a_multilingual_recipe_needs_one_joint_vocabulary():
    data = {"train": "/x/{lang}", "valid": "/x/{lang}", "test": [], "directions": ["en-fr"]}
    raw = tiny_recipe_dict(data, tokenizer={"joint": False}, model={"share_embeddings": False})
    with pytest.raises(ConfigError, match="tokenizer.joint"):
        recipe_from_dict(raw)


def test_per_direction_files_come_from_data_pairs(tmp_path):
    data = write_three(tmp_path / "corpus", n_train=60, n_valid=5)
    own = tmp_path / "own"
    own.mkdir()
    for split in ("train", "val", "test_2016_flickr"):
        for lang in ("en", "de"):  # a corpus of its own: the first lines reversed
            lines = multi30k_lines(split, lang, 60 if split == "train" else 5)[::-1]
            (own / f"{split}.{lang}").write_text("\n".join(lines) + "\n")
    raw = multi_recipe(data, pairs={"en-de": str(own / "{split}.{lang}")})
    raw["data"].update(train="train", valid="val", test=["test_2016_flickr"])
    raw["data"]["directions"] = ["en-fr", "en-de"]
    raw["data"]["pairs"]["en-fr"] = str(tmp_path / "corpus" / "{split}.{lang}")
    meta = preprocess(recipe_from_dict(raw), tmp_path / "run", log=lambda m: None)
    assert [c["corpus"].split()[0] for c in meta["corpora"]] == ["en-fr", "en-de"]
    text = load_text(tmp_path / "run", "valid", "tgt")
    assert text[5] == normalize(multi30k_lines("val", "de", 5)[-1])


def test_temperature_evens_out_directions_and_the_mix_is_reproducible():
    assert temperature_shares([900, 100], 1.0) == pytest.approx([0.9, 0.1])
    hot = temperature_shares([900, 100], 5.0)
    assert 0.5 < hot[0] < 0.9 and sum(hot) == pytest.approx(1.0)
    assert temperature_shares([900, 100], 1e6) == pytest.approx([0.5, 0.5], abs=1e-3)
    groups = [Group("en-fr", 0, 900), Group("en-de", 900, 1000)]
    counts = epoch_counts(groups, 5.0, 0.0)
    assert sum(counts) == 1000 and counts[1] > 100
    mix = EpochMix(groups, counts)
    rows = mix.rows(seed=1, epoch=0)
    assert len(rows) == 1000
    assert np.count_nonzero(rows >= 900) == counts[1]
    assert np.array_equal(rows, mix.rows(seed=1, epoch=0))
    assert not np.array_equal(np.sort(rows), np.sort(mix.rows(seed=1, epoch=1)))


def test_weights_tilt_the_shares_and_name_only_the_recipes_directions():
    assert temperature_shares([500, 500], 1.0, [3.0, 1.0]) == pytest.approx([0.75, 0.25])
    groups = [Group("en-fr", 0, 600), Group("fr-en", 600, 1200), Group("en-de", 1200, 1800)]
    counts = epoch_counts(groups, 1.0, 0.0, {"fr-en": 2.0})
    assert counts == [450, 900, 450]
    summary = EpochMix(groups, counts).summary()
    assert summary == "each epoch draws en-fr 450, fr-en 900, en-de 450 pairs"
    raw = tiny_recipe_dict({})
    raw["data"]["directions"] = ["en-fr", "fr-en"]
    raw["data"]["weights"] = {"fr-en": 1.5}
    assert recipe_from_dict(raw).data.weights == {"fr-en": 1.5}
    raw["data"]["weights"] = {"de-en": 1.5}
    with pytest.raises(ConfigError, match=r"data.weights.de-en: not one of .*en-fr, fr-en"):
        recipe_from_dict(raw)
    raw["data"]["weights"] = {"fr-en": 0}
    with pytest.raises(ConfigError, match="data.weights.fr-en: 0; give a number above 0"):
        recipe_from_dict(raw)


def test_back_translated_pairs_carry_their_token_and_mix_at_the_ratio(tmp_path):
    data = write_three(tmp_path / "corpus", n_train=80, n_valid=5)
    synthetic = tmp_path / "bt"
    synthetic.mkdir()
    for lang in ("en", "fr"):
        lines = multi30k_lines("train", lang)[1000:1040]
        (synthetic / f"bt.{lang}").write_text("\n".join(lines) + "\n")
    raw = tiny_recipe_dict(
        {**data, "back_translated": {"en-fr": str(synthetic / "bt.{lang}")}},
    )
    raw["data"]["back_translated_ratio"] = 2.0
    recipe = recipe_from_dict(raw)
    run_dir = tmp_path / "run"
    meta = preprocess(recipe, run_dir, log=lambda m: None)
    tok = Tokenizer.load(run_dir)
    bt = tok.src.piece_to_id("<bt>")
    assert bt != 1
    groups = groups_of(meta, "train")
    assert [(g.direction, g.back_translated) for g in groups] == [
        ("en-fr", False),
        ("en-fr", True),
    ]
    stored = load_split(run_dir, "train")
    assert all(int(stored.src.get(i)[0]) == bt for i in range(groups[1].start, groups[1].end))
    assert all(bt not in stored.src.get(i).tolist() for i in range(groups[0].start, groups[0].end))
    assert "groups" not in meta or "valid" not in meta["groups"]  # held-out: a plain pair's
    mix = EpochMix.of(recipe, groups)
    assert mix.counts == [groups[0].size, 2 * groups[0].size]


def test_serve_lists_every_direction_and_pivots_untrained_ones_unless_named(multi_run):
    from tests.serving.test_serve import Server

    recipe, run_dir, _ = multi_run
    name = recipe.name
    s = Server(run_dir, "--threads", "1")
    try:
        status, languages = s.json("GET", "/languages")
        assert status == 200
        targets = {entry["code"]: sorted(entry["targets"]) for entry in languages}
        assert targets == {"de": ["en", "fr"], "en": ["de", "fr"], "fr": ["de", "en"]}
        status, answer = s.json(
            "POST", "/translate", {"q": "a dog runs .", "source": "en", "target": "de"}
        )
        assert status == 200 and isinstance(answer["translatedText"], str)
        trained = {"src": ["a dog runs ."], "source": "en", "target": "de"}
        status, native = s.json("POST", "/v1/translate", trained)
        assert status == 200 and "zero_shot" not in native
        assert native["translations"][0]["text"] == answer["translatedText"]
        # fr-de was not trained: by its languages it goes through English, with the same model
        untrained = {"src": ["un chien court ."], "source": "fr", "target": "de"}
        status, native = s.json("POST", "/v1/translate", untrained)
        assert status == 200 and native["pivot"] == "en" and "zero_shot" not in native
        assert native["models"] == [f"{name}-fr-en", f"{name}-en-de"]
        status, english = s.json("POST", "/v1/translate", {**untrained, "target": "en"})
        assert status == 200
        # the English goes to en-de as one line, as the model's own translate() takes it (a
        # request of its own would be split past decode.max_segment_tokens)
        from nmt_cli.translation.translator import Translator

        tr = Translator.load(run_dir, device="cpu", threads=1)
        (german,) = tr.translate([english["translations"][0]["text"]], target="de", source="en")
        assert native["translations"][0]["text"] == german.text
        # named by its model, the zero-shot direction answers itself, and says so
        status, native = s.json("POST", "/v1/translate", {**untrained, "model": f"{name}-fr-de"})
        assert status == 200 and native["zero_shot"] is True and "pivot" not in native
        status, models = s.json("GET", "/v1/models")
        shown = {(m["source"], m["target"]): m["zero_shot"] for m in models["models"]}
        assert shown[("fr", "de")] is True and shown[("en", "de")] is False
    finally:
        assert s.stop() == 0


def stored_target_pieces(run_dir) -> dict[str, set[int]]:
    """Each target language's pieces as the stored training split holds them."""
    meta = load_meta(run_dir)
    stored = load_split(run_dir, "train")
    pieces: dict[str, set[int]] = {}
    for g in groups_of(meta, "train"):
        into = pieces.setdefault(g.direction.split("-")[1], set())
        for i in range(g.start, g.end):
            into.update(int(t) for t in stored.tgt.get(i))
    return pieces


def test_each_target_language_has_the_pieces_of_its_training_targets(multi_run):
    import torch

    from nmt_cli.decoding.shortlist import SPECIALS
    from nmt_cli.training.checkpoint import load_model, resolve

    _, run_dir, _ = multi_run
    payload = torch.load(resolve(run_dir), map_location="cpu", weights_only=False)
    assert set(payload["languages"]) == {"en", "fr", "de"}
    languages = load_model(run_dir).languages
    expected = stored_target_pieces(run_dir)
    for lang, ids in languages.pieces.items():
        assert ids.tolist() == sorted(expected[lang] | set(SPECIALS))
    assert languages.pieces["fr"].tolist() != languages.pieces["de"].tolist()
    # a checkpoint saved before the vocabularies existed: counted from the run's stored data
    del payload["languages"]
    old = run_dir / "checkpoints" / "old.pt"
    torch.save(payload, old)
    again = load_model(old).languages
    assert {k: v.tolist() for k, v in again.pieces.items()} == {
        k: v.tolist() for k, v in languages.pieces.items()
    }


@pytest.mark.parametrize("decode", [{"beam_size": 1}, {"beam_size": 3, "shortlist": True}])
def test_translations_use_only_their_target_languages_pieces(multi_run, decode):
    from nmt_cli.decoding.sampling import Sampling
    from nmt_cli.translation.translator import Translator

    _, run_dir, _ = multi_run
    tr = Translator.load(run_dir, device="cpu", **decode)
    lines = multi30k_lines("val", "fr", 12)
    for source, target in (("fr", "en"), ("fr", "de"), ("en", "fr")):  # fr-de is zero-shot
        allowed = set(tr.languages.pieces[target].tolist())
        src_lines = lines if source == "fr" else multi30k_lines("val", "en", 12)
        runs = [
            tr.translate(src_lines, target=target, source=source),
            tr.translate(src_lines, target=target, source=source, sampling=Sampling(seed=3)),
        ]
        for translations in runs:
            for t in translations:
                assert set(t.hypotheses[0].tokens) <= allowed
    # switched off, the same decoder may write any piece; one-pair models are unaffected
    free = Translator.load(run_dir, device="cpu", language_vocabulary=False, **decode)
    assert free.language_pieces(free.routing.route("de", "fr"), free.config) is None


def test_restricting_a_shortlist_keeps_each_rows_set_and_the_specials_first():
    import torch

    from nmt_cli.decoding.language_vocabulary import restricted, restricted_ids
    from nmt_cli.decoding.shortlist import Candidates

    shortlist = Candidates(
        torch.tensor([0, 1, 2, 3, 7, 9, 12]),
        torch.tensor(
            [[1, 1, 1, 1, 1, 0, 1], [1, 1, 1, 1, 0, 1, 1]],
            dtype=torch.bool,
        ),
    )
    language = torch.tensor([0, 1, 2, 3, 9, 12, 40])
    cut = restricted(shortlist, language, 2)
    assert cut.ids.tolist() == [0, 1, 2, 3, 9, 12]
    assert cut.allowed.tolist() == [[True] * 4 + [False, True], [True] * 6]
    whole = restricted(None, language, 2)
    assert whole.ids.tolist() == language.tolist() and bool(whole.allowed.all())
    assert restricted_ids(torch.tensor([0, 1, 2, 3, 7, 40]), language).tolist() == [0, 1, 2, 3, 40]
    assert restricted_ids(None, None) is None
