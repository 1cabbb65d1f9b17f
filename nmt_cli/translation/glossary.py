"""Glossaries: source terms and the target terms their translations must carry.

A glossary file has one term pair a line, ``source term<TAB>target term``; blank lines and lines
starting with ``#`` are skipped. Terms may be several words. The rules (docs/translate.md):

- A source term matches whole words, case-insensitively, with any run of spaces between its
  words. The target term is forced as written, in its case (lowercased for a model trained on
  lowercased text).
- Overlapping matches: the longest source term wins, then the leftmost; a word belongs to one
  match at most. ("New York" and "York" in "New York taxis": only "New York".)
- The same source term with two different target terms is an error naming both lines; the same
  pair twice is kept once.
- A target term is required once per sentence, however often its source term occurs; a target
  term that is whole words of another required one in the same sentence is covered by it.
- A target term with characters the target vocabulary cannot spell is an error naming it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from nmt_cli.data.tokenizer import UNK, normalize
from nmt_cli.runtime.errors import UserError


@dataclass(frozen=True)
class Term:
    source: str
    target: str
    where: str  # the file and line, or the request's place, for messages


class Glossary:
    """Term pairs, matched in source sentences by the module's rules."""

    def __init__(self, terms: Iterable[Term]):
        by_key: dict[str, Term] = {}
        for term in terms:
            key = _key(term.source)
            if not key or not term.target.strip():
                raise UserError(f"{term.where}: a glossary term is empty")
            seen = by_key.get(key)
            if seen is not None and seen.target != term.target:
                raise UserError(
                    f"{term.where}: '{term.source}' already maps to '{seen.target}' "
                    f"({seen.where}); give each source term one target term"
                )
            by_key.setdefault(key, term)
        self.terms = list(by_key.values())
        self._by_key = by_key
        # longest first, so that at one position the longer source term wins
        ordered = sorted(self.terms, key=lambda t: -len(_key(t.source)))
        alternatives = "|".join(_pattern(t.source) for t in ordered)
        self._regex = (
            re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", re.IGNORECASE) if ordered else None
        )

    def __len__(self) -> int:
        return len(self.terms)

    def matches(self, sentence: str) -> list[tuple[int, int, Term]]:
        """The non-overlapping matches in ``sentence``: (start, end, term), left to right, the
        longest source term winning where several start at one place."""
        if self._regex is None:
            return []
        found = []
        for hit in self._regex.finditer(sentence):
            term = self._by_key.get(_key(hit.group(0)))
            if term is not None:  # None: a match only the regex's case rules make
                found.append((hit.start(), hit.end(), term))
        return found

    def targets(self, sentence: str) -> list[str]:
        """The target terms ``sentence`` requires, in order of first occurrence, each once."""
        out: list[str] = []
        for _, _, term in self.matches(sentence):
            if term.target not in out:
                out.append(term.target)
        return out


def _key(text: str) -> str:
    return " ".join(text.split()).casefold()


def _pattern(source: str) -> str:
    return r"\s+".join(re.escape(word) for word in source.split())


def read_glossary(path: str | os.PathLike) -> Glossary:
    """A glossary file (module doc); a malformed line is an error naming the file and line."""
    try:
        with open(path, encoding="utf-8-sig") as fh:
            lines = fh.read().splitlines()
    except OSError as exc:
        raise UserError(f"{path}: cannot read the glossary ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: the glossary is not UTF-8 text") from None
    terms = []
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 2 or not fields[0].strip() or not fields[1].strip():
            raise UserError(
                f"{path}:{number}: expected 'source term<TAB>target term', got {line[:60]!r}"
            )
        terms.append(Term(fields[0].strip(), fields[1].strip(), f"{path}:{number}"))
    return Glossary(terms)


def as_glossary(value, where: str = "glossary") -> Glossary | None:
    """A Glossary from what the API and /v1/translate accept: a Glossary, a mapping of source
    to target terms, a list of [source, target] pairs, or a path to a glossary file."""
    if value is None or isinstance(value, Glossary):
        return value
    if isinstance(value, (str, os.PathLike)):
        return read_glossary(value)
    if isinstance(value, Mapping):
        pairs = list(value.items())
    elif isinstance(value, Sequence):
        pairs = list(value)
    else:
        raise UserError(f"{where}: give source-target term pairs")
    terms = []
    for i, pair in enumerate(pairs):
        if (
            not isinstance(pair, (list, tuple))
            or len(pair) != 2
            or not all(isinstance(x, str) for x in pair)
        ):
            raise UserError(f"{where}[{i}]: a term pair is [source term, target term]")
        terms.append(Term(pair[0].strip(), pair[1].strip(), f"{where}[{i}]"))
    return Glossary(terms)


def term_tokens(glossary: Glossary, tokenizer, lowercase: bool = False) -> dict[str, list[int]]:
    """Each target term as the target vocabulary's pieces; an error names a term it cannot
    spell (a piece that is the unknown piece)."""
    targets = [t.target for t in glossary.terms]
    encoded = tokenizer.encode_tgt([normalize(t, lowercase) for t in targets])
    out = {}
    for term, target, ids in zip(glossary.terms, targets, encoded):
        if not ids or UNK in ids:
            raise UserError(f"{term.where}: the target vocabulary cannot spell the term '{target}'")
        out[target] = ids
    return out


def required_terms(targets: Sequence[str], tokens: Mapping[str, list[int]]) -> list[str]:
    """The target terms to force among ``targets``: each spelling once, without those that are
    whole words of another one ("bleue" within "chemise bleue", not "avion" within "avions")."""
    kept: list[str] = []
    for target in targets:
        if all(tokens[target] != tokens[other] for other in kept):
            kept.append(target)
    return [
        t
        for t in kept
        if not any(
            o != t and re.search(rf"(?<!\w){re.escape(t)}(?!\w)", o) is not None for o in kept
        )
    ]


def merged(base: Glossary | None, extra) -> Glossary | None:
    """``base``'s terms with ``extra``'s (anything ``as_glossary`` reads) over them: where both
    have a source term, ``extra``'s target term wins."""
    extra = as_glossary(extra)
    if base is None or extra is None:
        return extra if base is None else base
    overridden = {_key(t.source) for t in extra.terms}
    return Glossary([t for t in base.terms if _key(t.source) not in overridden] + extra.terms)
