"""Translating lines: text to token ids, decoding (nmt_cli/decoding/decode.py), ids to text.

N lines in give N lines out, in order. An empty (or all-whitespace) line gives an empty line
without touching the model. Lines longer than the model's source limit are cut to it, with one
warning. The decoding settings are the recipe's ``decode`` section (:class:`DecodeConfig`), with
a call's changes laid over it (:class:`nmt_cli.translation.contract.TranslateOptions`, which also
carries everything else one call asks for). Whole texts go through the document layer
(nmt_cli/documents/layer.py, ``translate_texts``); reading and writing line streams is
nmt_cli/documents/lines.py.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from nmt_cli.config.sections import DecodeConfig, Recipe, override
from nmt_cli.data.batches import collate
from nmt_cli.data.casing import case_of, recased, sentence_cased
from nmt_cli.data.tokenizer import Tokenizer, normalize
from nmt_cli.decoding.decode import decode_ids
from nmt_cli.decoding.language_vocabulary import LanguageVocabularies
from nmt_cli.decoding.search import Hypothesis
from nmt_cli.decoding.shortlist import Shortlist, merge_shortlists
from nmt_cli.model.ensemble import Ensemble
from nmt_cli.model.fast_decoding import prepare_for_decoding
from nmt_cli.model.quantize import quantize_int8
from nmt_cli.packages.loading import load_any
from nmt_cli.runtime.device import pick_device, resolve_decode_precision
from nmt_cli.runtime.errors import UserError
from nmt_cli.runtime.memory import bound_primitive_cache
from nmt_cli.translation.confidence import confidence_of
from nmt_cli.translation.contract import TranslateOptions, check_texts
from nmt_cli.translation.forcing import check_prefixes, forced_for_lines
from nmt_cli.translation.glossary import as_glossary
from nmt_cli.translation.results import Alternative, Translation
from nmt_cli.translation.routing import Route, Routing
from nmt_cli.translation.words import aligned_words, word_attention

__all__ = ["Alternative", "TranslateOptions", "Translation", "Translator", "load_translator"]

MAX_SOURCE_TOKENS = 250


@dataclass
class _Encoded:
    """A call's lines as the model reads them: source ids (the direction's tokens first, cut at
    the source limit), which were cut, and how many direction tokens lead each."""

    cleaned: list[str]
    ids: list[list[int]]
    truncated: list[bool]
    tags: int


class Translator:
    """Lines in, translations out, with one model (or several averaged in log space); it fulfils
    :class:`nmt_cli.translation.contract.Translating`.

    The Python API: ``Translator.load("runs/en-fr").translate(["A dog runs."])`` gives one
    :class:`Translation` per line with the recipe's decoding settings, as `nmt translate` writes
    it. ``config`` is the decoding configuration, ``shortlist`` the model's vocabulary shortlist
    (None: the model has none), ``languages`` a multilingual model's pieces per target language
    (nmt_cli/decoding/language_vocabulary.py), ``recipe`` and ``checkpoint`` where the model
    came from.
    """

    def __init__(
        self,
        model,
        tokenizer: Tokenizer,
        config: DecodeConfig | None = None,
        device="cpu",
        *,
        shortlist: Shortlist | None = None,
        languages: LanguageVocabularies | None = None,
        max_source_tokens: int = MAX_SOURCE_TOKENS,
        warn: Callable[[str], None] | None = None,
        lowercase: bool = False,
        recipe: Recipe | None = None,
        checkpoint: os.PathLike | None = None,
    ):
        self.model, self.tokenizer, self.device = model, tokenizer, device
        self.config = config if config is not None else DecodeConfig()
        self.shortlist = shortlist
        self.languages = languages  # a multilingual model's pieces per target language
        self.lowercase = lowercase  # the model was trained on lowercased text (data.lowercase)
        self.max_source_tokens = max_source_tokens
        self.warn = warn or (lambda msg: print(msg, file=sys.stderr))
        self.recipe, self.checkpoint = recipe, checkpoint
        self._warned_cut = False  # the cut-line warning is given once per translator

    @functools.cached_property
    def routing(self) -> Routing:
        """The model's directions and how a request picks one (nmt_cli/translation/routing.py)."""
        return Routing(self.recipe)

    @property
    def directions(self) -> list[str]:
        """The directions the model was trained on (``en-fr``); a multilingual model also
        translates its ``zero_shot_directions``."""
        return self.routing.directions

    @property
    def zero_shot_directions(self) -> list[str]:
        return self.routing.zero_shot

    @property
    def multilingual(self) -> bool:
        return self.routing.multilingual

    def language_pieces(self, route: Route | None, config: DecodeConfig):
        """The pieces a translation along ``route`` may use (decode.language_vocabulary), or
        None: every piece."""
        if route is None or self.languages is None or not config.language_vocabulary:
            return None
        return self.languages.of(route.target)

    @property
    def precision(self) -> str:
        """bf16 where the model's weights are (``decode.precision``), else fp32."""
        first = next(self.model.parameters(), None)
        return "bf16" if first is not None and first.dtype == torch.bfloat16 else "fp32"

    @classmethod
    def load(
        cls,
        model: str | os.PathLike | Sequence[str | os.PathLike],
        *,
        device: str = "auto",
        quantize: str = "none",
        threads: int | None = None,
        **decode: Any,
    ) -> Translator:
        """A Translator for a run dir, checkpoint file, package (``NAME.nmt``) or installed
        model's name (a list of them: their ensemble).
        ``decode``: recipe ``decode`` keys (``beam_size=3``, ``shortlist=False``...) laid over the
        first model's recipe, None keeping its value; ``threads``: CPU threads torch may use;
        ``device`` and ``quantize`` as :func:`load_translator`'s."""
        models = [model] if isinstance(model, (str, os.PathLike)) else list(model)
        if threads is not None:
            if threads < 1:
                raise UserError(f"threads: {threads} is not a positive number of threads")
            torch.set_num_threads(threads)
        return load_translator(models, decode, device=device, quantize=quantize)

    def translate(
        self, lines: Sequence[str], options: TranslateOptions | None = None, /, **changes: Any
    ) -> list[Translation]:
        """One Translation per line, in order, as ``options`` (a TranslateOptions, with
        ``changes``, its fields by name, laid over it) asks: ``translate(lines, nbest=3,
        attention=True)``."""
        if options is not None and not isinstance(options, TranslateOptions):
            raise TypeError(f"options: give a TranslateOptions, not {type(options).__name__}")
        check_texts(lines, "lines")
        options = replace(options or TranslateOptions(), **changes)
        check_prefixes(options.prefixes, len(lines))  # here: _cases reads them first
        config = options.config(self.config)
        if options.nbest > config.beam_size or options.nbest < 1:
            raise UserError(
                f"nbest {options.nbest} must be between 1 and the beam size {config.beam_size}"
            )
        route = self.routing.route(options.target, options.source)
        cases = self._cases(lines, options)
        encoded = self._encode(
            [sentence_cased(line, case) for line, case in zip(lines, cases)],
            route,
            options.warn_cut,
        )
        todo = [i for i, x in enumerate(encoded.ids) if x]
        forced = self._forced(encoded, config, options)
        hyps = (
            decode_ids(
                self.model,
                [encoded.ids[i] for i in todo],
                config,
                self.device,
                shortlist=self.shortlist,
                nbest=options.nbest,
                attention=options.keeps_weights,
                forced=None if forced is None else [forced[i] for i in todo],
                sampling=options.sampling,
                warn=self.warn,
                language=self.language_pieces(route, config),
            )
            if todo
            else []
        )
        return self._results(lines, encoded, route, dict(zip(todo, hyps)), options, cases)

    def _cases(self, lines: Sequence[str], options: TranslateOptions) -> list[str | None]:
        """Per line, the case its translation is given back (``options.restore_case``): ALL
        CAPS, Title Case or None; None for a line with a forced prefix, which is the
        translation's own start, and for a data.lowercase model, which sees no case and writes
        lowercase."""
        prefixes = options.prefixes or [None] * len(lines)
        restore = options.restore_case and not self.lowercase
        return [
            case_of(line) if restore and not prefix else None
            for line, prefix in zip(lines, prefixes)
        ]

    def _encode(self, lines: Sequence[str], route: Route | None, warn_cut: bool) -> _Encoded:
        tags = self.tokenizer.symbol_ids(route.tags) if route is not None else []
        cleaned = [normalize(line, self.lowercase) for line in lines]
        ids = self.tokenizer.encode_src(cleaned)
        truncated = [len(x) > self.max_source_tokens - len(tags) for x in ids]
        if tags:  # the direction's tokens start the source, as in training
            ids = [tags + x[: self.max_source_tokens - len(tags)] if x else x for x in ids]
        if any(truncated) and warn_cut and not self._warned_cut:
            self._warned_cut = True
            self.warn(
                f"warning: a line is longer than {self.max_source_tokens} subwords; "
                "overlong lines are cut to that length"
            )
        ids = [x[: self.max_source_tokens] for x in ids]
        return _Encoded(cleaned, ids, truncated, len(tags))

    def _forced(self, encoded: _Encoded, config: DecodeConfig, options: TranslateOptions):
        """Per line, what the call's glossary and prefix force; None: nothing is forced."""
        glossary = as_glossary(options.glossary)  # the Python API also takes pairs or a file
        if glossary is None and options.prefixes is None:
            return None
        return forced_for_lines(
            encoded.cleaned,
            encoded.ids,
            self.tokenizer,
            config,
            glossary=glossary,
            prefixes=options.prefixes,
            lowercase=self.lowercase,
        )

    def _results(
        self,
        lines: Sequence[str],
        encoded: _Encoded,
        route: Route | None,
        hyps: Mapping[int, list[Hypothesis]],
        options: TranslateOptions,
        cases: Sequence[str | None],
    ) -> list[Translation]:
        """The Translations of ``lines`` from the hypotheses of the non-empty ones, each text
        given its line's case (:meth:`_cases`)."""
        tags = encoded.tags
        out = []
        for i, line in enumerate(lines):
            tr = Translation(line, "", [], encoded.ids[i][tags:], encoded.truncated[i])
            if route is not None:
                tr.source_lang, tr.target_lang = route.source, route.target
                tr.zero_shot = route.zero_shot
            out.append(tr)
        flat = [h for i in sorted(hyps) for h in hyps[i]]
        texts = iter(self.tokenizer.decode_tgt([h.tokens for h in flat]))
        for i in sorted(hyps):
            sentence, tr = hyps[i], out[i]
            if tags:  # what the caller sees is its own text's pieces, the tokens left out
                for h in sentence:
                    if h.attention is not None:
                        h.attention = h.attention[:, tags:]
            tr.hypotheses = sentence
            tr.alternatives = [
                Alternative(
                    recased(next(texts), cases[i]),
                    h.score,
                    h.norm_score,
                    confidence=confidence_of([h], len(tr.src_ids)),
                    length=len(h.tokens),
                )
                for h in sentence
            ]
            tr.text = tr.alternatives[0].text if sentence else ""
            tr.confidence = confidence_of(sentence, len(tr.src_ids))
            self._attend(tr, options)
        return out

    def _attend(self, tr: Translation, options: TranslateOptions) -> None:
        """Fill ``tr``'s alignment and coverage (the best's and each alternative's, from its own
        attention) and word attention where ``options`` asks for them."""
        best = tr.hypotheses[0] if tr.hypotheses else None
        if not (options.alignments or options.coverage or options.attention) or best is None:
            return
        if best.attention is None:
            return
        src_p = self.tokenizer.src_pieces(tr.src_ids)
        tgt_p = self.tokenizer.tgt_pieces(best.tokens)
        if options.alignments or options.coverage:
            for alternative, h in zip(tr.alternatives, tr.hypotheses):
                if h.attention is not None:
                    pieces = tgt_p if h is best else self.tokenizer.tgt_pieces(h.tokens)
                    pairs, coverage = aligned_words(h.attention, src_p, pieces)
                    alternative.alignment = pairs if options.alignments else None
                    alternative.coverage = coverage if options.coverage else None
            tr.alignment = tr.alternatives[0].alignment
            tr.coverage = tr.alternatives[0].coverage
        if options.attention:
            tr.attention = word_attention(best.attention, src_p, tgt_p, tr.source, tr.text)


