"""`nmt translate`'s control of the output: a Translator that applies a glossary, reads
tab-separated target prefixes from its input lines, or samples, on every call, so that the line
streaming (nmt_cli/translation/lines.py) translates as usual."""

from __future__ import annotations

import re
from collections.abc import Sequence

from nmt_cli.runtime.errors import UserError


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

    def __getattr__(self, name: str):
        """Everything but ``translate`` (recipe, routing, lowercase...) is the translator's, so
        the document layer and the line streaming read this one as they read a Translator."""
        return getattr(self.translator, name)

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
        before = self.lines_before
        self.lines_before += len(lines)
        try:
            return self.translator.translate(
                lines, glossary=self.glossary, prefixes=prefixes, sampling=self.sampling, **kwargs
            )
        except UserError as exc:  # name the input line, not the line of this chunk
            message = re.sub(
                r"^prefix of line (\d+)",
                lambda m: f"--prefix-tab: input line {int(m[1]) + before}",
                str(exc),
            )
            raise UserError(message) from None


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
    from nmt_cli.translation.glossary import read_glossary, term_tokens

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
        from nmt_cli.decoding.sampling import Sampling

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


# ---------------------------------------------------------------------- nmt serve


def attach_glossaries(models, specs: Sequence[str]) -> None:
    """`nmt serve --glossary [ID=]FILE`: each served model forces its glossary in every request
    (FILE alone: every model's). Terms are checked against each model's vocabulary now."""
    from nmt_cli.translation.glossary import merged, read_glossary, term_tokens

    ids = {m.id for m in models}
    for spec in specs:
        target, eq, path = spec.partition("=")
        if not eq or target not in ids:
            target, path = None, spec
        glossary = read_glossary(path)
        for m in models:
            if target is None or m.id == target:
                term_tokens(glossary, m.translator.tokenizer, m.translator.lowercase)
                m.translator.glossary = merged(m.translator.glossary, glossary)


def request_translator(translator, body: dict, sentences: Sequence[str]):
    """The translator for one /v1/translate request: ``translator`` itself, or, with a
    ``glossary`` (term pairs, or a source-to-target object) or ``prefix`` (one per sentence,
    null for none) in the body, one that forces them. Bad terms or prefixes: a 400."""
    from nmt_cli.data.tokenizer import normalize
    from nmt_cli.decoding.forced import forced_for_lines
    from nmt_cli.serving.request_body import RequestError
    from nmt_cli.translation.glossary import as_glossary, merged

    glossary, prefix = body.get("glossary"), body.get("prefix")
    if glossary is None and prefix is None:
        return translator
    try:
        if isinstance(glossary, str):
            raise UserError("glossary: give term pairs or an object, not a string")
        glossary = as_glossary(glossary, "glossary")
        if prefix is not None and (
            not isinstance(prefix, list)
            or len(prefix) != len(sentences)
            or not all(p is None or isinstance(p, str) for p in prefix)
        ):
            raise UserError(
                f"prefix: expected a list of {len(sentences)} strings or nulls, one per sentence"
            )
        todo = [i for i, line in enumerate(sentences) if line.strip()]
        prefixes = None if prefix is None else [prefix[i] for i in todo]
        cleaned = [normalize(sentences[i], translator.lowercase) for i in todo]
        forced_for_lines(  # checked here: an error in the decoding thread would be a 500
            cleaned,
            translator.tokenizer.encode_src(cleaned),
            translator.tokenizer,
            translator.config,
            glossary=merged(translator.glossary, glossary),
            prefixes=prefixes,
            lowercase=translator.lowercase,
        )
    except UserError as exc:
        raise RequestError(400, str(exc)) from None
    return RequestTranslator(translator, glossary, prefixes)


class RequestTranslator:
    """One request's glossary and prefixes (its non-empty sentences', in order) over a
    Translator, for the service's batcher, which decodes it on its own."""

    def __init__(self, translator, glossary, prefixes):
        self.translator, self.glossary, self.prefixes = translator, glossary, prefixes
        self.tokenizer, self.config = translator.tokenizer, translator.config

    def translate(self, lines, **kwargs):
        return self.translator.translate(
            lines, glossary=self.glossary, prefixes=self.prefixes, **kwargs
        )


def text_confidences(plan, results: Sequence, count: int) -> list[float | None]:
    """Each of ``count`` texts' confidence: the lowest of its segments' (None where nothing was
    translated), from the Translations of ``plan``'s segments."""
    out = []
    for i in range(count):
        found = [
            results[s].confidence
            for s in plan.segments_of(i)
            if results[s] is not None and results[s].confidence is not None
        ]
        out.append(round(min(found), 4) if found else None)
    return out


def hold_back(
    texts: Sequence[str], translated: Sequence[str], confidences: Sequence, threshold: float
) -> tuple[list[str], list[bool]]:
    """`nmt serve --min-confidence`: each text whose confidence is below ``threshold`` comes back
    as it was sent, the others translated; which texts were held back."""
    low = [c is not None and c < threshold for c in confidences]
    return [t if held else tr for t, tr, held in zip(texts, translated, low)], low
