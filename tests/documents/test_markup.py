"""parse_html on real sentences in HTML: what is copied, what is translated, nothing lost."""

from html.parser import HTMLParser

import pytest

from nmt_cli.documents.inline import Inline
from nmt_cli.documents.markup import parse_html
from nmt_cli.documents.protect import Protector
from tests.conftest import multi30k_lines


def joined(parts) -> str:
    return "".join(p if isinstance(p, str) else p.markup() for p in parts)


def inlines(parts) -> list[Inline]:
    return [p for p in parts if isinstance(p, Inline)]


def page(lines: list[str]) -> str:
    a, b, c = lines
    first, rest = a.split(" ", 1)
    return (
        "<!DOCTYPE html>\n<html><head><title>Captions &amp; more</title>"
        "<style>p { color: red; }</style></head>\n<body>\n"
        f'<p><b class="lead">{first}</b> {rest}</p>\n'
        f'<ul><li>{b}</li><li><a href="https://example.com/?a=1&amp;b=2">{c}</a></li></ul>\n'
        "<pre>keep <b>this</b> as it is</pre><!-- a comment -->\n"
        '<p translate="no">Not this.</p><script>if (a < b) { x(); }</script>\n'
        "</body></html>\n"
    )


def test_blocks_are_runs_and_the_rest_is_copied_verbatim():
    lines = multi30k_lines("test_2017_flickr", "en", 3)
    document = page(lines)
    parts = parse_html(document, Protector())
    assert joined(parts) == document
    texts = [p.text for p in inlines(parts)]
    assert texts == ["Captions & more", *lines]
    copied = "".join(p for p in parts if isinstance(p, str))
    for verbatim in [
        "<pre>keep <b>this</b> as it is</pre>",
        "<!-- a comment -->",
        '<p translate="no">Not this.</p>',
        "<script>if (a < b) { x(); }</script>",
        "<style>p { color: red; }</style>",
        "<!DOCTYPE html>",
    ]:
        assert verbatim in copied
    first = inlines(parts)[1]
    assert [(e.open, first.text[e.start : e.end]) for e in first.elements] == [
        ('<b class="lead">', lines[0].split()[0])
    ]
    link = inlines(parts)[3].elements[0]
    assert link.open == '<a href="https://example.com/?a=1&amp;b=2">'


def test_inline_code_and_notranslate_spans_are_protected_in_their_sentence():
    line = multi30k_lines("test_2016_flickr", "en", 1)[0]
    document = (
        f"<p>{line} Run <code>ls &lt;dir&gt;</code> and "
        '<span class="notranslate">Keep Me</span>.</p>'
    )
    (run,) = inlines(parse_html(document, Protector()))
    assert run.text == f"{line} Run ls <dir> and Keep Me."
    assert [a.raw for a in run.protected] == [
        "<code>ls &lt;dir&gt;</code>",
        '<span class="notranslate">Keep Me</span>',
    ]
    assert "ls" not in run.model_input() and "Keep" not in run.model_input()
    assert run.markup() == document[3:-4]


def test_entities_are_decoded_for_the_model_and_escaped_again():
    (run,) = inlines(parse_html("<p>Fish &amp; chips &lt;3 &eacute;t&eacute;</p>"))
    assert run.model_input() == "Fish & chips <3 été"
    assert run.restore("Poisson & frites <3 été", None) == "Poisson &amp; frites &lt;3 été"


class _Text(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.text = []

    def handle_data(self, data):
        self.text.append(data)


def visible(document: str) -> str:
    parser = _Text()
    parser.feed(document)
    parser.close()
    return "".join("".join(parser.text).split())


@pytest.mark.parametrize(
    "broken",
    [
        "<p>{0} <b>bold <i>both</p> after</b> {1}",
        "<p>{0}</b></i> stray ends {1}",
        "<div><p>{0} <span>never closed {1}",
        "{0} < not a tag & no entity {1} <",
        "<p>{0} <a href='x>{1}</p>",
        "<ul><li>{0}<li>{1}</ul></div></div>",
        "<p>{0}<br>{1}<img src=x.png alt='A picture'></p>",
        "<p>{0} <!-- unclosed comment {1}",
    ],
)
def test_malformed_html_loses_no_text_and_raises_nothing(broken):
    a, b = multi30k_lines("val", "en", 2)
    document = broken.format(a, b)
    parts = parse_html(document, Protector())
    assert visible(joined(parts)) == visible(document)
    for run in inlines(parts):  # restoring any translation cannot fail either
        run.restore(run.model_input(), None)


def test_inline_nesting_up_to_the_limit_is_restored_and_past_it_refused_in_one_line():
    from nmt_cli.documents.markup import MAX_INLINE_DEPTH, MarkupTooDeep

    line = multi30k_lines("val", "en", 1)[0]
    deepest = "".join(f'<span class="s{k}">' for k in range(MAX_INLINE_DEPTH))
    document = f"<p>{deepest}{line}{'</span>' * MAX_INLINE_DEPTH}</p>"
    parts = parse_html(document, Protector())
    assert joined(parts) == document
    (run,) = inlines(parts)
    restored = run.restore(run.model_input(), None)  # walks all 100 levels
    assert restored.count("<span") == restored.count("</span>") == MAX_INLINE_DEPTH
    # 1,600 deep in 4,812 characters, under the service's 5,000: refused, not a RecursionError
    with pytest.raises(MarkupTooDeep, match=f"more than {MAX_INLINE_DEPTH} deep") as refused:
        parse_html("<b>" * 1600 + "x" * 12, Protector())
    assert "\n" not in str(refused.value)
