"""Capitals and numbers through a tiny trained model: the translator's restore_case, and the
options as `nmt translate` and translate_texts take them."""

import subprocess
import sys

import pytest

from nmt_cli.data.casing import title_cased
from nmt_cli.documents.layer import translate_texts
from nmt_cli.translation.translator import Translator
from tests.conftest import multi30k_lines, trained_copy
from tests.translation.test_translate import cli_env


@pytest.fixture(scope="module")
def trained(tiny_run, tmp_path_factory):
    copy = trained_copy(tiny_run, tmp_path_factory, "capitals", max_steps=20, checkpoint_every=20)
    return Translator.load(copy, device="cpu", beam_size=2), copy  # as `nmt translate` loads it


def test_capitals_and_title_case_are_translated_as_the_sentence_and_recased(trained):
    translator, _ = trained
    lines = [  # sentences whose only capital is the first letter: recasing gives them back
        x
        for x in multi30k_lines("test_2016_flickr", "en", 40)
        if len(x.split()) >= 3 and sum(c.isupper() for c in x) == 1 and x[0].isupper()
    ][:6]
    assert len(lines) == 6
    plain = translator.translate(lines)
    upper = translator.translate([x.upper() for x in lines])
    title = translator.translate([title_cased(x) for x in lines])
    for p, u, t in zip(plain, upper, title):
        assert u.text == p.text.upper() and u.src_ids == p.src_ids
        assert t.text == title_cased(p.text) and t.src_ids == p.src_ids
        assert u.source == u.source.upper()  # the line as given
    raw = translator.translate([x.upper() for x in lines], restore_case=False)
    encoded = translator.tokenizer.encode_src([x.upper() for x in lines])
    assert [r.src_ids for r in raw] == encoded != [p.src_ids for p in plain]


def test_numbers_and_case_options_reach_translate_texts_and_the_cli(trained):
    translator, run = trained
    line = "TWO DOGS PLAY WITH 1,234 BALLS AT 10:30 IN THE SNOW."
    (kept,) = translate_texts(translator, [line])
    assert "1,234" in kept.text and "10:30" in kept.text and kept.text == kept.text.upper()
    (target,) = translate_texts(translator, [line], numbers="target", restore_case=False)
    assert "1\u00a0234" in target.text and "10:30" in target.text
    cli = [sys.executable, "-m", "nmt_cli", "translate", "-m", str(run), "--beam-size", "2"]
    for args, want in (([], kept.text), (["--numbers", "target", "--no-restore-case"], None)):
        out = subprocess.run(
            cli + args, input=line + "\n", capture_output=True, text=True, env=cli_env(), check=True
        ).stdout
        assert out.rstrip("\n") == (want or target.text)
    bad = subprocess.run(
        cli + ["--numbers", "roman"], input=line, capture_output=True, text=True, env=cli_env()
    )
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert "--numbers: 'roman' is not one of keep, target, model" in bad.stderr
