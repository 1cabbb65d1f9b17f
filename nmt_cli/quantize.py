"""Dynamic int8 quantisation for CPU decoding: Linear and RNN weights stored as int8, activations
quantised on the fly. Decoding-only; the float model stays what training and checkpoints use."""

from __future__ import annotations

import copy
import warnings

import torch
from torch import nn


def quantize_int8(model: nn.Module) -> nn.Module:
    try:
        from torch.ao.quantization import quantize_dynamic
    except ImportError:  # older torch
        from torch.quantization import quantize_dynamic
    model = copy.deepcopy(model).cpu().eval()
    tied = getattr(model, "output", None) is not None and \
        model.output.weight is getattr(model, "tgt_embedding", nn.Embedding(1, 1)).weight
    if tied:
        # Untie before quantising the output layer, so the embedding stays float.
        model.output.weight = nn.Parameter(model.output.weight.detach().clone())
    with warnings.catch_warnings():  # torch's own deprecation notes about its quantised tensors
        warnings.simplefilter("ignore", UserWarning)
        return quantize_dynamic(model, {nn.Linear, nn.GRU, nn.LSTM}, dtype=torch.qint8)
