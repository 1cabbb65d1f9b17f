"""SentencePiece subwords: train on the training split, encode, decode.

Ids are fixed across the toolkit: pad 0, unk 1, bos 2, eos 3. A tokenizer is held as the
serialized SentencePiece model protos, so a checkpoint carries it and a run dir alone translates.
"""

from __future__ import annotations

import io
import random
from collections.abc import Iterable, Sequence
from pathlib import Path

import sentencepiece as spm

from nmt_cli.config.sections import TokenizerConfig
from nmt_cli.runtime.errors import DataError

PAD, UNK, BOS, EOS = 0, 1, 2, 3


def normalize(line: str, lowercase: bool = False) -> str:
    """Collapse all whitespace runs (tabs, no-break spaces, ...) to one space and strip the ends;
    lowercase too for a recipe with data.lowercase. Training data and every line a trained model
    reads (translate, score) go through it alike."""
    line = " ".join(line.split())
    return line.lower() if lowercase else line


def _load_proto(proto: bytes, what: str) -> spm.SentencePieceProcessor:
    sp = spm.SentencePieceProcessor()
    try:
        sp.LoadFromSerializedProto(proto)
    except Exception:  # sentencepiece raises plain RuntimeError/OSError on bad protos
        raise DataError(f"{what}: not a valid SentencePiece model; re-run nmt preprocess") from None
    if sp.pad_id() != PAD or sp.eos_id() != EOS or sp.bos_id() != BOS:
        raise DataError(
            f"{what}: SentencePiece model has unexpected special ids; re-run nmt preprocess"
        )
    return sp


def seed_sampling(seed: int) -> None:
    """Reset SentencePiece's (process-wide) generator that :meth:`Tokenizer.encode_sampled`
    draws from."""
    spm.set_random_generator_seed(seed)


class Tokenizer:
    """Source and target SentencePiece models (the same one when the vocabulary is joint)."""

    def __init__(self, src_proto: bytes, tgt_proto: bytes | None = None, what: str = "tokenizer"):
        self.src_proto = src_proto
        self.tgt_proto = tgt_proto if tgt_proto is not None else src_proto
        self.joint = tgt_proto is None or tgt_proto == src_proto
        self.src = _load_proto(self.src_proto, what)
        self.tgt = self.src if self.joint else _load_proto(self.tgt_proto, what)

    @property
    def src_vocab_size(self) -> int:
        return self.src.get_piece_size()

    @property
    def tgt_vocab_size(self) -> int:
        return self.tgt.get_piece_size()

    def encode_src(self, lines: Sequence[str]) -> list[list[int]]:
        return self.src.encode(list(lines))

    def encode_tgt(self, lines: Sequence[str]) -> list[list[int]]:
        return self.tgt.encode(list(lines))

    def encode_ids(self, side: str, lines: Sequence[str], threads: int = 1) -> list[list[int]]:
        """Ids of each line, in input order, encoded on ``threads`` threads."""
        sp = self.src if side == "src" else self.tgt
        return sp.encode(list(lines), num_threads=threads)

    def encode_sampled(self, side: str, lines: Sequence[str], alpha: float) -> list[list[int]]:
        """One segmentation per line drawn from the model (Kudo 2018's subword regularisation;
        BPE-dropout for bpe models). Single-threaded, so after :func:`seed_sampling` every DDP
        rank and every resume draws the same segmentations."""
        sp = self.src if side == "src" else self.tgt
        return sp.encode(
            list(lines), enable_sampling=True, alpha=alpha, nbest_size=-1, num_threads=1
        )

    def decode_tgt(self, ids: Sequence[Sequence[int]]) -> list[str]:
        return self.tgt.decode([list(x) for x in ids])

    def symbol_ids(self, symbols: Sequence[str]) -> list[int]:
        """The source-side ids of user-defined symbols (tags); one it lacks is a DataError."""
        ids = [self.src.piece_to_id(s) for s in symbols]
        missing = [s for s, i in zip(symbols, ids) if i == UNK]
        if missing:
            raise DataError(f"tokenizer: has no piece {', '.join(missing)}")
        return ids

    def src_pieces(self, ids: Sequence[int]) -> list[str]:
        return [self.src.id_to_piece(int(i)) for i in ids]

    def tgt_pieces(self, ids: Sequence[int]) -> list[str]:
        return [self.tgt.id_to_piece(int(i)) for i in ids]

    def save(self, directory: Path) -> None:
        if self.joint:
            (directory / "spm.model").write_bytes(self.src_proto)
        else:
            (directory / "spm.src.model").write_bytes(self.src_proto)
            (directory / "spm.tgt.model").write_bytes(self.tgt_proto)

    @classmethod
    def load(cls, directory: Path) -> Tokenizer:
        joint = directory / "spm.model"
        if joint.is_file():
            return cls(_read(joint), what=str(joint))
        src, tgt = directory / "spm.src.model", directory / "spm.tgt.model"
        if src.is_file() and tgt.is_file():
            return cls(_read(src), _read(tgt), what=str(src))
        raise DataError(f"{directory}: no tokenizer (spm.model); run nmt preprocess first")


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot read tokenizer ({exc.strerror})") from None


def _train_one(
    lines: Iterable[str], cfg: TokenizerConfig, seed: int, symbols: Sequence[str] = ()
) -> bytes:
    sample = [line for line in lines if line]
    if len(sample) > cfg.sample_sentences:
        sample = random.Random(seed).sample(sample, cfg.sample_sentences)
    if not sample:
        raise DataError("tokenizer: no non-empty training sentences to learn a vocabulary from")
    model = io.BytesIO()
    if hasattr(spm, "set_random_generator_seed"):
        spm.set_random_generator_seed(seed)
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sample),
            model_writer=model,
            model_type=cfg.type,
            vocab_size=cfg.vocab_size,
            character_coverage=cfg.character_coverage,
            pad_id=PAD,
            unk_id=UNK,
            bos_id=BOS,
            eos_id=EOS,
            input_sentence_size=0,
            num_threads=2,
            hard_vocab_limit=False,
            minloglevel=2,
            **({"user_defined_symbols": list(symbols)} if symbols else {}),
        )
    except RuntimeError as exc:
        raise DataError(f"tokenizer: SentencePiece training failed: {exc}") from None
    return model.getvalue()


def train_tokenizer(
    cfg: TokenizerConfig,
    src_lines: Sequence[str],
    tgt_lines: Sequence[str],
    seed: int = 0,
    symbols: Sequence[str] = (),
) -> Tokenizer:
    """Learn one joint model on both sides, or one model per side; ``symbols`` (the tags of
    nmt_cli/data/directions.py) become pieces of their own in the source side's model."""
    if cfg.joint:
        return Tokenizer(_train_one(list(src_lines) + list(tgt_lines), cfg, seed, symbols))
    return Tokenizer(_train_one(src_lines, cfg, seed, symbols), _train_one(tgt_lines, cfg, seed))
