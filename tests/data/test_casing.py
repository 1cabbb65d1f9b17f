"""Sentence case: ALL CAPS and Title Case found, undone and given back; case augmentation."""

from conftest import multi30k_lines

from nmt_cli.data.casing import (
    TITLE,
    UPPER,
    case_augmented,
    case_of,
    recased,
    sentence_cased,
    title_cased,
)


def test_capitals_and_title_case_are_found_on_real_sentences_and_normal_ones_are_not():
    lines = multi30k_lines("test_2016_flickr", "en", 200)
    assert all(case_of(line.upper()) == UPPER for line in lines if len(line.split()) >= 2)
    assert all(case_of(title_cased(line)) == TITLE for line in lines if len(line.split()) >= 3)
    assert [line for line in lines if case_of(line) is not None] == []
    for text in ("NASA", "I saw John Smith in New York.", "The NASA rover lands.", "12345"):
        assert case_of(text) is None, text


def test_sentence_case_undoes_capitals_and_keeps_acronyms_in_a_title():
    line = "A man is riding a red bike down the street."
    assert sentence_cased(line.upper(), UPPER) == line
    assert sentence_cased(title_cased(line), TITLE) == line
    assert sentence_cased("The NASA Rover Lands", TITLE) == "The NASA rover lands"
    assert sentence_cased(line, None) == line


def test_a_translation_gets_its_source_case_back():
    text = "Un homme fait du vélo dans la rue de l'église."
    assert recased(text, UPPER) == "UN HOMME FAIT DU VÉLO DANS LA RUE DE L'ÉGLISE."
    assert recased(text, TITLE) == "Un Homme Fait Du Vélo Dans La Rue De L'église."
    assert recased(text, None) == text


def test_case_augmentation_recases_a_share_on_both_sides_anew_each_epoch():
    src = multi30k_lines("val", "en", 400)
    tgt = multi30k_lines("val", "fr", 400)
    a_src, a_tgt = case_augmented(src, tgt, 0.25, seed=3, epoch=0)
    changed = [i for i in range(len(src)) if a_src[i] != src[i]]
    assert 0.15 * len(src) < len(changed) < 0.35 * len(src)
    for i in changed:  # the same case on both sides
        assert a_src[i] in (src[i].upper(), title_cased(src[i]))
        assert (a_src[i] == src[i].upper()) == (a_tgt[i] == tgt[i].upper())
        assert a_tgt[i] in (tgt[i].upper(), title_cased(tgt[i]))
    assert {a_src[i] == src[i].upper() for i in changed} == {True, False}
    assert case_augmented(src, tgt, 0.25, seed=3, epoch=0) == (a_src, a_tgt)
    assert case_augmented(src, tgt, 0.25, seed=3, epoch=1)[0] != a_src
    assert case_augmented(src, tgt, 0.0, seed=3, epoch=0) == (src, tgt)
