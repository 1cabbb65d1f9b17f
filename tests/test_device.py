import pytest
import torch

from nmt_cli.device import autocast_context, native_bf16, pick_device, resolve_precision
from nmt_cli.errors import UserError


def test_precision_auto_uses_bf16_only_on_a_cpu_whose_hardware_has_it():
    cpu = torch.device("cpu")
    assert resolve_precision("auto", cpu) == ("bf16" if native_bf16(cpu) else "fp32")
    assert resolve_precision("fp32", cpu) == "fp32"
    assert resolve_precision("bf16", cpu) == "bf16"  # an explicit choice is kept (and warned about)
    with pytest.raises(UserError, match="fp16 needs a CUDA device"):
        resolve_precision("fp16", cpu)
    assert resolve_precision("auto", torch.device("cuda")) == "fp32"  # launch-bound on a GPU


def test_autocast_context_casts_matmuls_only_when_asked():
    a, b = torch.randn(4, 8), torch.randn(8, 3)
    with autocast_context(torch.device("cpu"), "fp32"):
        assert (a @ b).dtype == torch.float32
    with autocast_context(torch.device("cpu"), "bf16"):
        assert (a @ b).dtype == torch.bfloat16


def test_pick_device():
    assert pick_device("cpu") == torch.device("cpu")
    assert pick_device("auto").type in ("cpu", "cuda", "mps")
    if not torch.cuda.is_available():
        with pytest.raises(UserError, match="--device cuda: no CUDA device"):
            pick_device("cuda")
