"""From corrections to training pairs: the suggestions a server took (nmt_cli/serving/
suggestions.py) checked one by one, the usable ones kept (`nmt suggestions export`, ``list``).

What users send includes garbage (keyboard mashing, the source pasted back, another language), so
a suggestion is dropped, for the first of these reasons that holds:

- ``duplicate``: a newer suggestion for the same sentence (whitespace-normalised) exists; the
  newest is the one the server answers with, and the one kept;
- ``untranslated copy``: its translation is its source, up to case and whitespace;
- ``repeated characters``: a letter four times in a row, or a word three times in a row;
- ``length ratio``: one side has more than ``max_ratio`` times the words of the other (the rule
  training's ``data.max_ratio`` applies);
- ``not in the target language``: the service's language identifier
  (nmt_cli/serving/language_id.py), choosing among LibreTranslate's languages and the pair's,
  puts another language first. Texts under ``MIN_IDENTIFIED_CHARS`` characters are not judged:
  the identifier is unsure of them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from nmt_cli.documents.recall import memory_key
from nmt_cli.serving.language_id import LanguageIdentifier
from nmt_cli.serving.libretranslate import LANGUAGE_NAMES
from nmt_cli.serving.suggestions import Suggestion

MIN_IDENTIFIED_CHARS = 20
REPEATED = re.compile(r"([^\W\d_])\1{3,}|\b(\w+)(?:\s+\2\b){2,}", re.IGNORECASE)
REASONS = (
    "duplicate",
    "untranslated copy",
    "repeated characters",
    "length ratio",
    "not in the target language",
)


@dataclass
class Verdict:
    """A suggestion and why it was dropped (None: kept)."""

    suggestion: Suggestion
    dropped: str | None


@dataclass
class Tally:
    """How many suggestions were read, kept and dropped by reason."""

    read: int = 0
    kept: int = 0
    dropped: Counter = field(default_factory=Counter)

    def add(self, verdict: Verdict) -> None:
        self.read += 1
        if verdict.dropped is None:
            self.kept += 1
        else:
            self.dropped[verdict.dropped] += 1

    def lines(self, what: str) -> list[str]:
        """The counts as `nmt preprocess` prints a corpus's."""
        out = [f"{what}: {self.read} read, {self.kept} kept, {self.read - self.kept} dropped"]
        out += [f"  dropped {self.dropped[r]}: {r}" for r in REASONS if self.dropped[r]]
        return out


class SuggestionFilter:
    """The checks above, for suggestions of any pairs; ``max_ratio``: the length ratio rule's."""

    def __init__(self, max_ratio: float = 3.0):
        self.max_ratio = max_ratio
        self._identifiers: dict[tuple[str, str], LanguageIdentifier] = {}

    def verdicts(self, suggestions: Iterable[Suggestion]) -> Iterator[Verdict]:
        """Each suggestion with its verdict, in the order given; the newest of those for one
        sentence (the largest id) is the one that is not a duplicate."""
        items = list(suggestions)
        newest: dict[tuple[str, str, str], int] = {}
        for s in items:
            key = (s.source, s.target, memory_key(s.q))
            newest[key] = max(newest.get(key, s.id), s.id)
        for s in items:
            if newest[(s.source, s.target, memory_key(s.q))] != s.id:
                yield Verdict(s, "duplicate")
            else:
                yield Verdict(s, self.reason(s))

    def reason(self, s: Suggestion) -> str | None:
        """Why ``s`` is no training pair (the first reason that holds), None if it is one."""
        q, t = memory_key(s.q), memory_key(s.s)
        if q.casefold() == t.casefold():
            return "untranslated copy"
        if REPEATED.search(t):
            return "repeated characters"
        words_q, words_t = len(q.split()), len(t.split())
        if max(words_q, words_t) > self.max_ratio * min(words_q, words_t):
            return "length ratio"
        if len(t) >= MIN_IDENTIFIED_CHARS and self._language(s, t) != s.target:
            return "not in the target language"
        return None

    def _language(self, s: Suggestion, text: str) -> str:
        pair = (s.source, s.target)
        if pair not in self._identifiers:
            self._identifiers[pair] = LanguageIdentifier([*LANGUAGE_NAMES, *pair])
        return self._identifiers[pair].detect(text)[0][0]


def training_line(s: Suggestion) -> str:
    """A kept suggestion as a line of a source<TAB>target file (``data.format: tsv``): each
    side on one line, its whitespace runs one space."""
    return f"{memory_key(s.q)}\t{memory_key(s.s)}\n"
