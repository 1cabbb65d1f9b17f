import gzip
import json

import pytest
from sacrebleu.metrics import BLEU

from nmt_cli.evaluation import scores as scoring
from nmt_cli.runtime.errors import UserError
from tests.cli.test_cli import nmt
from tests.conftest import MIRROR, multi30k_lines


def test_scores_match_sacrebleu_and_carry_signatures():
    import sacrebleu

    hyps = ["Un homme fait du vélo .", "Deux chiens jouent dans la neige."]
    refs = ["Un homme fait du vélo.", "Deux chiens courent dans la neige."]
    out = {s.metric: s for s in scoring.score(hyps, refs)}
    assert out["bleu"].score == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)
    assert out["chrf"].score == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score)
    assert out["ter"].score == pytest.approx(sacrebleu.corpus_ter(hyps, [refs]).score)
    assert out["bleu"].signature.startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    assert "chrF2" in out["chrf"].text


def test_identical_text_scores_100():
    lines = ["A man rides a bike.", "Two dogs play."]
    assert scoring.score(lines, lines, ["bleu"])[0].score == pytest.approx(100.0)


def test_lc_tok_matches_the_official_tokenized_references():
    hyp = ["L'homme porte un chapeau, et il sourit."]
    ref = ["l&apos; homme porte un chapeau , et il sourit ."]
    assert scoring.moses_lc_tok(hyp, "fr") == ref
    assert scoring.score(hyp, ref, ["bleu"], lc_tok="fr")[0].score == pytest.approx(100.0)
    assert "tok:none" in scoring.score(hyp, ref, ["bleu"], lc_tok="fr")[0].signature


@pytest.mark.parametrize("lang", ["fr", "de"])
def test_lc_tok_reproduces_the_official_references_of_a_whole_test_set(lang):
    # The literature's numbers are only comparable if our pipeline makes the same tokens that
    # made the official references: run it on the raw references and expect them back.
    raw = multi30k_lines("test_2017_flickr", lang)
    with gzip.open(
        MIRROR / "multi30k" / "tok" / f"test_2017_flickr.lc.norm.tok.{lang}.gz",
        "rt",
        encoding="utf-8",
    ) as fh:
        official = fh.read().split("\n")[:-1]
    assert len(raw) == len(official) == 1000
    assert scoring.moses_lc_tok(raw, lang) == official


def test_bleu_by_length_buckets():
    src = ["a b c", " ".join(["w"] * 15), " ".join(["w"] * 25), " ".join(["w"] * 40)]
    hyp = ["x y z", "the cat sat on the mat", "no", "a long sentence here"]
    rows = scoring.bleu_by_length(src, hyp, hyp)
    assert [r["bucket"] for r in rows] == ["0-10", "10-20", "20-30", "30+"]
    assert [r["sentences"] for r in rows] == [1, 1, 1, 1]


def test_bad_input():
    with pytest.raises(UserError, match="differ in length: 1 vs 2"):
        scoring.score(["a"], ["a", "b"])
    with pytest.raises(UserError, match="the references are empty"):
        scoring.score([], [])
    with pytest.raises(
        UserError, match="--lc-tok xx: sacremoses has no Moses rules for 'xx' .*de, .*fr"
    ):
        scoring.score(["a"], ["a"], lc_tok="xx")
    with pytest.raises(UserError, match="unknown metric 'meteor'"):
        scoring.parse_metrics("bleu,meteor")


def _official_tok(split: str, lang: str, n: int) -> list[str]:
    path = MIRROR / "multi30k" / "tok" / f"{split}.lc.norm.tok.{lang}.gz"
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return fh.read().split("\n")[:n]


def _system_like(lines: list[str]) -> list[str]:
    """Real cased, detokenized sentences with every fourth word dropped: a hypothesis that
    scores well below 100."""
    return [" ".join(w for i, w in enumerate(line.split()) if i % 4 != 3) for line in lines]


@pytest.mark.parametrize("lang", ["fr", "de", "en"])
def test_official_tokenized_references_are_told_from_raw_ones(lang):
    raw = multi30k_lines("test_2016_flickr", lang)
    assert scoring.is_lc_tok(_official_tok("test_2016_flickr", lang, len(raw)))
    assert not scoring.is_lc_tok(raw)
    assert not scoring.is_lc_tok([line.lower() for line in raw])  # lowercased, not tokenized


def test_lc_tok_scores_a_raw_reference_as_the_official_tokenized_one():
    raw = multi30k_lines("test_2016_flickr", "fr", 300)
    official = _official_tok("test_2016_flickr", "fr", 300)
    hyps = _system_like(raw)
    against_raw = scoring.score(hyps, raw, ["bleu"], lc_tok="fr")[0].score
    against_official = scoring.score(hyps, official, ["bleu"], lc_tok="fr")[0].score
    assert against_raw == pytest.approx(against_official, abs=0.01)
    assert 30 < against_official < 90
    # the raw reference left as it is would have scored far lower
    untokenized = sacrebleu_none(scoring.moses_lc_tok(hyps, "fr"), raw)
    assert untokenized < against_official - 20
    rows = scoring.bleu_by_length(raw, hyps, raw, lc_tok="fr")
    assert rows == scoring.bleu_by_length(raw, hyps, official, lc_tok="fr")


def sacrebleu_none(hyps: list[str], refs: list[str]) -> float:
    return BLEU(tokenize="none", force=True).corpus_score(hyps, [refs]).score


def test_nmt_eval_lc_tok_gives_one_figure_for_the_raw_and_the_official_reference(tmp_path):
    raw = multi30k_lines("test_2016_flickr", "fr", 200)
    hyp, raw_ref, tok_ref = tmp_path / "hyp.fr", tmp_path / "ref.fr", tmp_path / "ref.tok.fr"
    hyp.write_text("\n".join(_system_like(raw)) + "\n", encoding="utf-8")
    raw_ref.write_text("\n".join(raw) + "\n", encoding="utf-8")
    tok_ref.write_text("\n".join(_official_tok("test_2016_flickr", "fr", 200)) + "\n")
    bleu = {}
    for name, ref in (("raw", raw_ref), ("tok", tok_ref)):
        args = ("--hyp", hyp, "--ref", ref, "--lc-tok", "fr", "--metrics", "bleu", "--json")
        done = nmt("eval", *args)
        assert done.returncode == 0, done.stderr.decode()
        bleu[name] = json.loads(done.stdout)["scores"][0]["score"]
    assert bleu["raw"] == bleu["tok"] and bleu["raw"] > 30
