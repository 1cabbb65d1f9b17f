"""Letter case of whole sentences: ALL CAPS and Title Case, found, undone and made.

A model trained on sentence-case text reads an all-capitals or title-cased sentence as a string
of rare pieces and translates it badly. Two remedies use this module: at translation time
(nmt_cli/translation/translator.py, ``TranslateOptions.restore_case``) a sentence in one of these
cases is translated in sentence case (:func:`sentence_cased`) and its translation given the
source's case again (:func:`recased`); at training time ``data.augment_case`` gives a share of
the training pairs, drawn again each epoch, one of these cases on both sides
(:func:`case_augmented`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

UPPER = "upper"
TITLE = "title"


def _letter_words(text: str) -> list[str]:
    return [w for w in text.split() if any(c.isalpha() for c in w)]


def _capitalised(word: str) -> bool:
    first = next((c for c in word if c.isalpha()), "")
    return first.isupper()


def case_of(text: str) -> str | None:
    """UPPER when every cased letter of ``text`` is a capital and at least two of its words
    have letters, one of them two or more (an acronym alone is not a sentence in capitals);
    TITLE when it has at least three words with letters and each begins with a capital (a
    heading with lowercase small words is left as it is); else None."""
    words = _letter_words(text)
    if len(words) < 2:
        return None
    cased = [c for c in text if c.isupper() or c.islower()]
    if cased and all(c.isupper() for c in cased):
        if any(sum(c.isalpha() for c in w) >= 2 for w in words):
            return UPPER
        return None
    if len(words) >= 3 and all(_capitalised(w) for w in words):
        return TITLE
    return None


def _first_up(text: str) -> str:
    """``text`` with its first letter a capital."""
    for i, c in enumerate(text):
        if c.isalpha():
            return text[:i] + c.upper() + text[i + 1 :]
    return text


def _acronym(word: str) -> bool:
    letters = [c for c in word if c.isalpha()]
    return len(letters) >= 2 and all(c.isupper() for c in letters)


def sentence_cased(text: str, case: str | None) -> str:
    """``text`` (in ``case``, as :func:`case_of` found it) as a sentence is written: lowercase
    but its first letter; under TITLE an all-capitals word (an acronym) keeps its capitals.
    None: ``text`` as it is."""
    if case == UPPER:
        return _first_up(text.lower())
    if case == TITLE:
        words = text.split(" ")
        return _first_up(" ".join(w if _acronym(w) else w.lower() for w in words))
    return text


def title_cased(text: str) -> str:
    """Every whitespace word of ``text`` with its first letter a capital, the rest as it is."""
    return " ".join(_first_up(w) for w in text.split(" "))


def recased(text: str, case: str | None) -> str:
    """A translation given its source's ``case``: all capitals (UPPER), each word capitalised
    (TITLE), or as it is (None)."""
    if case == UPPER:
        return text.upper()
    if case == TITLE:
        return title_cased(text)
    return text


def case_augmented(
    src: Sequence[str], tgt: Sequence[str], share: float, seed: int, epoch: int
) -> tuple[list[str], list[str]]:
    """``data.augment_case``: the pairs with a ``share`` of them, drawn anew for each
    (``seed``, ``epoch``), written in one case on both sides, half of them all capitals and
    half title case; the others as they are."""
    src, tgt = list(src), list(tgt)
    if share <= 0 or not src:
        return src, tgt
    rng = np.random.default_rng([seed, epoch, 7])
    chosen = np.flatnonzero(rng.random(len(src)) < share)
    upper = rng.random(len(chosen)) < 0.5
    for row, up in zip(chosen.tolist(), upper.tolist()):
        change = str.upper if up else title_cased
        src[row], tgt[row] = change(src[row]), change(tgt[row])
    return src, tgt
