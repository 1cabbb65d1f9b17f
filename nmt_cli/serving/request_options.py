"""What a request asks of a served model besides its texts: the model's own glossary (`nmt serve
--glossary`), a request's glossary and prefixes, checked before decoding so that a bad one is a
400, how its capitals and numbers are carried (``restore_case``, ``numbers``), and the
confidence rule of the LibreTranslate route (`--min-confidence`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from nmt_cli.data.tokenizer import normalize
from nmt_cli.documents.numbers import check_style
from nmt_cli.documents.plan import DocumentPlan
from nmt_cli.runtime.errors import UserError
from nmt_cli.serving.models import ServedModel
from nmt_cli.serving.request_body import RequestError
from nmt_cli.translation.contract import TranslateOptions
from nmt_cli.translation.forcing import forced_for_lines
from nmt_cli.translation.glossary import as_glossary, merged, read_glossary, term_tokens


def attach_glossaries(models: Sequence[ServedModel], specs: Sequence[str]) -> None:
    """`nmt serve --glossary [ID=]FILE`: each served model forces its glossary in every request
    (FILE alone: every model's). Terms are checked against each model's vocabulary now."""
    ids = {m.id for m in models}
    for spec in specs:
        target, eq, path = spec.partition("=")
        if not eq or target not in ids:
            target, path = None, spec
        glossary = read_glossary(path)
        for m in models:
            if target is None or m.id == target:
                term_tokens(glossary, m.translator.tokenizer, m.translator.lowercase)
                m.glossary = merged(m.glossary, glossary)


def text_options(body: dict, options: TranslateOptions) -> TranslateOptions:
    """``options`` with a request's ``restore_case`` (true or false, in a form "true" or "false";
    default true: ALL CAPS and Title Case translated in sentence case and given their case back)
    and ``numbers`` (keep, target or model: nmt_cli/documents/numbers.py; default keep); a bad
    value is a 400."""
    restore = body.get("restore_case", options.restore_case)
    if isinstance(restore, str) and restore.lower() in ("true", "false"):  # a form's field
        restore = restore.lower() == "true"
    if not isinstance(restore, bool):
        raise RequestError(400, f"restore_case: expected true or false, got {str(restore)[:40]}")
    numbers = body.get("numbers", options.numbers)
    try:
        check_style(numbers if isinstance(numbers, str) else str(numbers)[:40])
    except UserError as exc:
        raise RequestError(400, str(exc)) from None
    return replace(options, restore_case=restore, numbers=numbers)


def request_forcing(
    model: ServedModel, body: dict, sentences: Sequence[str], options: TranslateOptions
) -> TranslateOptions:
    """``options`` with a /v1/translate request's ``glossary`` (term pairs, or a source-to-target
    object) and ``prefix`` (one per sentence, null for none), checked against ``model`` now:
    an error in the decoding thread would be a 500, a bad term or prefix is a 400."""
    glossary, prefix = body.get("glossary"), body.get("prefix")
    if glossary is None and prefix is None:
        return options
    translator = model.translator
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
        cleaned = [normalize(sentences[i], translator.lowercase) for i in todo]
        forced_for_lines(
            cleaned,
            translator.tokenizer.encode_src(cleaned),
            translator.tokenizer,
            translator.config,
            glossary=merged(model.glossary, glossary),
            prefixes=None if prefix is None else [prefix[i] for i in todo],
            lowercase=translator.lowercase,
        )
    except UserError as exc:
        raise RequestError(400, str(exc)) from None
    return replace(options, glossary=glossary, prefixes=None if prefix is None else tuple(prefix))


def text_confidences(plan: DocumentPlan, results: Sequence, count: int) -> list[float | None]:
    """`--min-confidence`'s rule: each of ``count`` texts' confidence is the lowest of its
    segments' (a text is held back when one of its sentences is unsure; None where nothing was
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
