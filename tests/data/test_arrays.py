import numpy as np
import pytest

from nmt_cli.data.arrays import ArrayWriter, SideWriter, id_dtype


def test_chunked_writer_makes_a_valid_npy_only_on_close(tmp_path):
    path = tmp_path / "a.npy"
    writer = ArrayWriter(path, np.uint16)
    writer.append(np.array([1, 2, 3]))
    writer.append(np.array([], dtype=np.int64))
    writer.append(np.arange(65530, 65536))
    assert not path.exists() and len(list(tmp_path.glob(".a.npy.*.part"))) == 1  # a killed run
    writer.close()
    loaded = np.load(path, mmap_mode="r")
    assert loaded.dtype == np.uint16 and loaded.tolist() == [1, 2, 3, *range(65530, 65536)]
    assert list(tmp_path.iterdir()) == [path]


def test_side_writer_offsets_and_abort(tmp_path):
    side = SideWriter(tmp_path, "train", "src", np.int32)
    side.append(np.array([5, 6, 7, 8]), np.array([3, 0, 1]))
    side.append(np.array([9, 10]), np.array([2]))
    assert side.close() == {"sentences": 4, "tokens": 6}
    assert np.load(tmp_path / "train.src.offsets.npy").tolist() == [0, 3, 3, 4, 6]
    other = SideWriter(tmp_path, "valid", "src", np.uint16)
    other.append(np.array([1]), np.array([1]))
    other.abort()
    assert not list(tmp_path.glob("valid.*"))


def test_ids_are_16_bit_while_the_vocabulary_fits(tmp_path):
    assert id_dtype(8000) == np.uint16 and id_dtype(65536) == np.uint16
    assert id_dtype(65537) == np.int32
    side = SideWriter(tmp_path, "train", "tgt", id_dtype(8000))
    with pytest.raises(ValueError, match="does not fit uint16"):
        side.append(np.array([70000]), np.array([1]))
    side.abort()
