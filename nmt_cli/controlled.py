"""`nmt translate`'s control of the output: a Translator that applies a glossary, reads
tab-separated target prefixes from its input lines, or samples, on every call, so that the line
streaming (nmt_cli/lines.py) translates as usual."""

from __future__ import annotations

from collections.abc import Sequence

from nmt_cli.errors import UserError


class ControlledTranslator:
    """``translator`` with a glossary, prefixes from the lines or sampling applied to each
    ``translate`` call; everything else is the translator's."""

    def __init__(self, translator, *, glossary=None, prefix_tab=False, sampling=None):
        self.translator, self.glossary = translator, glossary
        self.prefix_tab, self.sampling = prefix_tab, sampling
        self.tokenizer, self.warn, self.config = (
            translator.tokenizer,
            translator.warn,
            translator.config,
        )
        self.lines_before = 0  # for messages naming an input line

    def translate(self, lines: Sequence[str], **kwargs):
        prefixes = None
        if self.prefix_tab:
            sources, prefixes = [], []
            for number, line in enumerate(lines, self.lines_before + 1):
                source, tab, prefix = line.partition("\t")
                if tab and "\t" in prefix:
                    raise UserError(
                        f"--prefix-tab: input line {number} has more than one tab "
                        "(expected 'source<TAB>target prefix')"
                    )
                sources.append(source)
                prefixes.append(prefix)
            lines = sources
        self.lines_before += len(lines)
        return self.translator.translate(
            lines, glossary=self.glossary, prefixes=prefixes, sampling=self.sampling, **kwargs
        )


def controlled_translator(
    translator,
    glossary: str | None,
    prefix_tab: bool,
    sample: bool,
    sampling_topk: int,
    temperature: float,
    seed: int,
    nbest: int,
):
    """The translator `nmt translate` uses for these options (itself when none is given)."""
    from nmt_cli.glossary import read_glossary, term_tokens

    if not sample and (sampling_topk or temperature != 1.0):
        raise UserError("--sampling-topk and --temperature apply with --sample; add --sample")
    if sample and (glossary or prefix_tab):
        raise UserError(
            "--sample draws freely; it cannot be combined with --glossary or --prefix-tab"
        )
    if sample and nbest > 1:
        raise UserError("--sample gives one translation per line; drop --nbest")
    sampling = None
    if sample:
        from nmt_cli.sampling import Sampling

        sampling = Sampling(seed, sampling_topk, temperature)
    terms = None
    if glossary:
        terms = read_glossary(glossary)
        term_tokens(terms, translator.tokenizer, translator.lowercase)  # unspellable: error now
    if terms is None and not prefix_tab and sampling is None:
        return translator
    return ControlledTranslator(
        translator, glossary=terms, prefix_tab=prefix_tab, sampling=sampling
    )
