"""Sentence boundaries and clause cuts on real text."""

from __future__ import annotations

import pytest
from conftest import multi30k_lines

from nmt_cli.documents.segment import clause_spans, sentence_spans, spans_of, split_sentences


@pytest.mark.parametrize("lang", ["en", "fr", "de"])
def test_joined_multi30k_lines_come_apart_again(lang):
    lines = [x.strip() for x in multi30k_lines("test_2016_flickr", lang, 60)]
    punctuated = [x for x in lines if x.endswith((".", "!", "?"))][:45]
    recovered = 0
    for i in range(0, len(punctuated), 3):
        group = punctuated[i : i + 3]
        recovered += split_sentences(" ".join(group), lang) == group
    assert recovered >= 13  # of 15 paragraphs (German "... ist. 3 Jungen ..." stays one)


def test_abbreviations_do_not_end_sentences():
    assert split_sentences("Mr. Smith met Dr. Jones. They talked.") == [
        "Mr. Smith met Dr. Jones.",
        "They talked.",
    ]


def test_spans_keep_the_whitespace_between_sentences_out():
    text = "  One dog runs.   Two cats sleep!\tA bird? "
    spans = sentence_spans(text)
    assert [text[a:b] for a, b in spans] == ["One dog runs.", "Two cats sleep!", "A bird?"]
    assert sentence_spans("   ") == [] and sentence_spans("") == []


def test_a_piece_the_segmenter_changed_does_not_lose_text():
    text = "First part here. Second part there."
    assert spans_of(text, ["First part here. ", "SECOND"]) == [(0, 16), (17, len(text))]


def test_long_sentences_are_cut_at_clause_boundaries_first():
    text = "A man in a red shirt rides a bike, and a dog runs beside him on the grass"
    parts = clause_spans(text, 0, len(text), lambda s: len(s.split()) > 9)
    assert [text[a:b] for a, b in parts] == [
        "A man in a red shirt rides a bike,",
        "and a dog runs beside him on the grass",
    ]
    words = "one two three four five six seven eight"
    cut = clause_spans(words, 0, len(words), lambda s: len(s.split()) > 3)
    assert all(len(words[a:b].split()) <= 3 for a, b in cut)
    assert " ".join(words[a:b] for a, b in cut) == words


def test_no_cut_inside_a_kept_span():
    text = "Hello {{ user name }} and welcome"
    kept = [(6, 21)]
    parts = clause_spans(text, 0, len(text), lambda s: len(s.split()) > 2, kept)
    assert all(not (6 < a < 21) for a, _ in parts)
