"""Segments answered before decoding (nmt_cli/documents/recall.py) through the one document
layer: a stored correction alone or inside a paragraph, a sentence cut into clauses matched
whole, the cache's repeats, and nothing looked up under a prefix."""

from __future__ import annotations

from types import SimpleNamespace

from conftest import multi30k_lines

from nmt_cli.config.sections import DecodeConfig
from nmt_cli.decoding.search import Hypothesis
from nmt_cli.documents.layer import DocumentOptions, document_plan, translate_documents
from nmt_cli.documents.recall import Recall, memory_key
from nmt_cli.translation.cache import TranslationCache
from nmt_cli.translation.contract import TranslateOptions
from nmt_cli.translation.results import Alternative, Translation

PLAIN = DocumentOptions(protect=None)


class UpperTranslator:
    """A stand-in model: each segment in capitals; records what it was asked to decode."""

    recipe, tokenizer, lowercase = None, None, False

    def __init__(self, max_segment_tokens: int = 0):
        self.config = DecodeConfig(max_segment_tokens=max_segment_tokens)
        self.calls: list[list[str]] = []

    def translate(self, lines, options=None):
        self.calls.append(list(lines))
        return [
            Translation(
                line,
                line.upper(),
                [Hypothesis([1] * len(line.split()), -1.0, -0.5)],
                [1] * len(line.split()),
                alternatives=[Alternative(line.upper(), -1.0, -0.5)],
                confidence=0.6,
            )
            for line in lines
        ]


class Corrections:
    """A memory in a dict: (source, target, memory key) -> correction."""

    def __init__(self, pairs: dict[str, str]):
        self.stored = {("en", "fr", memory_key(q)): s for q, s in pairs.items()}

    def recall(self, source, target, key):
        return self.stored.get((source, target, key))


def lines(n: int) -> list[str]:
    return [x.strip() for x in multi30k_lines("test_2016_flickr", "en", n)]


def test_a_corrected_sentence_is_answered_alone_and_inside_a_paragraph():
    first, second, third = lines(3)
    memory = Corrections({f"  {second.replace(' ', '   ')} ": "Une correction."})
    recall = Recall("en", "fr", "model", memory=memory)
    stub = UpperTranslator()
    paragraph = f"{first}  {second}\n{third}"
    alone, inside = translate_documents(stub, [second, paragraph], None, PLAIN, recall)
    assert alone.text == "Une correction." and alone.segments[0].from_memory
    assert alone.translation.confidence == 1.0
    assert inside.text == f"{first.upper()}  Une correction.\n{third.upper()}"
    assert [s.from_memory for s in inside.segments] == [False, True, False]
    assert stub.calls == [[first, third]]  # the corrected sentence never reached the model


def test_a_whole_text_corrected_as_one_is_answered_whole():
    first, second, third = lines(3)
    text = f"{first} {second}\n\n{third}"
    correction = "Première phrase. Deuxième.\n\nTroisième."
    recall = Recall("en", "fr", "model", memory=Corrections({text: correction, first: "Non."}))
    stub = UpperTranslator()
    whole, apart = translate_documents(
        stub, [f"  {text}\n", f"{first} {third}"], None, PLAIN, recall
    )
    assert whole.text == f"  {correction}\n"  # the text's own spaces around it kept
    assert len(whole.segments) == 3 and all(s.from_memory for s in whole.segments)
    assert apart.text == f"Non. {third.upper()}"  # its sentences, one by one
    assert stub.calls == [[third]]


def test_html_blocks_are_matched_but_a_sentence_with_tags_is_left_to_the_model():
    first, second = lines(2)
    memory = Corrections({first: "Une <correction> & plus.", second: "Jamais servie."})
    recall = Recall("en", "fr", "model", memory=memory)
    stub = UpperTranslator()
    head, rest = second.split(" ", 1)
    tagged = f"<b>{head}</b> {rest}"
    document = f"<p>{first}</p>\n<p>{tagged}</p>"
    (result,) = translate_documents(stub, [document], None, DocumentOptions(fmt="html"), recall)
    assert result.text.startswith("<p>Une &lt;correction&gt; &amp; plus.</p>\n<p>")
    assert "Jamais" not in result.text and "<b>" in result.text
    assert [s.from_memory for s in result.segments] == [True, False]


