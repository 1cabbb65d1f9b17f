"""The document layer on plain text: segments out, whitespace and line breaks back in place."""

from __future__ import annotations

import pytest
import torch
from conftest import multi30k_lines

from nmt_cli.decoding.search import Hypothesis
from nmt_cli.documents.plan import plan_documents
from nmt_cli.runtime.errors import UserError
from nmt_cli.translation.contract import TranslateOptions
from nmt_cli.translation.results import Alternative, Translation


def echo(plan, upper=True, truncated=()):
    out = []
    for s, text in enumerate(plan.segments):
        words = text.upper() if upper else text
        tr = Translation(text, words, [], [], s in truncated)
        tr.alternatives = [Alternative(words, 0.0, 0.0), Alternative(f"<{s}>", -1.0, -1.0)]
        out.append(tr)
    return out


def test_whitespace_line_breaks_and_blank_lines_round_trip():
    lines = multi30k_lines("test_2016_flickr", "en", 9)
    text = "  " + " ".join(lines[:3]) + "\n\n\t" + lines[3] + "  \r\n" + "\n".join(lines[4:]) + "\n"
    plan = plan_documents([text, "", "\n \n"])
    assert plan.assemble(echo(plan, upper=False)) == [text, "", "\n \n"]
    assert plan.assemble(echo(plan)) == [text.upper(), "", "\n \n"]


def test_a_paragraph_of_three_sentences_gives_three_segments():
    lines = [x.strip() for x in multi30k_lines("test_2016_flickr", "en", 3)]
    plan = plan_documents([" ".join(lines)])
    assert plan.segments == lines and plan.text_of == [0, 0, 0]
    assert plan.segments_of(0) == [0, 1, 2]
    assert plan.assemble(echo(plan)) == [" ".join(x.upper() for x in lines)]


def test_sentence_per_line_input_without_splitting():
    text = "A dog runs. A cat sleeps."
    assert plan_documents([text], split_sentences=False).segments == [text]
    assert plan_documents([text]).segments == ["A dog runs.", "A cat sleeps."]


def test_alternatives_and_cut_flags_per_text():
    plan = plan_documents(["A dog runs. A cat sleeps.", "A bird sings."])
    translations = echo(plan, truncated={2})
    assert plan.assemble(translations, alternative=1) == ["<0> <1>", "<2>"]
    assert plan.assemble(translations, alternative=5) == [
        "A DOG RUNS. A CAT SLEEPS.",
        "A BIRD SINGS.",
    ]
    assert plan.cut(translations) == [False, True]


def test_long_segments_are_cut_into_clauses_and_put_back_with_their_spaces():
    lines = [x.strip().rstrip(".") for x in multi30k_lines("test_2016_flickr", "en", 3)]
    text = ", and ".join(lines) + "."
    plan = plan_documents([text], max_tokens=12, count_tokens=lambda s: len(s.split()))
    assert len(plan.segments) >= 3
    assert all(len(s.split()) <= 12 for s in plan.segments)
    assert plan.assemble(echo(plan, upper=False)) == [text]


def test_an_unknown_format_is_a_user_error():
    with pytest.raises(UserError, match="not one of text, html"):
        plan_documents(["x"], fmt="pdf")


def identity(plan):
    """Each segment translated as itself, each word aligned to itself."""
    out = []
    for text in plan.segments:
        tr = Translation(text, text, [], [])
        tr.alignment = [(i, i) for i in range(len(text.split()))]
        out.append(tr)
    return out


def test_html_blocks_are_boundaries_and_an_identity_translation_gives_the_page_back():
    from nmt_cli.documents.protect import Protector

    lines = [x.strip() for x in multi30k_lines("test_2016_flickr", "en", 12) if x.endswith(".")]
    page = (
        "<!DOCTYPE html>\n<html><head><title>Dogs &amp; cats</title></head><body>\n"
        f'<h1>{lines[0]}</h1>\n<p class="lead">{lines[1]} <b>{lines[2]}</b>\n  {lines[3]}</p>\n'
        "<pre>keep   this</pre>\n<p>Run <code>nmt translate</code> at https://example.com/x.</p>"
        "\n</body></html>\n"
    )
    plan = plan_documents([page], fmt="html", protector=Protector())
    assert plan.segments[:5] == ["Dogs & cats", lines[0], lines[1], lines[2], lines[3]]
    assert plan.needs_alignment
    assert plan.assemble(identity(plan)) == [page]


