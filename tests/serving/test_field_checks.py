import json

import pytest

from nmt_cli.serving.field_checks import MAX_JSON_DEPTH, FieldError, check_value, loads_checked


def test_nesting_past_the_parsers_recursion_is_refused_in_one_line():
    for text in ("[" * 990 + "]" * 990, '{"q": ' + "[" * 5000 + "]" * 5000 + "}"):
        with pytest.raises(FieldError, match=f"nested deeper than {MAX_JSON_DEPTH} levels"):
            loads_checked(text)
    at_limit = {"q": json.loads("[" * (MAX_JSON_DEPTH - 1) + "]" * (MAX_JSON_DEPTH - 1))}
    assert loads_checked(json.dumps(at_limit)) == at_limit
    with pytest.raises(FieldError, match=r"^q(\[0\])+: nested deeper than 32"):
        check_value({"q": json.loads("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH)})


@pytest.mark.parametrize(
    "body,where",
    [
        ('{"q": "a \\ud800 b"}', "q: not valid Unicode (a lone surrogate at character 2)"),
        ('{"src": ["ok", "\\udfff"]}', "src[1]: not valid Unicode"),
        ('{"glossary": {"\\ud83d": "x"}}', "glossary.?: not valid Unicode"),
        ('{"\\ud800": 1}', "a field name: not valid Unicode"),
        ('{"api_key": "\\ud800"}', "api_key: not valid Unicode"),
    ],
)
def test_lone_surrogates_are_refused_naming_the_field(body, where):
    with pytest.raises(FieldError) as refused:
        loads_checked(body)
    assert str(refused.value).startswith(where)
    str(refused.value).encode("utf-8")  # the message itself can be sent


def test_valid_unicode_passes_whole():
    body = {"q": ["😀 émoji", "日本語"], "source": "en", "n": [1, 2.5, None, True]}
    assert loads_checked(json.dumps(body)) == body
    assert loads_checked(json.dumps(body, ensure_ascii=False)) == body
