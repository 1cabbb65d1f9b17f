"""The recipe's keys: typed, validated dataclasses, one per section.

Each key carries its type, default, allowed range or choices and its help (the generated
reference, docs/recipe-keys.md). A section checks its own fields whenever it is made, so a recipe
read from YAML (nmt_cli/config/recipes.py), a section built in code and a section changed by
:func:`override` (command-line options, request fields) are refused alike, in one
:class:`ConfigError` line naming the dotted key.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import typing
from dataclasses import dataclass, field
from typing import Any

from nmt_cli.config.values import check_value
from nmt_cli.runtime.errors import ConfigError


def _opt(
    default: Any,
    *,
    choices: tuple | None = None,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    help: str = "",
) -> Any:
    """A dataclass field with validation metadata (allowed choices, inclusive/open range)."""
    meta = {"choices": choices, "lo": lo, "hi": hi, "lo_open": lo_open, "help": help}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


class Section:
    """A recipe section. Every field is checked against its type and its ``_opt`` range whenever
    a section is made: by the recipe reader, by ``Recipe()``'s defaults and by
    ``dataclasses.replace`` alike, so an override is refused as the same key in a recipe would be
    (:func:`override`)."""

    def __post_init__(self) -> None:
        prefix = _SECTION_PREFIX.get(type(self).__name__, "")
        for f, hint in _value_fields(type(self)):
            setattr(
                self, f.name, check_value(getattr(self, f.name), hint, f.metadata, prefix + f.name)
            )


@dataclass
class DataConfig(Section):
    corpus: str | None = _opt("multi30k", help="registered corpus name, or null for local files")
    train: str | list[str] = _opt(
        "train",
        help="split name of the corpus, or a path with {lang}, or a "
        "source<TAB>target file with format: tsv; a list trains "
        "on all of them (counts per corpus go to data/meta.json)",
    )
    valid: str = _opt("val", help="validation split or path")
    test: list[str] = _opt(["test_2016_flickr"], help="test splits or paths")
    max_len: int = _opt(80, lo=1, help="drop training pairs with more words on either side")
    max_ratio: float = _opt(
        3.0, lo=1.0, help="drop training pairs whose word-length ratio exceeds this"
    )
    format: str = _opt(
        "lines",
        choices=("lines", "tsv"),
        help="lines: one file per language (a path with {lang}); tsv: local paths "
        "without {lang} are source<TAB>target files (OPUS/Tatoeba exports)",
    )
    dedup: bool = _opt(
        False,
        help="drop exact duplicate training pairs (after cleaning), across all "
        "training corpora; costs 8 bytes of memory per distinct pair",
    )
    lowercase: bool = _opt(
        False,
        help="lowercase every split and every line to translate (the Multi30k "
        "papers' training condition); output is lowercase: score it with --lc-tok",
    )
    directions: list[str] = _opt(
        [],
        help="multilingual: the directions one model learns, e.g. [en-fr, fr-en, en-de]; each "
        "reads data.train, valid and test in its own languages (or its data.pairs files), and "
        "its sources start with the target-language token <2xx>; empty = the one pair src-tgt",
    )
    pairs: dict[str, str] = _opt(
        {},
        help="multilingual: a direction's own files instead of data.corpus, direction -> a path "
        "with {split} and {lang}, e.g. en-de: /data/tatoeba-en-de/{split}.{lang}.gz ({split} "
        "takes the names in data.train, valid and test)",
    )
    source_tag: bool = _opt(
        False, help="multilingual: sources also carry a source-language token <from_xx>"
    )
    temperature: float = _opt(
        1.0,
        lo=0.0,
        lo_open=True,
        help="multilingual: each epoch draws direction i's pairs in proportion to n_i^(1/T) "
        "(1 = as the data is; larger evens out the directions' sizes)",
    )
    weights: dict[str, float] = _opt(
        {},
        help="multilingual: direction -> a factor on its n_i^(1/T) before the epoch's shares "
        "are normalised (the others 1), e.g. {fr-en: 2} gives fr-en twice the pairs of a "
        "direction of its size; a data.denoise language's pairs are named xx-xx",
    )
    denoise: list[str] = _opt(
        [],
        help="multilingual: languages whose training sentences the model also learns to rebuild "
        "from a noised copy, tagged with the language's own token, so each source language is "
        "seen with more than one target token (zero-shot directions need that; "
        "docs/recipes.md#zero-shot-directions)",
    )
    denoise_drop: float = _opt(
        0.1, lo=0.0, hi=0.9, help="data.denoise: chance that a word of the noised copy is dropped"
    )
    denoise_shuffle: int = _opt(
        3, lo=0, help="data.denoise: no word of the noised copy moves more than this many places"
    )
    denoise_tag: bool = _opt(
        False, help="data.denoise: the noised sources also carry the token <denoise>"
    )
    filter_numbers: bool = _opt(
        False,
        help="drop training pairs whose runs of digits differ between the sides (1,234 and "
        "1 234 agree; 2 and deux do not), so that the model learns to carry numbers",
    )
    augment_case: float = _opt(
        0.0,
        lo=0.0,
        hi=1.0,
        help="share of the training pairs written in one case on both sides, drawn anew each "
        "epoch: half ALL CAPS, half Title Case (0 = none), so that the model reads capitals",
    )
    back_translated: dict[str, str] = _opt(
        {},
        help="direction -> a path with {lang} of a back-translated corpus (its source side "
        "machine-translated from real target text); its sources carry the <bt> token",
    )
    back_translated_ratio: float = _opt(
        0.0,
        lo=0.0,
        help="back-translated pairs drawn each epoch per real pair of the direction (0 = every "
        "back-translated pair once an epoch)",
    )
    teacher: list[str] = _opt(
        [],
        help="sequence-level distillation: a run dir or checkpoint (a list: their ensemble) whose "
        "translations of the training sources, with its recipe's decode settings, replace the "
        "references; nmt preprocess makes them in resumable chunks under <run dir>/teacher "
        "(docs/recipes.md#distilling-a-student); empty = train on the references",
    )
    teacher_keep_references: bool = _opt(
        False,
        help="data.teacher: also train on the original pairs, after the distilled ones",
    )
    licence: dict[str, str] = _opt(
        {},
        help="corpus name or path -> its licence and source, shown on the card of a package made "
        "with nmt export (a registered corpus brings its own)",
    )


@dataclass
class TokenizerConfig(Section):
    type: str = _opt("unigram", choices=("unigram", "bpe"), help="SentencePiece model type")
    vocab_size: int = _opt(8000, lo=16, hi=1_000_000, help="pieces per SentencePiece model")
    joint: bool = _opt(True, help="one SentencePiece model for both languages")
    character_coverage: float = _opt(
        1.0, lo=0.9, hi=1.0, help="share of characters the vocabulary must cover"
    )
    sample_sentences: int = _opt(
        2_000_000,
        lo=1000,
        help="sentences SentencePiece trains on, drawn "
        "uniformly from the training pairs while they are read",
    )
    sample_file: str | None = _opt(
        None,
        help="learn SentencePiece from this path with {lang} (one file of "
        "sentences per language) instead of the training data",
    )


@dataclass
class ModelConfig(Section):
    rnn: str = _opt(
        "gru", choices=("gru", "lstm", "rnn"), help="recurrent unit of encoder and decoder"
    )
    embed_dim: int = _opt(256, lo=1, help="embedding size")
    hidden_dim: int = _opt(
        512, lo=2, help="decoder state size; a BiRNN encoder uses half per direction"
    )
    layers: int = _opt(
        1,
        lo=1,
        hi=8,
        help="RNN layers in encoder and decoder, where encoder_layers or decoder_layers does "
        "not say otherwise",
    )
    encoder_layers: int | None = _opt(
        None, lo=1, hi=8, help="encoder RNN layers; null = model.layers"
    )
    decoder_layers: int | None = _opt(
        None,
        lo=1,
        hi=8,
        help="decoder RNN layers; null = model.layers. Decoder layer k starts from encoder "
        "layer max(1, L_e - L_d + k) (aligned at the top)",
    )
    residual: bool = _opt(
        False,
        help="skip connections between stacked RNN layers: h^l = RNN^l(h^{l-1}) + h^{l-1} "
        "for l >= 2, in encoder and decoder "
        "(docs/models.md#depths-residual-connections-layer-normalisation)",
    )
    layer_norm: bool = _opt(
        False,
        help="layer normalisation between stacked RNN layers: layer l >= 2 reads "
        "LN(h^{l-1}), LN(x) = g ⊙ (x - μ)/σ + b; the stack's output and the states each layer "
        "carries stay unnormalised "
        "(docs/models.md#depths-residual-connections-layer-normalisation)",
    )
    bidirectional: bool = _opt(True, help="BiRNN encoder: h_j = [→h_j; ←h_j]")
    bridge: str = _opt(
        "linear",
        choices=("zero", "last", "linear", "mean"),
        help="decoder initial state and fixed context: zero, last (c = h_N), linear (q(h_N)), "
        "mean (q(h_1..h_N))",
    )
    attention: str = _opt(
        "concat",
        choices=("none", "dot", "general", "concat", "cosine"),
        help="score: none (fixed context, Cho et al.), dot (h^T s), general (h^T W s), "
        "concat (v^T tanh(W1 h + W2 s)), cosine",
    )
    attention_heads: int = _opt(
        1,
        lo=1,
        hi=16,
        help="K heads with their own parameters, contexts concatenated "
        "(TF legacy attention_decoder)",
    )
    decoder: str = _opt(
        "luong",
        choices=("bahdanau", "luong", "conditional"),
        help="bahdanau (query s_{i-1}, context into the RNN), luong (query s_i, "
        "h~ = tanh(W_c[c; s])) or conditional (s'_i = f1(s_{i-1}, y_{i-1}), "
        "query s'_i, s_i = f2(s'_i, c_i))",
    )
    input_feeding: bool = _opt(
        False, help="feed h~_{i-1} into the next step's input (Luong et al.)"
    )
    initial_state_attention: bool = _opt(
        False,
        help="TF legacy attention_decoder: the RNN input also carries the "
        "previous attention read-out c_{i-1}, starting from c_0 = "
        "attend(s_0); luong and conditional order",
    )
    tie_embeddings: bool = _opt(
        True, help="output projection W_s = target embedding matrix (h~ gets the embedding size)"
    )
    share_embeddings: bool = _opt(
        True, help="one embedding table for source and target (joint vocab)"
    )
    dropout: float = _opt(
        0.2, lo=0.0, hi=0.9, help="dropout on embeddings, encoder states, between layers and on h~"
    )
    init: str = _opt(
        "embedding",
        choices=("embedding", "uniform", "xavier"),
        help="embedding: N(0,1) embeddings and PyTorch defaults elsewhere; "
        "uniform: all U(-0.1,0.1); xavier: Glorot matrices, zero biases, N(0,1) embeddings",
    )

    @property
    def encoder_depth(self) -> int:
        """The encoder's layers: encoder_layers where given, else layers."""
        return self.layers if self.encoder_layers is None else self.encoder_layers

    @property
    def decoder_depth(self) -> int:
        """The decoder's layers: decoder_layers where given, else layers."""
        return self.layers if self.decoder_layers is None else self.decoder_layers