def test_a_sentence_cut_into_clauses_is_matched_whole_and_kept_as_given():
    sentence = ", and ".join(x.rstrip(".") for x in lines(3)) + "."
    stub = UpperTranslator(max_segment_tokens=12)
    stub.tokenizer = SimpleNamespace(src=SimpleNamespace(encode=str.split))  # words as subwords
    plan = document_plan(stub, [sentence], PLAIN)
    assert len(plan.segments) > 1  # cut into clauses
    recall = Recall("en", "fr", "model", memory=Corrections({sentence: "Court."}))
    result, other = translate_documents(stub, [sentence + "  ", "Two dogs."], None, PLAIN, recall)
    assert result.text == "Court.  "  # no retry in parts of a short correction, spaces kept
    assert all(s.from_memory for s in result.segments)
    assert other.text == "TWO DOGS." and stub.calls == [["Two dogs."]]


def test_repeats_come_from_the_cache_but_only_with_the_same_options():
    texts = lines(4)
    cache = TranslationCache(16)
    recall = Recall("en", "fr", "model", cache=cache)
    stub = UpperTranslator()
    first = translate_documents(stub, texts, None, PLAIN, recall)
    again = translate_documents(stub, texts, None, PLAIN, recall)
    assert [d.text for d in again] == [d.text for d in first] == [t.upper() for t in texts]
    assert len(stub.calls) == 1 and cache.hits == 4
    translate_documents(stub, texts[:1], TranslateOptions(beam_size=2), PLAIN, recall)
    assert stub.calls[-1] == texts[:1]  # other options: decoded anew
    other_model = Recall("en", "fr", "another model", cache=cache)
    translate_documents(stub, texts[:1], None, PLAIN, other_model)
    assert stub.calls[-1] == texts[:1]


def test_nothing_is_looked_up_under_a_prefix():
    (sentence,) = lines(1)
    recall = Recall("en", "fr", "model", Corrections({sentence: "Corrigé."}), TranslationCache(4))
    stub = UpperTranslator()
    (result,) = translate_documents(
        stub, [sentence], TranslateOptions(prefixes=("A",)), PLAIN, recall
    )
    assert stub.calls == [[sentence]] and not result.segments[0].from_memory


class AligningTranslator(UpperTranslator):
    """UpperTranslator that records whether each call asked for alignments and, where asked,
    aligns each word to itself."""

    def __init__(self):
        super().__init__()
        self.aligned: list[bool] = []

    def translate(self, lines, options=None):
        options = options or TranslateOptions()
        self.aligned.append(options.alignments)
        out = super().translate(lines, options)
        for tr in out:
            if options.alignments:
                tr.alignment = [(i, i) for i in range(len(tr.source.split()))]
        return out


def test_only_segments_with_protected_spans_are_decoded_with_alignments_and_cached_apart():
    plain = lines(3)
    numbered = "A girl with the number 1102 on her jersey runs across some grass."
    cache = TranslationCache(16)
    recall = Recall("en", "fr", "model", cache=cache)
    stub = AligningTranslator()
    texts = [" ".join(plain[:2]), numbered]
    first = translate_documents(stub, texts, None, DocumentOptions(), recall)
    assert stub.aligned == [False, True]  # one call without alignments, one with
    assert stub.calls[0] == plain[:2] and len(stub.calls[1]) == 1
    assert "1102" not in stub.calls[1][0]  # the model sees a placeholder
    assert first[0].text == " ".join(p.upper() for p in plain[:2])
    assert "1102" in first[1].text  # put back by the alignment
    # The plain sentences are cached as decoded without alignments: a later text with a number
    # beside them does not decode them again.
    translate_documents(stub, [plain[0], numbered], None, DocumentOptions(), recall)
    assert cache.hits == 2 and len(stub.calls) == 2
