"""The attentional RNN encoder-decoder family; ``build_model`` turns a ModelConfig into a module."""

from nmt_cli.config import ModelConfig
from nmt_cli.model.seq2seq import Seq2Seq


def build_model(cfg: ModelConfig, src_vocab: int, tgt_vocab: int) -> Seq2Seq:
    return Seq2Seq(cfg, src_vocab, tgt_vocab)


__all__ = ["Seq2Seq", "build_model"]
