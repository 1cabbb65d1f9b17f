"""Spans of a text that must come out of a translation exactly as they went in.

A :class:`Protector` finds them: placeholders of the common message formats, URLs, e-mail
addresses, numbers (nmt_cli/documents/numbers.py), patterns the user gives, and, when it knows
the model's vocabulary, runs of characters the vocabulary lacks (emoji, a script the model never
saw). Every rule is listed in docs/markup.md#protected-spans. The spans are kept out of what the
model reads and put back into its translation by the word alignment
(nmt_cli/documents/inline.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from nmt_cli.documents.numbers import NUMBER
from nmt_cli.runtime.errors import UserError

# The built-in rules, in the order docs/markup.md lists them. Where two matches overlap, the one
# starting first wins, then the longer one.
BUILT_IN: dict[str, str] = {
    # https://example.com/page?id=42, ftp://host/file, www.example.com/x, in any case
    # (HTTPS://EXAMPLE.COM in a line of capitals); trailing sentence punctuation is not part of
    # the address
    "url": r"(?:\b(?i:https?|ftp)://|\b(?i:www)\.)[^\s<>\"'\]\[{}]*[^\s<>\"'\]\[{}.,;:!?)]",
    # a.name+tag@example.co.uk
    "email": r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,}\b",
    # Jinja, Django, Handlebars, Angular: {{ user }}, {% if x %}, {# note #}
    "template": r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}",
    # Python str.format, .NET, ICU simple arguments: {name}, {0}, {0:.2f}, {user.name!r}
    "brace": r"\{[A-Za-z_0-9][\w.\[\]]*(?:![rsa])?(?::[^{}\s]*)?\}|\{\}",
    # printf and Python %-formatting: %s, %d, %5.2f, %1$s, %(count)d, %ld, %@, %%, also back to
    # back (%s%s, %d%%); not the second half of a %%
    "printf": r"(?<!%)%(?:\([\w.-]+\)|\d+\$)?[-+#0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?"
    r"(?:hh|h|ll|l|L|q|j|z|t)?[diouxXeEfFgGcrsaA@%]",
    # Weblate's markers for the placeholders it hides from machine translation: [X12X]
    "weblate": r"\[X\d+X\]",
    # shell and template variables: $HOME, ${user_name}
    "variable": r"\$\{[^{}\s]+\}|\$[A-Za-z_][A-Za-z0-9_]*",
    # a word with a digit: 3, 1,234.50, 12/05/2024, 10:30, v2.1, $5, 50%, 1st (numbers.py)
    "number": NUMBER,
}


def _compile(pattern: str, what: str) -> re.Pattern:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise UserError(f"{what} {pattern!r}: not a valid regular expression ({exc})") from None


class Protector:
    """Finds the spans to keep verbatim: the built-in rules (:data:`BUILT_IN`), then ``patterns``
    (regular expressions, Python syntax; a bad one is a UserError naming it), then, with a
    ``vocabulary`` (a SentencePiece processor or an nmt Tokenizer, whose source side is used),
    every run of characters that vocabulary encodes only as unknown (``lowercase``: as the model
    reads them, lowercased, for a model trained with data.lowercase). ``builtin=False`` keeps
    only the user's patterns and the vocabulary's gaps; ``numbers=False`` every rule but
    ``number`` (numbers left to the model)."""

    def __init__(
        self,
        patterns: Sequence[str] = (),
        *,
        vocabulary=None,
        builtin: bool = True,
        lowercase: bool = False,
        numbers: bool = True,
    ) -> None:
        if isinstance(patterns, str):
            patterns = [patterns]
        rules = [
            _compile(p, f"built-in rule {name}")
            for name, p in BUILT_IN.items()
            if numbers or name != "number"
        ]
        self.rules = (rules if builtin else []) + [_compile(p, "protect pattern") for p in patterns]
        self.patterns = list(patterns)
        self.vocabulary = getattr(vocabulary, "src", vocabulary)
        self.lowercase = lowercase
        self._known: dict[str, bool] = {}

    def _unknown(self, char: str) -> bool:
        """Whether the vocabulary encodes ``char`` only with its unknown piece."""
        known = self._known.get(char)
        if known is None:
            sp = self.vocabulary
            unk = sp.unk_id()
            read = char.lower() if self.lowercase else char
            known = char.isspace() or unk not in sp.encode(read)
            self._known[char] = known
        return not known

    def unknown_runs(self, text: str) -> list[tuple[int, int]]:
        """Runs of characters the vocabulary lacks (none without a vocabulary)."""
        if self.vocabulary is None:
            return []
        runs: list[tuple[int, int]] = []
        start = None
        for i, char in enumerate(text):
            if self._unknown(char):
                if start is None:
                    start = i
            elif start is not None:
                runs.append((start, i))
                start = None
        if start is not None:
            runs.append((start, len(text)))
        return runs

    def find(self, text: str) -> list[tuple[int, int]]:
        """Character spans [start, end) to keep verbatim, sorted and not overlapping: where
        matches overlap, the one starting first wins, then the longest."""
        found = [
            (m.start(), m.end()) for rule in self.rules for m in rule.finditer(text) if m.end() > 0
        ]
        found = [(s, e) for s, e in found if e > s] + self.unknown_runs(text)
        found.sort(key=lambda span: (span[0], -span[1]))
        spans: list[tuple[int, int]] = []
        for start, end in found:
            if spans and start < spans[-1][1]:
                continue
            spans.append((start, end))
        return spans
