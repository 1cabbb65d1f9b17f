"""An output file appears, whole, only when its writer completes."""

import pytest

from nmt_cli.runtime.errors import UserError
from nmt_cli.runtime.output_file import atomic_text_output, atomic_write, write_text_atomic


def test_the_file_appears_only_when_complete(tmp_path):
    out = tmp_path / "out.txt"
    with atomic_text_output(out) as fh:
        fh.write("one\n")
        fh.flush()
        assert not out.exists() and len(list(tmp_path.iterdir())) == 1  # the temporary file
    assert out.read_text() == "one\n" and list(tmp_path.iterdir()) == [out]


def test_an_interruption_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    out = tmp_path / "out.txt"
    out.write_text("yesterday's\n")
    with pytest.raises(KeyboardInterrupt), atomic_text_output(out) as fh:
        fh.write("half")
        raise KeyboardInterrupt
    assert out.read_text() == "yesterday's\n" and list(tmp_path.iterdir()) == [out]


def test_unwritable_places_are_one_line_errors(tmp_path):
    with pytest.raises(UserError, match="is a folder"), atomic_text_output(tmp_path):
        pass
    with pytest.raises(UserError, match="cannot write"):
        with atomic_text_output(tmp_path / "missing" / "out.txt"):
            pass


def test_no_path_means_the_caller_writes_to_stdout():
    with atomic_text_output(None) as fh:
        assert fh is None


def test_a_crash_mid_write_leaves_the_old_file(tmp_path):
    out = tmp_path / "meta.json"
    write_text_atomic(out, "old\n")
    with pytest.raises(OSError), atomic_write(out, "w") as fh:
        fh.write("half of the new")
        fh.flush()
        assert out.read_text() == "old\n"  # readers see the old file while the new one is written
        raise OSError(28, "No space left on device")
    assert out.read_text() == "old\n" and list(tmp_path.iterdir()) == [out]
    with atomic_write(out) as fh:  # binary by default
        fh.write(b"new\n")
    assert out.read_bytes() == b"new\n" and list(tmp_path.iterdir()) == [out]
