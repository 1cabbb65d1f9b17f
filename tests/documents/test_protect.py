"""Protector: the built-in rules, user patterns and the vocabulary's gaps, on real sentences."""

import pytest

from nmt_cli.data.tokenizer import Tokenizer
from nmt_cli.documents.protect import Protector
from nmt_cli.runtime.errors import UserError
from tests.conftest import multi30k_lines

SPANS = [
    "{name}",
    "{0}",
    "{0:.2f}",
    "%s",
    "%d",
    "%5.2f",
    "%(count)d",
    "{{ user }}",
    "{% if x %}",
    "[X12X]",
    "$HOME",
    "${VAR}",
    "https://example.com/page?id=42&x=1",
    "www.example.org/a/b",
    "anna.smith+news@example.co.uk",
]


def found(protector, text):
    return [text[s:e] for s, e in protector.find(text)]


@pytest.mark.parametrize("span", SPANS)
def test_each_rule_finds_its_span_inside_a_real_sentence(span):
    protector = Protector()
    for line in multi30k_lines("test_2017_flickr", "en", 20):
        words = line.rstrip(".").split()
        text = " ".join(words[:3] + [span] + words[3:]) + "."
        assert found(protector, text) == [span], text


def test_a_real_sentence_without_placeholders_has_only_its_numbers_protected():
    protector = Protector()
    lines = multi30k_lines("test_2016_flickr", "en", 300)
    spans = [span for line in lines for span in found(protector, line)]
    assert spans and all(span.isdigit() for span in spans)  # "2 blond girls are sitting ..."
    assert [line for line in lines if Protector(numbers=False).find(line)] == []


def test_trailing_punctuation_is_not_part_of_an_address_and_percent_signs_stay_text():
    protector = Protector()
    assert found(protector, "Visit https://example.com/page, or www.example.org.") == [
        "https://example.com/page",
        "www.example.org",
    ]
    assert found(protector, "Write to a.b@example.org.") == ["a.b@example.org"]
    assert found(protector, "A 50% discount on 100 %s") == ["50%", "100", "%s"]
    assert found(Protector(numbers=False), "A 50% discount on 100 %s") == ["%s"]


def test_user_patterns_add_spans_and_a_bad_one_names_itself():
    protector = Protector([r"ACME-\d+", r"\bGRU\b"])
    assert found(protector, "Ticket ACME-12 is about the GRU.") == ["ACME-12", "GRU"]
    with pytest.raises(UserError, match=r"protect pattern '\(unclosed'"):
        Protector(["(unclosed"])


def test_overlapping_matches_keep_the_first_and_longest():
    protector = Protector([r"example"])
    assert found(protector, "see https://example.com now") == ["https://example.com"]


def test_characters_the_vocabulary_lacks_are_protected_runs(tiny_run):
    _, run_dir = tiny_run
    tokenizer = Tokenizer.load(run_dir)
    protector = Protector(vocabulary=tokenizer)
    line = multi30k_lines("test_2016_flickr", "en", 1)[0]
    text = f"{line} \U0001f436\U0001f431 \u6771\u4eac"
    assert found(protector, text) == ["\U0001f436\U0001f431", "\u6771\u4eac"]
    assert tokenizer.src.unk_id() in tokenizer.src.encode("\U0001f436")
    assert Protector(vocabulary=tokenizer).find(line) == []


def test_back_to_back_placeholders_and_addresses_in_capitals_are_each_one_span():
    protector = Protector()
    assert found(protector, "A man reads %s%s and %(a)s%(b)s, %d%% of it.") == [
        "%s",
        "%s",
        "%(a)s",
        "%(b)s",
        "%d",
        "%%",
    ]
    assert found(protector, "GO TO HTTPS://EXAMPLE.COM/A OR WWW.EXAMPLE.ORG, Http://x.org.") == [
        "HTTPS://EXAMPLE.COM/A",
        "WWW.EXAMPLE.ORG",
        "Http://x.org",
    ]
