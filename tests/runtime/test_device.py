import pytest
import torch

from nmt_cli.runtime.device import (
    DEVICE_CHOICES,
    autocast_context,
    available_devices,
    check_device,
    cpu_multiplies_bf16,
    native_bf16,
    pick_device,
    resolve_decode_precision,
    resolve_precision,
)
from nmt_cli.runtime.errors import UserError
from tests.cli.test_cli import nmt, one_line_error


def test_precision_auto_uses_bf16_only_on_a_cpu_whose_hardware_has_it():
    cpu = torch.device("cpu")
    assert resolve_precision("auto", cpu) == ("bf16" if native_bf16(cpu) else "fp32")
    assert resolve_precision("fp32", cpu) == "fp32"
    assert resolve_precision("bf16", cpu) == "bf16"  # an explicit choice is kept (and warned about)
    with pytest.raises(UserError, match="fp16 needs a CUDA device"):
        resolve_precision("fp16", cpu)
    assert resolve_precision("auto", torch.device("cuda")) == "fp32"  # launch-bound on a GPU


def test_decoding_precision_auto_is_bf16_only_on_a_bf16_cpu_and_never_under_int8():
    cpu = torch.device("cpu")
    assert resolve_decode_precision("auto", cpu) == ("bf16" if native_bf16(cpu) else "fp32")
    assert resolve_decode_precision("auto", torch.device("cuda")) == "fp32"
    assert resolve_decode_precision("bf16", cpu) == "bf16"
    assert resolve_decode_precision("auto", cpu, quantize="int8") == "int8"
    assert resolve_decode_precision("fp32", cpu, quantize="int8") == "int8"
    assert resolve_decode_precision("int8", cpu) == "int8"
    with pytest.raises(UserError, match="int8 decoding .* runs on the CPU, not cuda"):
        resolve_decode_precision("int8", torch.device("cuda"))
    with pytest.raises(UserError, match="exclude each other"):
        resolve_decode_precision("bf16", cpu, quantize="int8")
    with pytest.raises(UserError, match="--precision: 'fp16' is not one of auto, fp32, bf16, int8"):
        resolve_decode_precision("fp16", cpu)


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
        with pytest.raises(UserError, match="'cuda' is not on this machine"):
            pick_device("cuda")
    with pytest.raises(UserError, match="'gpu' is not a device"):
        pick_device("gpu")


def _lacking() -> list[str]:
    """Device choices this machine does not have."""
    has = available_devices()
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return [name for name in ("cuda", f"cuda:{gpus}", "mps") if name not in has]


def test_check_device_names_the_choices_and_what_this_machine_has():
    has = available_devices()
    assert has[0] == "cpu"
    for name in ["auto", *has]:
        check_device(name)  # accepted
    for name, problem in [("gpu", "is not a device"), ("CPU", "is not a device")] + [
        (name, "is not on this machine") for name in _lacking()
    ]:
        with pytest.raises(UserError) as info:
            check_device(name)
        message = str(info.value)
        assert f"'{name}' {problem}" in message and "\n" not in message
        assert ", ".join(DEVICE_CHOICES) in message
        assert f"this machine has {', '.join(has)}" in message


# Each command that takes --device, with what else it needs to get as far as reading it
DEVICE_COMMANDS = {
    "translate": ["translate", "-m", "no-such-run"],
    "eval": ["eval", "--hyp", "h.txt", "--ref", "r.txt"],
    "score": ["score", "-m", "no-such-run", "--src", "s.txt", "--tgt", "t.txt"],
    "train": ["train", "recipes/en-fr.yaml"],
    "serve": ["serve", "-m", "no-such-run"],
}


@pytest.mark.parametrize("command", sorted(DEVICE_COMMANDS))
def test_a_device_that_is_not_a_choice_is_one_line_and_exit_2_in_every_command(command):
    result = nmt(*DEVICE_COMMANDS[command], "--device", "gpu")
    one_line_error(result, "--device: 'gpu' is not a device", "choose from auto, cpu, cuda")
    assert "this machine has cpu" in result.stderr.decode()