@torch.no_grad()
def force_decode(
    model,
    tokenizer: Tokenizer,
    sources: Sequence[str],
    targets: Sequence[str],
    device="cpu",
    batch_size: int = 64,
    lowercase: bool = False,
    per_piece: bool = False,
) -> list[float]:
    """log p(y | x) = Σ_i log p(y_i | y_<i, x), EOS included, for each (source, target) pair;
    with ``per_piece`` divided by the number of its terms (the target's pieces and EOS), the
    negative of the cross-entropy per piece that filtering synthetic pairs compares;
    ``lowercase`` for a model trained with data.lowercase."""
    src_ids = tokenizer.encode_src([normalize(s, lowercase) for s in sources])
    tgt_ids = tokenizer.encode_tgt([normalize(t, lowercase) for t in targets])
    out: list[float] = []
    for start in range(0, len(src_ids), batch_size):
        batch = collate(
            [
                np.asarray(s[:MAX_SOURCE_TOKENS], dtype=np.int64)
                for s in src_ids[start : start + batch_size]
            ],
            [np.asarray(t, dtype=np.int64) for t in tgt_ids[start : start + batch_size]],
        )
        logits, _ = model(batch.src.to(device), batch.src_lengths, batch.tgt_in.to(device))
        logp = torch.log_softmax(logits.float(), dim=-1)
        target = batch.tgt_out.to(device)
        picked = logp.gather(-1, target.unsqueeze(-1)).squeeze(-1).masked_fill(target == 0, 0.0)
        summed = picked.sum(-1)
        out.extend((summed / (target != 0).sum(-1) if per_piece else summed).tolist())
    return out


