"""What each line must carry when it is decoded: the target terms of a glossary's matches, each
tied to the source words it translates, and a given target prefix, as the constrained search's
:class:`~nmt_cli.decoding.constraints.Forced` (nmt_cli/decoding/forced.py decodes them)."""

from __future__ import annotations

from collections.abc import Sequence

from nmt_cli.data.tokenizer import UNK, normalize
from nmt_cli.decoding.constraints import Forced, continuation_pieces
from nmt_cli.runtime.errors import UserError
from nmt_cli.translation.glossary import as_glossary, required_terms, term_tokens


def check_prefixes(prefixes: Sequence[str | None] | None, count: int, what: str = "lines"):
    """A UserError where ``prefixes`` are given but not one for each of ``count`` ``what``."""
    if prefixes is not None and len(prefixes) != count:
        raise UserError(f"prefixes: {len(prefixes)} given for {count} {what}")


def forced_for_lines(
    texts: Sequence[str],
    src_ids: Sequence[Sequence[int]],
    tokenizer,
    config,
    *,
    glossary=None,
    prefixes: Sequence[str | None] | None = None,
    lowercase: bool = False,
) -> list[Forced] | None:
    """Each line's Forced from a glossary (its terms found in the normalised line ``texts``) and
    ``prefixes`` (one per line, None or "" for none); None when nothing is forced. A prefix that
    does not fit under its line's length cap is an error naming the line."""
    glossary = as_glossary(glossary)
    check_prefixes(prefixes, len(texts))
    if not glossary and not (prefixes and any(prefixes)):
        return None
    tokens = term_tokens(glossary, tokenizer, lowercase) if glossary else {}
    continuations = continuation_pieces(tokenizer) if glossary else None
    out = []
    for i, text in enumerate(texts):
        terms, sources = [], []
        if glossary:
            where = _term_sources(glossary.matches(text), text, tokenizer.src_pieces(src_ids[i]))
            for target in required_terms(list(where), tokens):
                terms.append(tokens[target])
                sources.append(sorted(where[target]))
        prefix: list[int] = []
        if prefixes and prefixes[i]:
            prefix = tokenizer.encode_tgt([normalize(prefixes[i], lowercase)])[0]
            if UNK in prefix:
                raise UserError(
                    f"prefix of line {i + 1}: the target vocabulary cannot spell "
                    f"'{prefixes[i]}' (a placeholder or a character it lacks)"
                )
            cap = int(max(len(src_ids[i]), 1) * config.max_len_ratio) + config.max_len_const
            if len(prefix) >= cap:
                raise UserError(
                    f"prefix of line {i + 1}: {len(prefix)} pieces, but its translation may "
                    f"have at most {cap} (decode.max_len_ratio x source + decode.max_len_const)"
                )
        out.append(Forced(terms, prefix, continuations, sources))
    return out


def _term_sources(matches, text: str, pieces: Sequence[str]) -> dict[str, set[int]]:
    """Each required target term's source positions: the pieces of the words its source term
    matched (a piece belongs to the word its last "▁" began)."""
    word_of, word = [], -1
    for piece in pieces:
        word += piece.startswith("\u2581") or word < 0
        word_of.append(word)
    where: dict[str, set[int]] = {}
    for start, end, term in matches:
        first = len(text[:start].split())
        last = first + len(text[start:end].split())
        spots = {p for p, w in enumerate(word_of) if first <= w < last}
        where.setdefault(term.target, set()).update(spots)
    return where
