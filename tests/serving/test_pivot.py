"""Pairs served through a shared language: a tiny de→en model and a tiny en→fr model give de→fr,
listed in /languages, answered on both routes as the two models chained, with `source: "auto"`
choosing between the two source languages."""

import math

import pytest

pytest.importorskip("fastapi")

from conftest import multi30k_lines, tiny_recipe_dict, trained_copy  # noqa: E402
from test_serve import Server, cli_translate  # noqa: E402

from nmt_cli.decoding.search import Hypothesis  # noqa: E402
from nmt_cli.documents.layer import segment_counter
from nmt_cli.documents.plan import plan_documents  # noqa: E402
from nmt_cli.serving.models import ServedModel  # noqa: E402
from nmt_cli.serving.pivot import Route, chained, languages, rejoined, routes  # noqa: E402
from nmt_cli.translation.results import Alternative, Translation  # noqa: E402
from nmt_cli.translation.translator import Translator  # noqa: E402

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


def piece(source: str, text: str, score: float, confidence: float, second: str) -> Translation:
    """A segment's Translation: target word k aligned to source word k (the last where the source
    is shorter), and a worse second alternative."""
    words, last = len(text.split()), len(source.split()) - 1
    return Translation(
        source,
        text,
        [Hypothesis(list(range(words)), score, score / 2)],
        [1] * len(source.split()),
        alternatives=[Alternative(text, score, score / 2), Alternative(second, score - 1, 0.0)],
        alignment=[(min(k, last), k) for k in range(words)],
        confidence=confidence,
    )


def test_a_pivot_text_cut_in_parts_is_one_translation_again():
    texts = ["a man on a bench, reading a paper", "", "a dog runs"]
    # past five words a sentence is cut at a clause, as decode.max_segment_tokens cuts it
    plan = plan_documents(texts, language="en", max_tokens=5, count_tokens=lambda t: len(t.split()))
    assert plan.segments == ["a man on a bench,", "reading a paper", "a dog runs"]
    pieces = [
        piece("a man on a bench,", "un homme sur un banc ,", -2.0, 0.8, "un homme"),
        piece("reading a paper", "lisant un journal", -1.0, 0.6, "lisant"),
        piece("a dog runs", "un chien court", -0.5, 0.9, "un chien"),
    ]
    whole, blank, one = rejoined(plan, pieces, texts)
    assert blank is None and one == pieces[2]
    assert whole.source == texts[0] and whole.text == "un homme sur un banc , lisant un journal"
    assert [a.text for a in whole.alternatives] == [whole.text, "un homme lisant"]
    assert [a.score for a in whole.alternatives] == [-3.0, -5.0]
    assert whole.score == -3.0 and whole.hypotheses[0].tokens == [0, 1, 2, 3, 4, 5, 0, 1, 2]
    # the second part's words come after the first's, on both sides (5 source words, 6 target)
    first = [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (4, 5)]
    assert whole.alignment == first + [(5, 6), (6, 7), (7, 8)]
    # one confidence: the joined hypothesis's, exp(Σ log p / Σ (tokens + 1)) = exp(-3 / 11)
    assert whole.confidence == pytest.approx(math.exp(-3 / 11))
    assert len(whole.src_ids) == 8 and not whole.truncated


def test_a_pivot_translation_is_as_sure_as_both_legs_together():
    first = piece("ein Hund", "a dog", -0.5, 0.9, "dog")
    second = piece("a dog", "un chien", -0.4, 0.5, "chien")
    through = chained(first, second)
    assert through.text == "un chien" and through.confidence == pytest.approx(0.45)
    assert through.alignment == [(0, 0), (1, 1)]
    # an empty pivot line has no confidence: the second leg's stands
    first.confidence = None
    assert chained(first, second).confidence == 0.5


@pytest.fixture(scope="module")
def de_en_run(tmp_path_factory):
    """A tiny de→en model on a real Multi30k slice (the reverse side of the shared tiny run)."""
    from nmt_cli.config.recipes import recipe_from_dict
    from nmt_cli.data.preprocess import preprocess
    from nmt_cli.training.loop import train

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
    # cuts every sentence of more than four subwords: the pivot's English is cut again
    return trained_copy(
        tiny_run,
        tmp_path_factory,
        "pivot-en-fr",
        decode={"max_segment_tokens": 4},
        max_steps=40,
        checkpoint_every=40,
    )


def test_a_pair_through_a_shared_language_is_served_listed_and_said(de_en_run, en_fr_run):
    # the first model's `nmt translate --alignments` is the pivot's English; the second model
    # gets it cut as `nmt translate` cuts its input, past four subwords here, each part
    # translated and put back in place (the service's pivot, without the document layer's
    # second pass, which an answer with alignments does not make)
    first = [line.split("\t")[0] for line in cli_translate(de_en_run, GERMAN, "--alignments")]
    second = Translator.load(en_fr_run, device="cpu", threads=1)
    cut = plan_documents(first, language="en", max_tokens=4, count_tokens=segment_counter(second))
    assert len(cut.segments) > len(first)
    expected = cut.assemble(second.translate(cut.segments))
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