@dataclass
class TrainConfig(Section):
    init_from: str | None = _opt(
        None,
        help="fine-tune: start from this run dir's best checkpoint (or this "
        "checkpoint file): its tokenizer encodes the data, its weights "
        "start training, optimiser and schedule start fresh",
    )
    batch_tokens: int = _opt(3000, lo=1, help="real target tokens per batch, padding not counted")
    max_steps: int = _opt(0, lo=0, help="0 = no limit")
    max_epochs: int = _opt(0, lo=0, help="0 = no limit")
    max_minutes: float = _opt(0.0, lo=0.0, help="wall-clock limit, 0 = no limit")
    optimizer: str = _opt("adam", choices=("adam", "adamw", "sgd"), help="optimiser")
    lr: float = _opt(1e-3, lo=0.0, lo_open=True, help="peak learning rate")
    weight_decay: float = _opt(0.0, lo=0.0, help="L2 (adam, sgd) or decoupled (adamw)")
    schedule: str = _opt(
        "constant",
        choices=("constant", "inverse_sqrt", "plateau", "cosine"),
        help="learning-rate schedule (docs/training.md)",
    )
    warmup_steps: int = _opt(0, lo=0, help="linear warm-up steps")
    plateau_factor: float = _opt(
        0.5, lo=0.0, hi=1.0, lo_open=True, help="plateau: lr *= factor when validation stalls"
    )
    plateau_patience: int = _opt(2, lo=0, help="plateau: validations without gain before lowering")
    min_lr: float = _opt(1e-5, lo=0.0, help="floor for plateau and cosine")
    label_smoothing: float = _opt(
        0.1, lo=0.0, hi=0.99, help="label smoothing ε of the cross-entropy"
    )
    subword_alpha: float = _opt(
        0.0,
        lo=0.0,
        hi=1.0,
        help="subword regularisation: each epoch re-segments the training "
        "sentences by sampling from the SentencePiece model (unigram: "
        "smoothing exponent over all segmentations, lower = more varied, "
        "0.5 is moderate; bpe: dropout probability); 0 = off",
    )
    clip_norm: float = _opt(1.0, lo=0.0, help="0 = no clipping")
    accumulate: int = _opt(1, lo=1, help="batches per optimiser step")
    seed: int = _opt(1234, lo=0, help="seeds initialisation, dropout and batch order")
    checkpoint_every: int = _opt(500, lo=1, help="steps between checkpoints")
    keep_checkpoints: int = _opt(
        5, lo=1, help="numbered checkpoints kept (last.pt and best.pt stay)"
    )
    average_last: int = _opt(
        0,
        lo=0,
        help="at the end, average the N newest numbered checkpoints into "
        "averaged.pt; it becomes best.pt if it validates better (0 = off)",
    )
    ema_decay: float = _opt(
        0.0,
        lo=0.0,
        hi=0.99999,
        help="exponential moving average of the weights, validated, checkpointed and "
        "translated with instead of the raw weights: d in ema = d·ema + (1-d)·w "
        "(0 = off)",
    )
    valid_every: int = _opt(
        500, lo=1, help="steps between validations (loss, perplexity, greedy BLEU)"
    )
    valid_max_sentences: int = _opt(
        1014, lo=1, help="cap on the valid sentences used per validation"
    )
    valid_metric: str = _opt(
        "bleu",
        choices=("bleu", "loss"),
        help="what picks best.pt, early stopping and the plateau schedule",
    )
    patience: int = _opt(
        0, lo=0, help="early stopping after this many validations without gain; 0 = off"
    )
    sampling: str = _opt(
        "none",
        choices=("none", "constant", "linear", "inverse_sigmoid"),
        help="scheduled sampling: how often the model's own prediction is fed back",
    )
    sampling_prob: float = _opt(
        0.25, lo=0.0, hi=1.0, help="final probability of feeding back a prediction"
    )
    sampling_steps: int = _opt(5000, lo=1, help="steps over which the schedule ramps up")
    precision: str = _opt(
        "auto",
        choices=("auto", "fp32", "bf16", "fp16"),
        help="auto: bf16 autocast on a CPU with bf16 hardware (AVX512-BF16/AMX), "
        "else fp32 (GPUs too; docs/results.md)",
    )
    max_nan_batches: int = _opt(20, lo=1, help="stop after this many non-finite losses in a row")


