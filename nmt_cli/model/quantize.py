"""Dynamic int8 quantisation for CPU decoding: Linear and RNN weights stored as int8, activations
quantised on the fly. Decoding-only; the float model stays what training and checkpoints use.

The modules are swapped here, one by one, for torch's dynamically quantised ones. torch 2.13
deprecates the ``torch.ao.quantization.quantize_dynamic`` entry point in favour of torchao, whose
dynamic int8 covers Linear layers but not GRU or LSTM; the quantised modules themselves remain.
"""

from __future__ import annotations

import copy
import warnings

from torch import nn

from nmt_cli.model.fast_decoding import undo_preparation

try:
    import torch.ao.nn.quantized.dynamic as dynamic
    from torch.ao.quantization.qconfig import default_dynamic_qconfig
except ImportError:  # torch before 1.13
    import torch.nn.quantized.dynamic as dynamic
    from torch.quantization.qconfig import default_dynamic_qconfig

QUANTISED = {nn.Linear: dynamic.Linear, nn.GRU: dynamic.GRU, nn.LSTM: dynamic.LSTM}


def _swap(module: nn.Module) -> None:
    for name, child in module.named_children():
        quantised = QUANTISED.get(type(child))
        if quantised is None:
            _swap(child)
            continue
        child.qconfig = default_dynamic_qconfig  # int8 weights, per-tensor, as quantize_dynamic did
        setattr(module, name, quantised.from_float(child))


def quantize_int8(model: nn.Module) -> nn.Module:
    """An int8 copy of ``model`` (left as it is), to prepare for decoding afresh
    (nmt_cli/model/fast_decoding.py): a copy of a prepared model's decoding paths would still
    read the float modules."""
    model = copy.deepcopy(model).cpu().eval()
    undo_preparation(model)
    tied = (
        getattr(model, "output", None) is not None
        and model.output.weight is getattr(model, "tgt_embedding", nn.Embedding(1, 1)).weight
    )
    if tied:
        # Untie before quantising the output layer, so the embedding stays float.
        model.output.weight = nn.Parameter(model.output.weight.detach().clone())
    with warnings.catch_warnings():  # torch's own deprecation notes about its quantised tensors
        warnings.simplefilter("ignore", UserWarning)
        _swap(model)
    return model
