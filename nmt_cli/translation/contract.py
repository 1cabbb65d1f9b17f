"""The contract every caller of a translator holds: :class:`Translating`, which the CLI, the
Python API, the document layer and the service depend on, and :class:`TranslateOptions`, what one
call asks for. A :class:`nmt_cli.translation.translator.Translator` fulfils it; per-call state
(direction, glossary, prefixes, sampling, outputs, decoding changes) travels in the options, never
in attributes written from outside."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from nmt_cli.config.sections import DecodeConfig, Recipe, override
from nmt_cli.data.tokenizer import Tokenizer
from nmt_cli.decoding.sampling import Sampling
from nmt_cli.translation.glossary import Glossary
from nmt_cli.translation.results import Translation


@dataclass(frozen=True)
class TranslateOptions:
    """What one translate call asks for.

    ``target``, ``source``: the languages, for a multilingual model; ``glossary``: terms to force
    (nmt_cli/translation/glossary.py), on top of any the caller's model forces; ``prefixes``: per
    line, a target prefix to force (None or "": none); ``sampling``: sample instead of searching
    (nmt_cli/decoding/sampling.py); ``nbest``: alternatives per line; ``alignments``,
    ``attention``: fill those fields of each Translation; ``coverage``: fill each Translation's
    and alternative's ``coverage`` (the source words the alignment leaves out, each with its best
    target word), as the document layer asks where it puts tags back; ``weights``: keep each
    hypothesis's attention weights (implied by the three); ``beam_size`` and ``decode`` (recipe
    ``decode`` keys): this call's decoding settings laid over the translator's by
    :func:`nmt_cli.config.sections.override`; ``warn_cut``: warn (once per translator) about a
    line cut at the model's source limit, as callers that name such lines themselves do not want;
    ``restore_case``: a line in ALL CAPS or Title Case is translated in sentence case and its
    translation given that case again (nmt_cli/data/casing.py); ``numbers``: how the document
    layer carries runs of digits (nmt_cli/documents/numbers.py: keep, target or model).
    """

    target: str | None = None
    source: str | None = None
    glossary: Glossary | None = None
    prefixes: Sequence[str | None] | None = None
    sampling: Sampling | None = None
    nbest: int = 1
    alignments: bool = False
    coverage: bool = False
    attention: bool = False
    weights: bool = False
    beam_size: int | None = None
    decode: Mapping[str, Any] = field(default_factory=dict)
    warn_cut: bool = True
    restore_case: bool = True
    numbers: str = "keep"

    def __post_init__(self) -> None:
        """A field of the wrong type is a TypeError naming it, here rather than deep in a search."""
        for name in ("alignments", "coverage", "attention", "weights", "warn_cut", "restore_case"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name}: give True or False, not {getattr(self, name)!r}")
        for name in ("nbest", "beam_size"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise TypeError(f"{name}: give a whole number, not {value!r}")
        for name in ("target", "source", "numbers"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{name}: give a string, not {value!r}")
        if self.prefixes is not None and (
            isinstance(self.prefixes, str)
            or not isinstance(self.prefixes, Sequence)
            or not all(p is None or isinstance(p, str) for p in self.prefixes)
        ):
            raise TypeError("prefixes: give one string (or None) per line")
        if self.sampling is not None and not isinstance(self.sampling, Sampling):
            raise TypeError(f"sampling: give a Sampling, not {self.sampling!r}")
        if not isinstance(self.decode, Mapping):
            raise TypeError(f"decode: give recipe decode keys as a mapping, not {self.decode!r}")

    @property
    def keeps_weights(self) -> bool:
        """Whether the hypotheses must keep their attention weights."""
        return self.weights or self.alignments or self.coverage or self.attention

    def config(self, base: DecodeConfig) -> DecodeConfig:
        """``base`` with this call's decoding changes laid over it."""
        return override(base, {**self.decode, "beam_size": self.beam_size})


def check_texts(values, what: str) -> None:
    """A TypeError unless ``values`` is a sequence of strings (not one string)."""
    if isinstance(values, str) or not all(isinstance(value, str) for value in values):
        raise TypeError(f"{what}: give a sequence of strings (not one string)")


class Translating(Protocol):
    """A translator as its callers use it: lines in, one Translation per line out, in order."""

    tokenizer: Tokenizer
    config: DecodeConfig
    lowercase: bool
    recipe: Recipe | None
    max_source_tokens: int
    warn: Callable[[str], None]

    def translate(
        self, lines: Sequence[str], options: TranslateOptions | None = None, /, **changes: Any
    ) -> list[Translation]:
        """``changes``: fields of TranslateOptions laid over ``options``."""
        ...