@pytest.mark.parametrize("name", ["CPU", "tpu", "cuda:x", *_lacking()])
def test_every_device_the_machine_lacks_is_refused_before_anything_is_read(name):
    result = nmt(*DEVICE_COMMANDS["translate"], "--device", name)
    one_line_error(result, f"--device: '{name}' is not", "this machine has cpu")


def test_threads_come_from_the_flag_then_the_environment_then_the_idle_cores(monkeypatch):
    from nmt_cli.runtime import device

    monkeypatch.delenv("NMT_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(device, "default_threads", lambda: 3)
    assert device.resolve_threads(2) == (2, "--threads")
    assert device.resolve_threads() == (3, "cores not busy")
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    assert device.resolve_threads() == (4, "$OMP_NUM_THREADS")
    monkeypatch.setenv("NMT_THREADS", "5")
    assert device.resolve_threads() == (5, "$NMT_THREADS")
    assert device.resolve_threads(1) == (1, "--threads")
    monkeypatch.setenv("NMT_THREADS", "many")
    with pytest.raises(
        UserError, match=r"\$NMT_THREADS: must be a whole number of 1 or more, got 'many'"
    ):
        device.resolve_threads()
    with pytest.raises(UserError, match="--threads: must be 1 or more"):
        device.resolve_threads(0)


def test_configure_threads_sets_torch(monkeypatch):
    from nmt_cli.runtime import device

    before = torch.get_num_threads()
    try:
        assert device.configure_threads(1) == 1 and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_default_threads_are_the_cores_other_processes_leave_free(monkeypatch):
    from nmt_cli.runtime import device

    monkeypatch.setattr(device, "usable_cores", lambda: 4)
    for busy, expected in ((0.0, 4), (0.3, 4), (1.0, 3), (1.6, 2), (3.9, 1), (4.0, 1)):
        monkeypatch.setattr(device, "busy_cores", lambda busy=busy: busy)
        assert device.default_threads() == expected, busy
    monkeypatch.setattr(device, "usable_cores", lambda: 1)
    assert device.default_threads() == 1


def cpuinfo(*flag_lines: str) -> str:
    return "".join(
        f"processor\t: {i}\nvendor_id\t: GenuineIntel\nflags\t\t: {flags}\n\n"
        for i, flags in enumerate(flag_lines)
    )


def test_bf16_hardware_is_read_from_every_processor_s_flags():
    plain = "fpu sse2 avx2 avx512f avx512bw avx512vl avx512dq"  # AVX-512 emulates bf16
    assert cpu_multiplies_bf16(cpuinfo(plain + " avx512_bf16", plain + " avx512_bf16"))
    assert cpu_multiplies_bf16(cpuinfo(plain + " amx_bf16 amx_tile"))
    assert not cpu_multiplies_bf16(cpuinfo(plain, plain))
    assert not cpu_multiplies_bf16(cpuinfo(plain + " avx512_bf16", plain))  # one core without
    assert not cpu_multiplies_bf16(cpuinfo(plain + " avx512_bf16_like"))
    aarch64 = "processor\t: 0\nFeatures\t: fp asimd bf16\n"  # not an x86 flags line
    assert not cpu_multiplies_bf16(aarch64)
    assert not cpu_multiplies_bf16("")


@pytest.mark.skipif(not __import__("os").path.exists("/proc/cpuinfo"), reason="reads /proc/cpuinfo")
def test_a_cpu_listing_bf16_flags_decodes_in_bf16_by_default():
    text = open("/proc/cpuinfo").read()
    listed = cpu_multiplies_bf16(text)
    assert listed == any(flag in text.split() for flag in ("avx512_bf16", "amx_bf16"))
    cpu = torch.device("cpu")
    assert native_bf16(cpu) == (listed and torch.backends.mkldnn.is_available())
    assert resolve_decode_precision("auto", cpu) == ("bf16" if native_bf16(cpu) else "fp32")
