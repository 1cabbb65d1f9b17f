"""The attentional RNN encoder-decoder family; ``build_model`` turns a ModelConfig into a module."""

import torch
from torch.overrides import TorchFunctionMode

from nmt_cli.config.sections import ModelConfig
from nmt_cli.model.seq2seq import Seq2Seq

# What PyTorch's modules and Seq2Seq._initialize call to draw or set initial values in place.
_INITIALISERS = frozenset(
    {
        torch.Tensor.uniform_,
        torch.Tensor.normal_,
        torch.Tensor.zero_,
        torch.Tensor.fill_,
        torch.nn.init.uniform_,
        torch.nn.init.normal_,
        torch.nn.init.zeros_,
        torch.nn.init.ones_,
        torch.nn.init.constant_,
        torch.nn.init.kaiming_uniform_,
        torch.nn.init.xavier_uniform_,
    }
)


class _SkipInitialValues(TorchFunctionMode):
    """Leaves the initialisers above undone (their tensor keeps torch.empty's memory), as every
    value is about to be overwritten by a checkpoint's: drawing millions of random weights is a
    visible share of each ``nmt translate`` start. (The meta device would skip them too, but in
    torch 2.13 its ``normal_`` imports torch._dynamo, which costs more than it saves.)"""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _INITIALISERS:
            return args[0] if args else kwargs["tensor"]
        return func(*args, **kwargs)


def build_model(
    cfg: ModelConfig, src_vocab: int, tgt_vocab: int, *, initialise: bool = True
) -> Seq2Seq:
    """``initialise=False``: parameters left uninitialised, for a caller that loads all of them
    at once (``load_state_dict``, strict) before any use."""
    if initialise:
        return Seq2Seq(cfg, src_vocab, tgt_vocab)
    with _SkipInitialValues():
        return Seq2Seq(cfg, src_vocab, tgt_vocab)


__all__ = ["Seq2Seq", "build_model"]
