"""`nmt translate`'s control of the output: the options that force a glossary, take target
prefixes from the input lines, or sample, checked before the model loads where they can be, and
the reading of tab-separated prefixes from input lines (docs/translate.md)."""

from __future__ import annotations

from collections.abc import Sequence

from nmt_cli.decoding.sampling import Sampling
from nmt_cli.runtime.errors import UserError
from nmt_cli.translation.glossary import Glossary, read_glossary, term_tokens


def sampling_of(
    sample: bool, sampling_topk: int, temperature: float, seed: int, *, nbest: int, forcing: bool
) -> Sampling | None:
    """The Sampling `nmt translate --sample` asks for (None: search), or a one-line error for
    an option that cannot apply with it."""
    if not sample and (sampling_topk or temperature != 1.0):
        raise UserError("--sampling-topk and --temperature apply with --sample; add --sample")
    if not sample:
        return None
    if forcing:
        raise UserError(
            "--sample draws freely; it cannot be combined with --glossary or --prefix-tab"
        )
    if nbest > 1:
        raise UserError("--sample gives one translation per line; drop --nbest")
    return Sampling(seed, sampling_topk, temperature)


def command_glossary(path: str | None, translator) -> Glossary | None:
    """The glossary of `nmt translate --glossary TSV`, its terms checked against the model's
    target vocabulary now (one it cannot spell: a one-line error)."""
    if not path:
        return None
    terms = read_glossary(path)
    term_tokens(terms, translator.tokenizer, translator.lowercase)
    return terms


def split_prefixes(lines: Sequence[str], first: int) -> tuple[list[str], list[str]]:
    """`--prefix-tab`: (sources, prefixes) of 'source<TAB>target prefix' lines, ``first`` the
    input line number of the first (a line without a tab has no prefix)."""
    sources, prefixes = [], []
    for number, line in enumerate(lines, first):
        source, tab, prefix = line.partition("\t")
        if tab and "\t" in prefix:
            raise UserError(
                f"--prefix-tab: input line {number} has more than one tab "
                "(expected 'source<TAB>target prefix')"
            )
        sources.append(source)
        prefixes.append(prefix)
    return sources, prefixes