@dataclass
class DecodeConfig(Section):
    beam_size: int = _opt(5, lo=1, hi=100, help="beam width (1 = greedy)")
    max_len_ratio: float = _opt(
        1.5, lo=0.0, lo_open=True, help="output length cap: ratio × source length + max_len_const"
    )
    max_len_const: int = _opt(10, lo=0, help="see max_len_ratio")
    min_len: int = _opt(1, lo=0, help="subwords before EOS is allowed (0 allows empty output)")
    length_penalty: float = _opt(0.6, lo=0.0, help="GNMT alpha; 0 = raw log-probability")
    batch_size: int = _opt(
        0,
        lo=0,
        help="sentences per batch; 0 = 128 for greedy search (192 decoding in "
        "bf16 on the CPU), 64 for beam search (whose sentences each carry "
        "beam_size hypotheses)",
    )
    batch_tokens: int = _opt(
        0, lo=0, help="if > 0: source subwords per batch instead of batch_size sentences"
    )
    shortlist: bool = _opt(
        False,
        help="decode over the vocabulary shortlist learned from the training data, where the "
        "checkpoint has one: faster on a CPU, and not exact (docs/results.md#the-shortlist)",
    )
    shortlist_per_source: int = _opt(
        10, lo=0, help="candidates per source piece the shortlist adds (0 = all it learned, 30)"
    )
    shortlist_frequent: int = _opt(
        300, lo=0, help="most common target pieces the shortlist adds (0 = all it learned, 2,000)"
    )
    language_vocabulary: bool = _opt(
        True,
        help="multilingual model: write the requested language with the pieces its training "
        "targets use only, so that no translation drifts into another language "
        "(docs/recipes.md#the-requested-language); no effect on a one-pair model",
    )
    workers: int = _opt(
        0,
        lo=0,
        help="CPU decoding: batches decoded side by side, one thread and one "
        "core each; 0 = as many as torch's CPU threads (OMP_NUM_THREADS)",
    )
    precision: str = _opt(
        "auto",
        choices=("auto", "fp32", "bf16", "int8"),
        help="auto: bf16 weights and matrix products on a CPU with bf16 hardware "
        "(AVX512-BF16/AMX), else fp32; int8: dynamic int8 quantisation of the linear and RNN "
        "layers (CPU); log-probabilities and scores stay fp32",
    )
    max_segment_tokens: int = _opt(
        30,
        lo=0,
        help="documents: a sentence of more source subwords is translated in parts cut at "
        "clause boundaries (docs/translate.md#long-sentences); 0 = never cut",
    )
    max_repeats: int = _opt(
        3,
        lo=0,
        help="repetition guard: no 4-gram occurs more often than this in the output of a "
        "sentence of over 20 subwords (docs/translate.md#long-sentences); 0 = no guard",
    )


