"""Numbers digit for digit and segments without words, through the document plan."""

import re

from conftest import multi30k_lines
from test_document import identity

from nmt_cli.documents.numbers import number_writer, to_target
from nmt_cli.documents.plan import plan_documents
from nmt_cli.documents.protect import Protector
from nmt_cli.documents.wordless import has_words
from nmt_cli.translation.results import Translation

NUMBERS = ["10:30", "12/05/2024", "1,234", "3.5", "v2.1", "+33", "$5.99", "50%", "1st", "1990s"]


def found(text, **kw):
    return [text[s:e] for s, e in Protector(**kw).find(text)]


def test_every_kind_of_number_is_one_protected_span_without_its_punctuation():
    line = multi30k_lines("test_2017_flickr", "en", 1)[0].rstrip(".")
    text = line + ", " + ", ".join(NUMBERS) + ", a 3-year-old boy and COVID-19."
    assert found(text) == NUMBERS + ["3", "COVID-19"]
    assert found(text, numbers=False) == []
    # a leading decimal point, a number after an ellipsis, printf's escaped percent
    assert found("He ran .5 miles, waited...10 minutes and got 50%% of it.") == [".5", "10", "50%%"]


def test_target_convention_only_where_the_form_is_certain():
    assert to_target("1,234", "en", "fr") == "1\u00a0234"
    assert to_target("1,234.56", "en", "de") == "1.234,56"
    assert to_target("3.5", "en", "fr") == "3,5"
    assert to_target("50%", "en", "fr") == "50\u00a0%"
    assert to_target("1st", "en", "fr") == "1er" and to_target("2nd", "en", "fr") == "2e"
    for kept in ("12/05/2024", "10:30", "3.5.1", "1,23", "12345", "+33"):
        assert to_target(kept, "en", "fr") == kept
    assert to_target("3.5", "de", "fr") == "3.5"  # a source that may write 3,5 itself
    assert to_target("3.5", "en", "en") == "3.5"
    assert number_writer("keep", "en", "fr") is None


def digit_runs(text):
    return sorted(re.findall(r"\d+", text))


class Forgetful:
    """A stand-in model that drops every digit and aligns word i to word i."""

    @staticmethod
    def translate(plan):
        out = []
        for text in plan.segments:
            words = [w for w in text.split() if not re.search(r"\d", w)]
            tr = Translation(text, " ".join(words), [], [])
            tr.alignment = [(i, i) for i in range(len(words))]
            out.append(tr)
        return out


def test_numbers_come_back_digit_for_digit_from_a_model_that_drops_them():
    lines = multi30k_lines("test_2016_flickr", "en", 30)
    texts = [f"At 10:30 on 12/05/2024, {line[:-1]} with 1,234 people and 3 dogs." for line in lines]
    plan = plan_documents(texts, protector=Protector())
    assert not any(re.search(r"\d", s) for s in plan.segments)
    for text, out in zip(texts, plan.assemble(Forgetful.translate(plan))):
        assert digit_runs(out) == digit_runs(text), out
    french = plan_documents(
        texts[:1], protector=Protector(), write_number=number_writer("target", "en", "fr")
    )
    (out,) = french.assemble(Forgetful.translate(french))
    assert "1\u00a0234" in out and "12/05/2024" in out and "10:30" in out


def test_segments_without_words_come_back_as_they_were_and_are_not_translated():
    line = multi30k_lines("test_2016_flickr", "en", 1)[0]
    wordless = ["12345", "#", "---", "```", "```python", ":-)", "¯\\_(ツ)_/¯", "★★★☆", "| --- |"]
    text = "\n".join(wordless + [line, "50% :D"])
    for protector in (None, Protector()):
        plan = plan_documents([text], protector=protector)
        assert plan.segments == [line]
        assert plan.assemble(identity(plan)) == [text]
    html = "<p>12345</p><p><b>---</b> :-)</p><p>" + line + "</p>"
    plan = plan_documents([html], fmt="html", protector=Protector())
    assert plan.segments == [line]
    assert plan.assemble(identity(plan)) == [html]
    assert has_words("A dog.") and has_words("OK :-)") and not has_words("XD <3")
