"""Numbers, digit for digit: every run of digits in a source comes back in its translation.

A model trained on captions rarely saw digits and drops or invents them; so a word with a digit
in it (an integer, ``1,234.50``, ``3.5``, ``12/05/2024``, ``10:30``, ``v2.1``, ``+33``, ``$5``,
``50%``, ``1st``, ``COVID-19``: :data:`NUMBER`) is a protected span (the ``number`` rule of
nmt_cli/documents/protect.py): left out of what the model reads and put back into its
translation by the word alignment, as placeholders are. ``TranslateOptions.numbers`` says how:

- ``keep`` (the default): verbatim;
- ``target``: written in the target language's convention where the source's is certain
  (:func:`number_writer`): ``1,234`` -> ``1 234`` and ``3.5`` -> ``3,5`` in French;
- ``model``: not protected; the model translates them as any word (as before numbers were
  carried).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from nmt_cli.runtime.errors import UserError

NUMBER_STYLES = ("keep", "target", "model")

# Digits with the separators inside numbers between them, with an optional sign or currency
# before, letters glued before (v2, A4, COVID-) or after (1st, 10am, 5km, 1990s), a decimal
# point before where a space or bracket is before it (.5), and a percent sign (printf's %% too)
# or currency sign after; sentence punctuation after it and words after a
# hyphen (3-year-old) are left to the model. It starts after no word character and no point or
# comma that follows one (never inside 1,234 or v2.1), so after an ellipsis (wait...10) it does.
NUMBER = (
    r"(?:(?<![\w+\-−])[+\-−])?(?<!\w)(?<!\w[.,])[$€£¥₹]?(?:[^\W\d_]+-?)?"
    r"(?:(?<![^\s(\[\"'])[.,](?=\d))?\d+(?:[.,:/'’\-]\d+)*[^\W\d_]*(?:%%?|[‰€$£¥₹])?"
)

# Target languages by how they write 1234.5 with its thousands grouped.
_NBSP = "\u00a0"
_CONVENTIONS = {
    **dict.fromkeys(("fr", "ru", "uk", "pl", "cs", "sk", "sv", "fi", "nb", "no"), (_NBSP, ",")),
    **dict.fromkeys(("de", "it", "es", "pt", "nl", "da", "tr", "id", "ro", "el"), (".", ",")),
}
# Source languages whose numbers are written 1,234.5, the form the conversion reads.
_DOT_DECIMAL = frozenset(("en", "zh", "ja", "ko", "hi", "th", "he", "ms"))
_GROUPED = re.compile(r"(\d{1,3}(?:,\d{3})+)(\.\d+)?")
_DECIMAL = re.compile(r"(\d+)\.(\d+)")
_PERCENT = re.compile(r"([\d.,\u00a0]+)%")
_ORDINAL = re.compile(r"(\d+)(st|nd|rd|th)")


def check_style(style: str, what: str = "numbers") -> str:
    """``style`` when it is one of NUMBER_STYLES, else a one-line UserError naming ``what``."""
    if style not in NUMBER_STYLES:
        raise UserError(f"{what}: '{style}' is not one of {', '.join(NUMBER_STYLES)}")
    return style


def _in_convention(number: str, group: str, decimal: str) -> str | None:
    whole = _GROUPED.fullmatch(number)
    if whole:
        fraction = whole[2] or ""
        return whole[1].replace(",", group) + (decimal + fraction[1:] if fraction else "")
    point = _DECIMAL.fullmatch(number)
    if point:
        return point[1] + decimal + point[2]
    return None


def to_target(number: str, source: str | None, target: str | None) -> str:
    """``number`` (a protected span's text) in ``target``'s convention where ``source``
    writes numbers as English does and the form is certain: grouped thousands with an optional
    fraction (``1,234.5``), a decimal fraction (``3.5``), a percentage (``50%``: French puts a
    no-break space before the sign) and, into French, ordinals (``1st`` -> ``1er``, ``2nd`` ->
    ``2e``); anything else (dates, times, versions with two dots, phone numbers, currencies,
    codes) as it is."""
    convention = _CONVENTIONS.get(target or "")
    if convention is None or (source or "en") not in _DOT_DECIMAL:
        return number
    written = _in_convention(number, *convention)
    if written is not None:
        return written
    percent = _PERCENT.fullmatch(number)
    if percent:
        inner = _in_convention(percent[1], *convention) or percent[1]
        return inner + (_NBSP if target == "fr" else "") + "%"
    ordinal = _ORDINAL.fullmatch(number)
    if ordinal and target == "fr":
        return ordinal[1] + ("er" if ordinal[1] == "1" else "e")
    return number


def number_writer(
    style: str, source: str | None, target: str | None
) -> Callable[[str], str] | None:
    """How a protected number is written in the translation under ``style`` (None: verbatim,
    as ``keep`` and ``model`` leave it)."""
    if check_style(style) != "target":
        return None
    return lambda number: to_target(number, source, target)
