"""Words cut into units for placing tags in a translation (nmt_cli/documents/inline.py): a
word's leading punctuation, its core and its trailing punctuation, so that a tag closed before a
full stop stays before the translation's full stop."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass


def is_punct(char: str) -> bool:
    return unicodedata.category(char)[0] == "P"


def word_units(word: str) -> list[tuple[str, str]]:
    """(kind, text) of a word's units: leading punctuation, core, trailing punctuation."""
    i, j = 0, len(word)
    while i < j and is_punct(word[i]):
        i += 1
    while j > i and is_punct(word[j - 1]):
        j -= 1
    if i == j:
        return [("core", word)]
    parts = [("lead", word[:i]), ("core", word[i:j]), ("trail", word[j:])]
    return [(kind, text) for kind, text in parts if text]


@dataclass
class Unit:
    word: int
    kind: str
    text: str
    start: int = 0  # source units: the range of the Inline's text they came from
    end: int = 0


def target_units(translation: str) -> list[Unit]:
    return [
        Unit(w, kind, text)
        for w, word in enumerate(translation.split())
        for kind, text in word_units(word)
    ]
