import os
import pickle
import random

import pytest
import torch

from nmt_cli.runtime.errors import CheckpointError
from nmt_cli.training import checkpoint as ckpt
from tests.conftest import trained_copy


def test_atomic_save_and_safe_load(tmp_path):
    path = tmp_path / "c.pt"
    ckpt.save_atomic({"format": ckpt.FORMAT, "model": {"w": torch.ones(2)}}, path)
    assert torch.equal(ckpt.load(path)["model"]["w"], torch.ones(2))
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_pickle_that_runs_code_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"format": 1, "model": {}, "x": _Evil(marker)}, path)
    with pytest.raises(CheckpointError, match="refused"):
        ckpt.load(path)
    assert not marker.exists()
    # A raw pickle (not a torch zip) is refused the same way.
    raw = tmp_path / "raw.pt"
    raw.write_bytes(pickle.dumps(_Evil(marker)))
    with pytest.raises(CheckpointError):
        ckpt.load(raw)
    assert not marker.exists()


def _junk(count: int) -> list[bytes]:
    rng = random.Random(0)  # fixed: 300 blobs hit IndexError and struct.error inside the unpickler
    return [b"", b"\x00" * 10] + [
        rng.randbytes(rng.choice([1, 10, 100, 1000, 4096])) for _ in range(count)
    ]


def test_broken_files_give_one_line(tmp_path):
    path = tmp_path / "bad.pt"
    for content in _junk(300):
        path.write_bytes(content)
        with pytest.raises(CheckpointError) as info:
            ckpt.load(path)
        assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_truncated_checkpoint(tmp_path):
    path = tmp_path / "c.pt"
    ckpt.save_atomic({"format": ckpt.FORMAT, "model": {"w": torch.randn(1000)}}, path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="corrupt or truncated"):
        ckpt.load(path)


def test_failed_write_keeps_the_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "c.pt"
    ckpt.save_atomic({"format": ckpt.FORMAT, "model": {"w": torch.zeros(3)}}, path)

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", disk_full)
    with pytest.raises(OSError):
        ckpt.save_atomic({"format": ckpt.FORMAT, "model": {"w": torch.ones(3)}}, path)
    monkeypatch.undo()
    assert torch.equal(ckpt.load(path)["model"]["w"], torch.zeros(3))
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]


def test_not_a_checkpoint_and_missing(tmp_path):
    path = tmp_path / "other.pt"
    torch.save({"weights": torch.ones(1)}, path)
    with pytest.raises(CheckpointError, match="not an nmt checkpoint"):
        ckpt.load(path)
    with pytest.raises(CheckpointError, match="no such run dir or checkpoint"):
        ckpt.resolve(tmp_path / "missing")
    with pytest.raises(CheckpointError, match="no checkpoint yet"):
        ckpt.resolve(tmp_path)


@pytest.mark.parametrize(
    "name, content, kind",
    [
        ("en-fr.yaml", b"name: en-fr\nsrc: en\ntgt: fr\n", "a YAML file, perhaps a recipe"),
        ("notes.txt", "caf\u00e9 cr\u00e8me\n".encode(), "a text file"),
        ("noise.bin", bytes(range(1, 256)) * 4, "unknown binary content"),
        ("empty.pt", b"", "an empty file"),
    ],
)
def test_files_that_torch_never_wrote_are_named_not_checkpoints(tmp_path, name, content, kind):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(CheckpointError) as info:
        ckpt.load(path)
    message = str(info.value)
    assert message.startswith(f"{path}: not a checkpoint ({kind}")
    assert "could run code" not in message


@pytest.fixture(scope="module")
def trained_run(tiny_run, tmp_path_factory):
    return trained_copy(tiny_run, tmp_path_factory, "ckpt", max_steps=8, checkpoint_every=8)


def _outputs(loaded, lines, beam):
    from nmt_cli.config.sections import DecodeConfig
    from nmt_cli.translation.translator import Translator

    tr = Translator(
        loaded.model,
        loaded.tokenizer,
        DecodeConfig(beam_size=beam, batch_size=8, shortlist=True, workers=1),
        shortlist=loaded.shortlist,
        warn=lambda m: None,
    )
    return [(t.text, t.hypotheses[0].tokens, t.hypotheses[0].score) for t in tr.translate(lines)]


def test_mapped_load_gives_the_plain_load_s_weights_and_translations(trained_run):
    fast, plain = ckpt.load_model(trained_run), ckpt.load_model(trained_run, fast=False)
    a, b = fast.model.state_dict(), plain.model.state_dict()
    assert a.keys() == b.keys()
    for key in a:
        assert a[key].dtype == b[key].dtype and torch.equal(a[key], b[key]), key
    assert fast.shortlist is not None and not hasattr(fast.model, "shortlist")
    assert torch.equal(fast.shortlist.table, plain.shortlist.table)
    assert fast.path == plain.path == ckpt.resolve(trained_run) and fast.recipe == plain.recipe
    lines = (trained_run / "data" / "valid.src.txt").read_text(encoding="utf-8").split("\n")[:24]
    for beam in (1, 3):
        assert _outputs(fast, lines, beam) == _outputs(plain, lines, beam)


def test_a_loaded_model_survives_its_file_being_replaced(trained_run, tmp_path):
    import shutil

    path = tmp_path / "model.pt"
    shutil.copyfile(ckpt.resolve(trained_run), path)
    loaded = ckpt.load_model(path)
    lines = ["A man is riding a bike.", "Two dogs play in the snow."]
    before = _outputs(loaded, lines, 2)
    payload = ckpt.load(path)
    payload["model"] = {k: torch.zeros_like(v) for k, v in payload["model"].items()}
    ckpt.save_atomic(payload, path)  # what training does to best.pt while a server has it loaded
    assert _outputs(loaded, lines, 2) == before


def test_mapping_falls_back_to_reading_a_legacy_file(tmp_path):
    path = tmp_path / "old.pt"
    torch.save(
        {"format": ckpt.FORMAT, "model": {"w": torch.arange(4.0)}},
        path,
        _use_new_zipfile_serialization=False,
    )
    assert torch.equal(ckpt.load(path, mmap=True)["model"]["w"], torch.arange(4.0))
