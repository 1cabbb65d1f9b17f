import subprocess
import sys

from nmt_cli.documents.formats import EXTENSIONS, MEDIA_TYPES, PACKAGES, format_of


def test_formats_from_extensions():
    assert format_of("a/b.DOCX") == "docx" and format_of("x.markdown") == "md"
    assert format_of("x.txt", "srt") == "srt" and format_of("x.pdf") is None
    assert format_of(None) is None
    assert set(EXTENSIONS.values()) == set(MEDIA_TYPES) and set(PACKAGES) <= set(MEDIA_TYPES)


def test_plain_text_options_import_no_format_parser():
    """Working out a plain-text translation's format and options loads neither lxml nor
    markdown-it: those are the file formats' own, and plain text starts without them."""
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from nmt_cli.cli.translating import _document_options, _input_format\n"
        "from nmt_cli.documents.lines import OutputOptions\n"
        "fmt = _input_format(Path('in.txt'), None)\n"
        "_document_options(fmt, True, None, OutputOptions(), False)\n"
        "print(fmt, sorted(m for m in ('lxml', 'markdown_it') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["text", "[]"]
