"""Pairs served through a shared language: a tiny de→en model and a tiny en→fr model give de→fr,
listed in /languages, answered on both routes as the two models chained, with `source: "auto"`
choosing between the two source languages."""

import pytest

pytest.importorskip("fastapi")

from conftest import multi30k_lines, tiny_recipe_dict, trained_copy  # noqa: E402
from test_serve import Server, cli_translate  # noqa: E402

from nmt_cli.pivot import Route, languages, routes  # noqa: E402
from nmt_cli.served_models import ServedModel  # noqa: E402

GERMAN = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee."]
ENGLISH = ["A man is riding a bike."]


def model(source: str, target: str, name: str = "") -> ServedModel:
    return ServedModel(name or f"{source}-{target}", None, source, target, "r", "best.pt", 1, None)


def test_a_direct_model_wins_and_a_pair_back_to_its_source_is_not_served():
    en_fr, fr_de, en_de = model("en", "fr"), model("fr", "de"), model("en", "de")
    found = routes([en_fr, fr_de])
    assert found["en", "de"] == Route((en_fr, fr_de)) and found["en", "de"].pivot == "fr"
    assert routes([en_fr, fr_de, en_de])["en", "de"] == Route((en_de,))
    fr_en = model("fr", "en")
    assert ("en", "en") not in routes([en_fr, fr_en])
    assert languages([en_fr, fr_de]) == {"en": ["fr", "de"], "fr": ["de"], "de": []}


@pytest.fixture(scope="module")
def de_en_run(tmp_path_factory):
    """A tiny de→en model on a real Multi30k slice (the reverse side of the shared tiny run)."""
    from nmt_cli.preprocess import preprocess
    from nmt_cli.recipes import recipe_from_dict
    from nmt_cli.training import train

    base = tmp_path_factory.mktemp("de-en")
    for split, n in (("train", 400), ("val", 40), ("test_2016_flickr", 40)):
        for lang in ("de", "en"):
            (base / f"{split}.{lang}").write_text(
                "\n".join(multi30k_lines(split, lang, n)) + "\n", encoding="utf-8"
            )
    data = {
        "train": str(base / "train.{lang}"),
        "valid": str(base / "val.{lang}"),
        "test": [str(base / "test_2016_flickr.{lang}")],
    }
    raw = tiny_recipe_dict(data)
    raw.update(name="tiny-de-en", src="de", tgt="en")
    raw["train"].update(max_steps=40, checkpoint_every=40)
    recipe = recipe_from_dict(raw)
    run = base / "run"
    preprocess(recipe, run, log=lambda m: None)
    train(recipe, run, device="cpu")
    return run


@pytest.fixture(scope="module")
def en_fr_run(tiny_run, tmp_path_factory):
    return trained_copy(
        tiny_run, tmp_path_factory, "pivot-en-fr", max_steps=40, checkpoint_every=40
    )


def test_a_pair_through_a_shared_language_is_served_listed_and_said(de_en_run, en_fr_run):
    # `nmt translate --alignments` of each model, chained: the first one's output is the second
    # one's input, one segment a line (the service's pivot, without the document layer's second
    # pass, which --alignments does not make either)
    first = [line.split("\t")[0] for line in cli_translate(de_en_run, GERMAN, "--alignments")]
    chained = cli_translate(en_fr_run, first, "--alignments", "--no-split-sentences")
    expected = [line.split("\t")[0].strip() for line in chained]
    s = Server(de_en_run, "-m", str(en_fr_run), "--threads", "1")
    try:
        assert s.json("GET", "/languages") == (
            200,
            [
                {"code": "de", "name": "German", "targets": ["en", "fr"]},
                {"code": "en", "name": "English", "targets": ["fr"]},
                {"code": "fr", "name": "French", "targets": []},
            ],
        )
        ask = {"src": GERMAN, "source": "de", "target": "fr"}
        status, body = s.json("POST", "/v1/translate", {**ask, "alignments": True})
        assert status == 200 and body["pivot"] == "en"
        assert body["models"] == ["tiny-de-en", "tiny"]
        assert [t["text"] for t in body["translations"]] == expected
        assert all("alignment" in t for t in body["translations"])
        # LibreTranslate's route answers as the native one (both with the second pass)
        native = [t["text"] for t in s.json("POST", "/v1/translate", ask)[1]["translations"]]
        status, body = s.json("POST", "/translate", {"q": GERMAN, "source": "de", "target": "fr"})
        assert (status, body) == (200, {"translatedText": native})
        # direct pairs say nothing of a pivot
        status, body = s.json("POST", "/v1/translate", {**ask, "target": "en", "alignments": True})
        assert "pivot" not in body and [t["text"] for t in body["translations"]] == first
        # auto: two source languages translate into fr, and the text says which
        status, body = s.json(
            "POST", "/translate", {"q": GERMAN[1], "source": "auto", "target": "fr"}
        )
        assert body["translatedText"] == native[1]
        assert body["detectedLanguage"]["language"] == "de"
        assert body["detectedLanguage"]["confidence"] > 50
        status, body = s.json(
            "POST", "/translate", {"q": ENGLISH[0], "source": "auto", "target": "fr"}
        )
        assert body["translatedText"] == cli_translate(en_fr_run, ENGLISH)[0]
        assert body["detectedLanguage"]["language"] == "en"
        status, found = s.json("POST", "/detect", {"q": GERMAN[0]})
        assert found[0]["language"] == "de" and {f["language"] for f in found} == {"de", "en"}
        settings = s.json("GET", "/frontend/settings")[1]
        assert settings["language"]["source"] == {"code": "auto", "name": "Auto Detect"}
    finally:
        assert s.stop() == 0