def test_plain_text_protected_spans_are_never_cut_and_come_back():
    from nmt_cli.documents.protect import Protector

    text = "Hello {{ user name }}, see https://example.com/a.b?c=1. Then mail ana@example.org."
    plan = plan_documents(
        [text], protector=Protector(), max_tokens=3, count_tokens=lambda s: len(s.split())
    )
    assert plan.assemble(identity(plan)) == [text]
    assert all("{{" not in s and "example" not in s for s in plan.segments)


def test_a_break_between_two_sentences_keeps_them_two_segments_and_comes_back_once():
    # a <br> (an office file's line break or tab is one too) wholly between two sentences cuts
    # nothing: two segments, so the model is never given two sentences as one
    page = "<p>A dog runs.<br>Two cats sleep. <br> A bird sings.<br></p>"
    plan = plan_documents([page], fmt="html")
    assert plan.segments == ["A dog runs.", "Two cats sleep.", "A bird sings."]
    assert plan.assemble(identity(plan)) == [page]  # each <br> once, no line end added


def test_a_span_after_the_full_stop_follows_the_whole_translation():
    page = "<p>A woman sings a song.<br>Two cats sleep.</p>"
    plan = plan_documents([page], fmt="html")
    out = []
    for text in plan.segments:  # the full stop aligned to the first word, as models may
        words = text.split()
        tr = Translation(text, text, [], [])
        tr.alignment = [(i, i) for i in range(len(words) - 1)] + [(len(words) - 1, 0)]
        out.append(tr)
    assert plan.assemble(out) == [page]
    # after a comma it stays by its neighbour's translation
    from nmt_cli.documents.protect import Protector

    plan = plan_documents(["Hello, {name}"], protector=Protector())
    tr = Translation(plan.segments[0], "Bonjour, mon ami.", [], [])
    tr.alignment = [(0, 0)]
    assert plan.assemble([tr]) == ["Bonjour, {name} mon ami."]


class DroppingTranslator:
    """A stand-in model that, like a caption model given two captions without a full stop
    between them, keeps only the first three words of a long input."""

    recipe, tokenizer, lowercase = None, None, False

    def __init__(self):
        from nmt_cli.config.sections import DecodeConfig

        self.config = DecodeConfig(max_segment_tokens=0)
        self.calls = []

    def translate(self, lines, options=None):
        self.calls.append(list(lines))
        out = []
        for line in lines:
            words = line.split()
            text = " ".join(words[:3]).upper() if len(words) > 8 else line.upper()
            out.append(Translation(line, text, [], list(range(len(words)))))
        return out


def test_a_translation_that_drops_half_its_source_is_redone_in_parts():
    from nmt_cli.documents.layer import DocumentOptions, translate_documents

    lines = [x.strip() for x in multi30k_lines("test_2017_flickr", "en", 40)]
    bare = [x for x in lines if not x.endswith(".") and len(x.split()) >= 6][:2]
    text = " ".join(bare)  # two captions run together: one sentence to the segmenter
    stub = DroppingTranslator()
    (result,) = translate_documents(stub, [text], None, DocumentOptions(protect=None))
    assert len(stub.calls) == 2 and len(stub.calls[1]) >= 2
    assert len(result.text.split()) >= len(text.split()) / 2
    assert " ".join(stub.calls[1]) == text


class CapitalisingTranslator:
    """A stand-in model that translates each segment as a sentence: its words as given, the
    first capitalised, and, given ``repeat``, the last two words of the segment before first."""

    recipe, tokenizer, lowercase = None, None, False

    def __init__(self, repeat: bool = False):
        self.repeat = repeat

    def translate(self, lines, options=None):
        out, before = [], []
        for line in lines:
            restated = before[-2:] if self.repeat else []
            words = restated + line.split()
            text = " ".join(words)
            out.append(
                Translation(
                    line,
                    text[:1].upper() + text[1:],
                    [Hypothesis(list(range(len(words))), -1.0, -0.5)],
                    [1] * len(line.split()),
                    alternatives=[Alternative(text[:1].upper() + text[1:], -1.0, -0.5)],
                    alignment=[(k - len(restated), k) for k in range(len(restated), len(words))],
                    confidence=0.5,
                )
            )
            before = line.split()
        return out


def clause_plan(texts):
    return plan_documents(texts, max_tokens=6, count_tokens=lambda t: len(t.split()))


