"""Decoding lines with forced terms and prefixes: what each line must carry (from a glossary's
matches and the given prefixes), and the two passes of decoding (nmt_cli/decoding/constraints.py
has the search itself).

Sentences without a prefix are first decoded as they would be without anything forced, in the
same batches, so that a sentence with no term comes out byte-identical; a sentence whose
translation already carries its terms keeps it. The others (a prefix, or a term missing) go
through the constrained search, and a sentence whose terms found no place under its attention
rule tries once more without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from nmt_cli.data.tokenizer import normalize
from nmt_cli.decoding.batches import output_vocabulary, padded_sources
from nmt_cli.decoding.constraints import Forced, constrained_beam_search, continuation_pieces
from nmt_cli.decoding.settings import SearchSettings
from nmt_cli.decoding.steps import Hypothesis
from nmt_cli.runtime.errors import UserError
from nmt_cli.translation.glossary import as_glossary, required_terms, term_tokens

# Sentences a constrained batch when decode.batch_size is 0: its candidates and term states grow
# with the batch, so it takes fewer than plain beam search's batches
FORCED_BATCH = 32


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
    if prefixes is not None and len(prefixes) != len(texts):
        raise UserError(f"prefixes: {len(prefixes)} given for {len(texts)} lines")
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


def forced_decode_ids(
    model,
    sources: Sequence[Sequence[int]],
    forced: Sequence[Forced],
    config,
    device,
    *,
    shortlist=None,
    nbest: int = 1,
    attention: bool = False,
    plain,
    warn=None,
    language=None,
) -> list[list[Hypothesis]]:
    """``plain`` decoding (translate.decode_ids) for every sentence without a prefix, in the
    batches it would have without ``forced``; then the constrained search for the sentences
    with a prefix and for those whose plain translation misses a term, length-sorted in batches
    of ``config.batch_size`` (or FORCED_BATCH). A sentence whose terms do not fit under
    its length cap keeps its plain translation (``warn`` says how many)."""
    free = [i for i, f in enumerate(forced) if not f.prefix]
    results: list[list[Hypothesis]] = [[] for _ in sources]
    if free:
        for i, hyps in zip(free, plain([sources[i] for i in free])):
            results[i] = hyps
    todo = [
        i
        for i, f in enumerate(forced)
        if f.prefix or (f.terms and not (results[i] and f.satisfied_by(results[i][0].tokens)))
    ]
    todo.sort(key=lambda i: -len(sources[i]))
    size = config.batch_size if config.batch_size > 0 else FORCED_BATCH
    use_shortlist = shortlist if config.shortlist else None
    beam = max(config.beam_size, 2)
    settings = replace(
        SearchSettings.of(config, nbest=min(nbest, beam), attention=attention), beam_size=beam
    )
    for placement in (True, False):
        for start in range(0, len(todo), size):
            batch = todo[start : start + size]
            src, src_lengths = padded_sources(sources, batch)
            vocab = output_vocabulary(use_shortlist, language, src, src_lengths, config, device)
            hyps = constrained_beam_search(
                model,
                src.to(device),
                src_lengths,
                [forced[i] for i in batch],
                settings,
                vocab=vocab,
                placement=placement,
            )
            for i, h in zip(batch, hyps):
                if h:
                    results[i] = h
        # a sentence whose terms found no place under the attention rule tries without it
        todo = [
            i for i in todo if not (results[i] and forced[i].satisfied_by(results[i][0].tokens))
        ]
        if not todo:
            break
    if todo and warn is not None:
        warn(
            f"warning: {len(todo)} sentence(s) could not fit their forced terms under the length "
            "cap and keep their unforced translation"
        )
    return results
