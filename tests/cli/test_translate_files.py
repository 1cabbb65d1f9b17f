"""`nmt translate -i F -o F` and ``nmt_cli.translate_file`` on each document format with a tiny
model: the text translated, the structure and formatting as they were."""

from __future__ import annotations

import io
import zipfile

import pytest
from conftest import multi30k_lines, trained_copy
from document_files import PICTURE, docx, epub, markdown, odt, pptx, srt, vtt
from test_cli import nmt, one_line_error

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


@pytest.fixture(scope="module")
def run(tiny_run, tmp_path_factory):
    return trained_copy(tiny_run, tmp_path_factory, "files", max_steps=30, checkpoint_every=30)


def sources() -> dict[str, bytes]:
    lines = [x.rstrip(" .") for x in multi30k_lines("test_2016_flickr", "en", 8)]
    return {
        "docx": docx(*lines[:6]),
        "pptx": pptx(*lines[:4]),
        "odt": odt(*lines[:5]),
        "epub": epub(*lines[:4]),
        "srt": srt(*lines[:3]).encode(),
        "vtt": vtt(*lines[:2]).encode(),
        "md": markdown(lines[0], lines[1] + ".", lines[2], lines[3]).encode(),
    }


def structure(fmt: str, data: bytes) -> list:
    """What must not change: the members and their non-text parts, the lines that are not
    text."""
    if fmt in ("docx", "pptx", "odt", "epub"):
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            names = [i.filename for i in z.infolist()]
            return names + [PICTURE in z.read(n) for n in names]
    text = data.decode()
    keep = ("-->", "```", "|---", "WEBVTT", "NOTE", "[ref]", "title:")
    return [line for line in text.splitlines() if line.isdigit() or line.startswith(keep)]


def test_every_format_through_the_python_api(run, tmp_path):
    from nmt_cli import Translator, translate_file

    translator = Translator.load(run, threads=1)
    for fmt, data in sources().items():
        source, target = tmp_path / f"in.{fmt}", tmp_path / f"out.{fmt}"
        source.write_bytes(data)
        translate_file(translator, source, target)
        out = target.read_bytes()
        assert out != data and structure(fmt, out) == structure(fmt, data), fmt


def test_translate_takes_the_format_from_the_extension_or_format(run, tmp_path):
    data = sources()
    page = tmp_path / "page.docx"
    page.write_bytes(data["docx"])
    out = tmp_path / "page.fr.docx"
    result = nmt("translate", "-m", run, "--threads", 1, "-i", page, "-o", out)
    assert result.returncode == 0, result.stderr.decode()
    with zipfile.ZipFile(out) as z:
        document = z.read("word/document.xml").decode()
    assert '<w:pStyle w:val="Heading1"/>' in document and "<w:b/>" in document
    assert "<w:hyperlink" in document and "<w:tbl>" in document
    notes = tmp_path / "notes.txt"
    notes.write_bytes(data["md"])
    result = nmt("translate", "-m", run, "--threads", 1, "--format", "md", "-i", notes)
    assert result.returncode == 0, result.stderr.decode()
    assert "```python\nprint('not translated')\n```" in result.stdout.decode()
    bomb = tmp_path / "bomb.docx"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("word/document.xml", b" " * (4 << 20))
    one_line_error(nmt("translate", "-m", run, "-i", bomb, "-o", tmp_path / "x.docx"), "expands")
    one_line_error(
        nmt("translate", "-m", run, "-i", page, "-o", tmp_path / "y.docx", "--scores"), "--scores"
    )
    one_line_error(nmt("translate", "-m", run, "-i", page, "--shard", "0/2"), "--shard")