def test_a_clause_cut_leaves_no_capital_in_the_middle_and_no_repeated_words():
    texts = ["a man sits on a bench, and a woman reads a paper. NASA sends a rocket up."]
    plan = clause_plan(texts)
    assert plan.segments == [
        "a man sits on a bench,",
        "and a woman reads a paper.",
        "NASA sends a rocket up.",
    ]
    (plain,) = plan.assemble(CapitalisingTranslator().translate(plan.segments))
    assert plain == "A man sits on a bench, and a woman reads a paper. NASA sends a rocket up."
    repeating = CapitalisingTranslator(repeat=True).translate(plan.segments)
    assert repeating[1].text.startswith("A bench,")  # the clause restates the one before
    whole = plan.joined(0, repeating)
    assert whole.text.startswith("A man sits on a bench, and a woman reads a paper.")
    assert "bench, a bench" not in whole.text and "bench, A" not in whole.text
    # the alignment follows the words kept: the second clause's first word is target word 6
    assert (6, 6) in whole.alignment and max(j for _, j in whole.alignment) == len(
        whole.text.split()
    ) - 1


def test_a_text_of_several_segments_is_one_translation_with_one_score_and_confidence():
    import math

    plan = clause_plan(["a man sits on a bench, and a woman reads a paper.", "  ", "a dog."])
    translations = CapitalisingTranslator().translate(plan.segments)
    whole, blank, one = (plan.joined(i, translations) for i in range(3))
    assert whole.score == -2.0 and [a.score for a in whole.alternatives] == [-2.0]
    # the joined hypothesis's confidence: exp(Σ log p / Σ (tokens + 1)) over 6 + 6 tokens
    assert whole.confidence == pytest.approx(math.exp(-2.0 / 14))
    assert whole.alignment == [(k, k) for k in range(12)]
    assert blank.text == "  " and blank.confidence is None and not blank.alternatives
    assert one.text == "A dog." and one.confidence == 0.5


class AttendingTranslator:
    """A stand-in model that translates word for word (upper case) and attends from each target
    word to its own source word, except the third, which attends to the second most: no target
    word chooses the third source word. Its alignment and coverage come from the functions the
    translator uses, where the options ask for them."""

    recipe, tokenizer, lowercase = None, None, False

    def __init__(self):
        from nmt_cli.config.sections import DecodeConfig

        self.config = DecodeConfig(max_segment_tokens=0)
        self.asked = []

    def translate(self, lines, options=None):
        from nmt_cli.translation.words import alignment_pairs, source_coverage

        options = options or TranslateOptions()
        self.asked.append(options)
        out = []
        for line in lines:
            words = line.split()
            n = len(words)
            weights = torch.eye(n) * 0.6 + 0.1
            if n >= 3:
                weights[2] = 0.0
                weights[2, 1], weights[2, 2] = 0.6, 0.4
            pieces = ["▁" + w for w in words]
            tr = Translation(line, line.upper(), [], list(range(n)))
            if options.alignments:
                tr.alignment = alignment_pairs(weights, pieces, pieces)
            if options.coverage:
                tr.coverage = source_coverage(weights, pieces, pieces)
            out.append(tr)
        return out


def test_a_tagged_word_no_target_word_chose_keeps_its_tag_around_its_translation():
    from nmt_cli.documents.layer import DocumentOptions, translate_documents

    stub = AttendingTranslator()
    html_doc = "<p>A man <b>on</b> a bench and <a href='u'>a</a> dog.</p>"
    (result,) = translate_documents(stub, [html_doc], None, DocumentOptions(fmt="html"))
    assert result.text == '<p>A MAN <b>ON</b> A BENCH AND <a href="u">A</a> DOG.</p>'
    (placed,) = stub.asked
    assert placed.alignments and placed.coverage
    # an element with a chosen word ("man") goes over the words chosen for it ("MAN", "ON")
    (both,) = translate_documents(
        stub, ["<p>A <i>man on</i> a bench.</p>"], None, DocumentOptions(fmt="html")
    )
    assert both.text == "<p>A <i>MAN ON</i> A BENCH.</p>"
    # plain text asks for neither
    stub.asked.clear()
    translate_documents(stub, ["A man on a bench."], None, DocumentOptions(protect=None))
    assert [(o.alignments, o.coverage) for o in stub.asked] == [(False, False)]