def load_translator(
    models: Sequence[str | os.PathLike],
    decode: DecodeConfig | Mapping[str, Any] | None = None,
    *,
    device: str = "auto",
    quantize: str = "none",
    name_of: Callable[[str], str] | None = None,
) -> Translator:
    """A Translator for one model, or the ensemble of several (run dirs, checkpoint files,
    packages or installed models' names, with one vocabulary). ``decode``: the decoding
    configuration, or changes to the first model's recipe's ``decode`` section (recipe keys; None
    keeps the recipe's value), checked as recipe keys are; errors name a key as ``name_of`` gives
    it (the CLI names its options). ``quantize`` int8, as ``decode.precision`` int8, quantises
    the linear and RNN layers (nmt_cli/model/quantize.py). ``decode.precision`` bf16
    (``auto`` on a CPU with bf16 hardware) converts the weights to bf16, so that every matrix
    product runs in bf16; log-probabilities and scores stay fp32."""
    if not models:
        raise UserError("-m/--model: give a run dir or checkpoint")
    dev = pick_device(device)
    loaded = [load_any(m, dev) for m in models]
    first = loaded[0]
    if isinstance(decode, DecodeConfig):
        config, changes = decode, {}
    else:
        changes = {k: v for k, v in (decode or {}).items() if v is not None}
        config = override(first.recipe.decode, changes, name_of)
    for other in loaded[1:]:
        if (
            other.tokenizer.tgt_proto != first.tokenizer.tgt_proto
            or other.tokenizer.src_proto != first.tokenizer.src_proto
        ):
            raise UserError(
                f"{other.path}: uses a different vocabulary than {first.path}; cannot ensemble"
            )
        if other.recipe.data.lowercase != first.recipe.data.lowercase:
            raise UserError(
                f"{other.path}: data.lowercase differs from {first.path}'s; cannot ensemble"
            )
    models_ = [x.model for x in loaded]
    if quantize not in ("none", "int8"):
        raise UserError(f"--quantize: '{quantize}' is not one of none, int8")
    precision = resolve_decode_precision(config.precision, dev, quantize)
    if precision == "int8":
        models_ = [quantize_int8(m) for m in models_]
    elif precision == "bf16":
        models_ = [m.to(torch.bfloat16) for m in models_]
    if len(loaded) == 1:
        model, shortlist, languages = models_[0], first.shortlist, first.languages
    else:
        model = Ensemble(models_).eval()
        shortlist = merge_shortlists([x.shortlist for x in loaded])
        languages = LanguageVocabularies.union(x.languages for x in loaded)
    bound_primitive_cache()  # before the first bf16 product; see nmt_cli/runtime/memory.py
    prepare_for_decoding(model)
    if changes.get("shortlist") and shortlist is None:
        raise UserError(
            f"--shortlist: {first.path} has no vocabulary shortlist "
            "(trained before shortlists existed); use --no-shortlist"
        )
    return Translator(
        model,
        first.tokenizer,
        config,
        dev,
        shortlist=shortlist,
        languages=languages,
        lowercase=first.recipe.data.lowercase,
        recipe=first.recipe,
        checkpoint=first.path,
    )
