"""The decoding options of translate, eval and serve, declared once: each sets the recipe key of its
name in decode.*, and _decode_changes hands the given ones to load_translator."""

from __future__ import annotations

import dataclasses
from typing import Annotated

import typer

from nmt_cli.config.sections import DecodeConfig

# The decoding options of translate, eval and serve. Each overrides the recipe key of its name in
# decode.* (None: not given, the recipe's value stands); see _decode_changes.
BeamSizeOption = Annotated[
    int | None,
    typer.Option(min=1, help="Beam width; 1 = greedy (default: the recipe's decode.beam_size)."),
]
LengthPenaltyOption = Annotated[
    float | None,
    typer.Option(
        min=0.0, help="GNMT length penalty alpha (default: the recipe's decode.length_penalty)."
    ),
]
BatchSizeOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Sentences per batch (default: the recipe's decode.batch_size; 0 there = "
        "128 for greedy search, 192 decoding in bf16 on the CPU, 64 for beam search).",
    ),
]
BatchTokensOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Source tokens per batch, instead of --batch-size (default: the recipe's "
        "decode.batch_tokens).",
    ),
]
PrecisionOption = Annotated[
    str | None,
    typer.Option(
        help="auto, fp32, bf16 or int8: the weights' and matrix products' precision; auto = bf16 "
        "on a CPU with bf16 hardware (AVX512-BF16/AMX), else fp32; int8 = dynamic int8 "
        "quantisation on the CPU, as --quantize int8 (default: the recipe's decode.precision)."
    ),
]
ShortlistPerSourceOption = Annotated[
    int | None,
    typer.Option(
        min=0,
        help="Candidates per source piece the shortlist adds; 0 = all it learned (default: the "
        "recipe's decode.shortlist_per_source).",
    ),
]
ShortlistFrequentOption = Annotated[
    int | None,
    typer.Option(
        min=0,
        help="Most common target pieces the shortlist adds; 0 = all it learned (default: the "
        "recipe's decode.shortlist_frequent).",
    ),
]
ShortlistOption = Annotated[
    bool | None,
    typer.Option(
        "--shortlist/--no-shortlist",
        help="Decode over the vocabulary shortlist learned from the training data (default: the "
        "recipe's decode.shortlist).",
    ),
]
LanguageVocabularyOption = Annotated[
    bool | None,
    typer.Option(
        "--language-vocabulary/--no-language-vocabulary",
        help="Multilingual model: write the requested language with its own pieces only "
        "(default: the recipe's decode.language_vocabulary).",
    ),
]
WorkersOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="CPU: decode this many batches side by side, one core each (default: the recipe's "
        "decode.workers; 0 there = one per CPU thread, see --threads).",
    ),
]

# Control of the output (nmt translate; docs/translate.md)
GlossaryOption = Annotated[
    str | None,
    typer.Option(
        metavar="TSV",
        help="Force terms: a file of 'source term<TAB>target term' lines; wherever a source term "
        "occurs, the translation carries its target term.",
    ),
]
PrefixTabOption = Annotated[
    bool,
    typer.Option(
        "--prefix-tab",
        help="Input lines are 'source<TAB>target prefix': each translation begins with its "
        "prefix, the rest decoded by the beam.",
    ),
]
RestoreCaseOption = Annotated[
    bool,
    typer.Option(
        "--restore-case/--no-restore-case",
        help="Translate a sentence in ALL CAPS or Title Case in sentence case and give its "
        "translation that case again (the default).",
    ),
]
NumbersOption = Annotated[
    str,
    typer.Option(
        "--numbers",
        metavar="keep|target|model",
        help="Words with digits: keep them verbatim (the default), write them in the target "
        "language's convention where certain (target: 1,234 -> 1 234, 3.5 -> 3,5 in French), "
        "or leave them to the model.",
    ),
]
SampleOption = Annotated[
    bool,
    typer.Option("--sample", help="Sample each translation from the model (back-translation)."),
]
SamplingTopkOption = Annotated[
    int, typer.Option(min=0, help="With --sample: draw from the K most probable tokens; 0 = all.")
]
TemperatureOption = Annotated[
    float, typer.Option(help="With --sample: divide the log-probabilities by T before drawing.")
]
SeedOption = Annotated[
    int, typer.Option(help="With --sample: the seed; the same seed, the same draws.")
]


def _decode_changes(ctx: typer.Context) -> dict:
    """The command's options named after decode.* keys that were given, for load_translator to lay
    over the recipe's decode section (None: not given, the recipe's value stands)."""
    keys = {f.name for f in dataclasses.fields(DecodeConfig)}
    return {key: value for key, value in ctx.params.items() if key in keys and value is not None}


def _option_name(key: str) -> str:
    """The option that sets decode.``key``, as errors name it (``--beam-size``)."""
    return "--" + key.replace("_", "-")


# The direction of a multilingual model (nmt_cli/translation/routing.py), for translate and eval.
TargetOption = Annotated[
    str | None,
    typer.Option(
        help="Target language, for a multilingual model (one it lacks is an error that lists "
        "those it has)."
    ),
]
SourceOption = Annotated[
    str | None,
    typer.Option(
        help="Source language of a multilingual model; optional where the model's directions "
        "into --target have one source or its sources carry no source token."
    ),
]
