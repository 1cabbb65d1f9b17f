"""Segments with nothing to translate: no word in them, only digits, symbols, punctuation,
emoticons, a markdown code fence or a rule such as ``---``. A model given one invents a
sentence (``12345`` became a sentence about food), so the document layer
(nmt_cli/documents/plan.py) keeps such a segment as it was instead of translating it."""

from __future__ import annotations

import re

# Emoticons written with letters, as whitespace words: :D :P ;-) XD xD <3 ^_^ o_O ¯\_(ツ)_/¯
_EMOTICON = re.compile(
    r"[:;=8][-o^'’]?[()\[\]DPpOo3/\\|*$@]+|[xX][Dd]+|<3+|\^_*\^|[oO0-]_[oO0-]|¯\\_\(ツ\)_/¯"
)
# A markdown code fence: ``` or ~~~, with an optional language name.
_FENCE = re.compile(r"(`{3,}|~{3,})\s*[\w+#.-]*")


def has_words(text: str) -> bool:
    """Whether ``text`` has a letter to translate outside emoticons and code fences."""
    stripped = text.strip()
    if _FENCE.fullmatch(stripped):
        return False
    return any(
        any(c.isalpha() for c in word) and not _EMOTICON.fullmatch(word)
        for word in stripped.split()
    )
