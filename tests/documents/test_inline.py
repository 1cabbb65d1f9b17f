"""Inline: tags and protected spans carried through a translation by its word alignment, on
real Multi30k sentences; each tag and span must come back exactly once, properly nested."""

import random
from collections import Counter
from html.parser import HTMLParser

import pytest

from nmt_cli.documents.inline import plain_inline
from nmt_cli.documents.markup import parse_html
from nmt_cli.documents.plan import plan_documents
from nmt_cli.documents.protect import Protector
from nmt_cli.translation.translator import Translator
from tests.conftest import multi30k_lines, trained_copy

SPANS = ["{name}", "%d", "%(count)d", "[X12X]", "https://example.com/a?b=1", "ann@example.org"]
TAGS = ["<b>", '<a href="https://example.com/?q=1&amp;r=2">', '<span class="x">', "<em>", "<i>"]


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.starts, self.stack, self.nested, self.text = [], [], True, []

    def handle_starttag(self, tag, attrs):
        self.starts.append((tag, tuple(attrs)))
        if tag not in ("br", "img"):
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if self.stack and self.stack[-1] == tag:
            self.stack.pop()
        else:
            self.nested = False

    def handle_data(self, data):
        self.text.append(data)


def tags(document: str) -> _Tags:
    parser = _Tags()
    parser.feed(document)
    parser.close()
    return parser


def tagged(line: str, rng: random.Random) -> tuple[str, list[str]]:
    """``line`` as a paragraph with tags (some nested) around words and spans between them."""
    words = line.rstrip(".").split()
    spans = rng.sample(SPANS, 2)
    for span in spans:
        words.insert(rng.randrange(len(words) + 1), span)
    starts = sorted(rng.sample(range(len(words)), min(3, len(words))))
    out = []
    for k, word in enumerate(words):
        if k in starts and word not in spans:
            opener = rng.choice(TAGS)
            name = opener[1:].split()[0].rstrip(">")
            inner = f"<i>{word}</i>" if rng.random() < 0.4 and name != "i" else word
            word = f"{opener}{inner}</{name}>"
        out.append(word)
    return "<p>" + " ".join(out) + ".</p>", spans


def check(source: str, output: str, spans: list[str]) -> None:
    src, out = tags(source), tags(output)
    assert out.nested and not out.stack, output
    assert Counter(out.starts) == Counter(src.starts), output
    text = "".join(out.text)
    for span in spans:
        assert text.count(span) == 1, (span, output)


def restored(document: str, translate) -> str:
    parts = parse_html(document, Protector())
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
        else:
            words, alignment = translate(part.model_input())
            out.append(part.restore(words, alignment))
    return "".join(out)


def identity(text):
    return text, [(i, i) for i in range(len(text.split()))]


def reverse(text):
    n = len(text.split())
    return " ".join(reversed(text.split())), [(n - 1 - j, j) for j in range(n)]


def collapse(text):  # every target word aligned to the first source word
    return text, [(0, j) for j in range(len(text.split()))]


@pytest.mark.parametrize("translate", [identity, reverse, collapse, lambda t: (t, None)])
def test_tags_and_spans_come_back_once_and_nested_whatever_the_alignment(translate):
    rng = random.Random(3)
    for line in multi30k_lines("test_2017_flickr", "en", 60):
        document, spans = tagged(line, rng)
        check(document, restored(document, translate), spans)


def test_the_identity_alignment_gives_the_document_back():
    rng = random.Random(5)
    for line in multi30k_lines("test_2016_flickr", "en", 60):
        document, _ = tagged(line, rng)
        assert restored(document, identity) == document


def test_a_placeholder_goes_next_to_the_translation_of_its_neighbour():
    inline = plain_inline("Hello {name}, you have %d new messages.", Protector())
    assert inline.model_input() == "Hello, you have new messages."
    fr = "Bonjour, vous avez de nouveaux messages."
    alignment = [(0, 0), (1, 1), (2, 2), (3, 4), (3, 3), (4, 5)]
    assert inline.restore(fr, alignment) == "Bonjour {name}, vous avez %d de nouveaux messages."
    url = plain_inline("Visit https://example.com/page?id=42.", Protector())
    assert url.restore("Visitez.", [(0, 0)]) == "Visitez https://example.com/page?id=42."


def test_slices_of_a_partition_restore_each_tag_once():
    line_a, line_b = multi30k_lines("val", "en", 2)
    document = f'<p><a href="x">{line_a} {line_b}</a> {{name}}</p>'
    (run,) = [p for p in parse_html(document, Protector()) if not isinstance(p, str)]
    cut = len(line_a) + 1
    pieces = [run.slice(0, cut), run.slice(cut, len(run.text))]
    out = "".join(p.restore(*identity(p.model_input())) for p in pieces)
    assert out == document[3:-4]
    alone = run.slice(0, cut, closed=True)
    assert alone.restore(*identity(alone.model_input())) == f'<a href="x">{line_a}</a> '


@pytest.fixture(scope="module")
def tiny_translator(tiny_run, tmp_path_factory):
    run = trained_copy(tiny_run, tmp_path_factory, "markup", max_steps=30, checkpoint_every=30)
    return Translator.load(run, threads=1)


def test_through_a_tiny_model_html_and_text_keep_every_tag_and_span(tiny_translator):
    rng = random.Random(11)
    lines = multi30k_lines("test_2016_flickr", "en", 40)
    protector = Protector(vocabulary=tiny_translator.tokenizer)
    cases = [tagged(line, rng) for line in lines]
    plan = plan_documents([d for d, _ in cases], fmt="html", protector=protector)
    outputs = plan.assemble(tiny_translator.translate(plan.segments, alignments=True))
    for (document, spans), output in zip(cases, outputs):
        check(document, output, spans)
    emoji = [f"{line} \U0001f436 {{0}}" for line in lines]
    plan = plan_documents(emoji, fmt="text", protector=protector)
    for output in plan.assemble(tiny_translator.translate(plan.segments, alignments=True)):
        assert output.count("\U0001f436") == 1 and output.count("{0}") == 1, output
        assert "\u2047" not in output


def test_a_parent_cut_by_a_sibling_keeps_the_part_its_inner_element_needs():
    # "a blue" is bold and "blue" italic; the underlined "umbrella" takes the middle of the
    # bold words' translation: the bold keeps the part that holds "bleu", so the italic has words
    (inline,) = [
        p for p in parse_html("<b>a <i>blue</i></b> <u>umbrella</u>") if not isinstance(p, str)
    ]
    assert inline.model_input() == "a blue umbrella"
    out = inline.restore("un parapluie bleu", [(0, 0), (1, 2), (2, 1)])
    assert out == "un <u>parapluie</u> <b><i>bleu</i></b>"