@dataclass
class Recipe(Section):
    name: str = _opt(
        "unnamed", help="run name; the default run dir is runs/<name> (defaults to the file name)"
    )
    src: str = _opt("en", help="source language code (the file suffix: train.en.gz)")
    tgt: str = _opt("fr", help="target language code")
    data: DataConfig = field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


_SECTION_PREFIX = {
    "DataConfig": "data.",
    "TokenizerConfig": "tokenizer.",
    "ModelConfig": "model.",
    "TrainConfig": "train.",
    "DecodeConfig": "decode.",
}


@functools.cache
def _value_fields(cls: type) -> tuple[tuple[dataclasses.Field, Any], ...]:
    """The fields of a section that hold values (not sections), with their resolved types."""
    hints = typing.get_type_hints(cls)
    return tuple(
        (f, hints[f.name])
        for f in dataclasses.fields(cls)
        if not dataclasses.is_dataclass(hints[f.name])
    )


def override(section: Section, changes: typing.Mapping[str, Any], name_of=None) -> Section:
    """``section`` with ``changes`` laid over it by ``dataclasses.replace``; a change of None keeps
    the section's value. An unknown key or a bad value is one ConfigError line naming the key as
    ``name_of(key)`` gives it (default: its dotted recipe key), with the recipe's own checks."""
    prefix = _SECTION_PREFIX.get(type(section).__name__, "")
    name_of = name_of or (lambda key: prefix + key)
    fields = {f.name: (f, hint) for f, hint in _value_fields(type(section))}
    checked = {}
    for key, value in changes.items():
        if value is None:
            continue
        if key not in fields:
            hint = difflib.get_close_matches(key, list(fields), n=1, cutoff=0.6)
            extra = f" (did you mean '{name_of(hint[0])}'?)" if hint else ""
            raise ConfigError(f"{name_of(key)}: unknown key{extra}")
        f, tp = fields[key]
        checked[key] = check_value(value, tp, f.metadata, name_of(key))
    return dataclasses.replace(section, **checked) if checked else section


# Keys that may differ between a checkpoint's recipe and the one used to resume it.
RESUMABLE_KEYS = frozenset(
    {
        "name",
        "data.test",
        "data.licence",
        "train.max_steps",
        "train.max_epochs",
        "train.max_minutes",
        "train.valid_every",
        "train.checkpoint_every",
        "train.keep_checkpoints",
        "train.average_last",
        "train.valid_max_sentences",
        "train.patience",
        "train.min_lr",
        "train.plateau_patience",
        "train.max_nan_batches",
        "train.ema_decay",
        "train.subword_alpha",
        "data.augment_case",
    }
) | {f"decode.{f.name}" for f in dataclasses.fields(DecodeConfig)}


def may_change_on_resume(key: str) -> bool:
    """Whether a dotted recipe key may differ between a checkpoint and the recipe resuming it."""
    return (
        key in RESUMABLE_KEYS
        or key.startswith("train.lr")
        or key in ("train.schedule", "train.warmup_steps")
    )
