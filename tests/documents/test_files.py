"""Files through the document layer: each format's structure and formatting kept, its text
translated, other package members copied byte for byte, limits refused in one line."""

from __future__ import annotations

import io
import zipfile

import pytest
from conftest import multi30k_lines
from document_files import PICTURE, docx, epub, markdown, odt, pptx, reversed_upper, srt, vtt
from lxml import etree

from nmt_cli.documents.files import (
    FileLimits,
    counted_characters,
    format_patterns,
    translate_file,
)
from nmt_cli.documents.package import LimitError, PackageLimits
from nmt_cli.runtime.errors import UserError

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
T = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"


def words(n: int) -> list[str]:
    """Short phrases of real captions, without their full stops."""
    lines = multi30k_lines("test_2016_flickr", "en", 40)
    return [" ".join(line.rstrip(" .").split()[:5]) for line in lines][:n]


def translated(data: bytes, fmt: str, translate=None, limits=None) -> bytes:
    """``data`` in format ``fmt`` through ``translate`` (by default reversed_upper, keeping the
    spans the format keeps, as translate_path gives them to the translator)."""
    if translate is None:

        def translate(texts, text_fmt):
            return reversed_upper(texts, text_fmt, format_patterns(fmt))

    out = io.BytesIO()
    translate_file(io.BytesIO(data), out, fmt, translate, f"test.{fmt}", limits)
    return out.getvalue()


def members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {i.filename: z.read(i) for i in z.infolist()}


def kept_members(before: bytes, after: bytes, changed: set[str]) -> None:
    old, new = members(before), members(after)
    assert list(old) == list(new)
    for name in old:
        if name not in changed:
            assert old[name] == new[name], name
    assert all(old[name] != new[name] for name in changed)


def upper_words(*texts: str) -> list[str]:
    return sorted(w.upper() for t in texts for w in t.split())


def carried(got: str, source: str) -> bool:
    """Whether a formatted run's translation holds the words of its source, but for a word
    the alignment put next to it (the inline layer keeps each tag's range contiguous)."""
    got_words, wanted = got.replace(".", " ").split(), upper_words(source)
    return set(got_words) <= set(wanted) and len(got_words) >= len(wanted) - 1


def test_docx_runs_keep_their_formatting_on_their_words():
    title, before, bold, after, link, cell = words(6)
    source = docx(title, before, bold, after, link, cell)
    out = translated(source, "docx")
    kept_members(source, out, {"word/document.xml"})
    root = etree.fromstring(members(out)["word/document.xml"])
    paragraphs = list(root.iter(W + "p"))
    assert len(paragraphs) == 4 and root.find(f".//{W}tbl") is not None
    assert paragraphs[0].find(f"{W}pPr/{W}pStyle").get(W + "val") == "Heading1"
    assert paragraphs[2].find(f"{W}pPr/{W}numPr") is not None  # the list item stays one
    bold_runs = [r for r in root.iter(W + "r") if r.find(f"{W}rPr/{W}b") is not None]
    assert len(bold_runs) == 1 and carried(bold_runs[0].findtext(W + "t"), bold)
    (link_el,) = root.iter(W + "hyperlink")
    assert link_el.get("{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id")
    assert carried(link_el.findtext(f"{W}r/{W}t"), link)
    assert link_el.find(f"{W}r/{W}rPr/{W}i") is not None
    assert len(list(root.iter(W + "tab"))) == 1
    text = " ".join(t.text for t in paragraphs[1].iter(W + "t"))
    assert sorted(text.replace(".", " ").split()) == upper_words(before, bold, after, link, title)
    assert b'mc:Ignorable="w14"' in members(out)["word/document.xml"]  # prefixes as they were


def test_pptx_slides_and_notes_translated_layouts_and_fields_kept():
    title, before, bold, notes = words(4)
    source = pptx(title, before, bold, notes)
    out = translated(source, "pptx")
    kept_members(source, out, {"ppt/slides/slide1.xml", "ppt/notesSlides/notesSlide1.xml"})
    root = etree.fromstring(members(out)["ppt/slides/slide1.xml"])
    body = list(root.iter(A + "p"))[1]
    assert [c.tag for c in body][0] == A + "pPr" and [c.tag for c in body][-1] == A + "endParaRPr"
    assert body.find(f"{A}fld/{A}t").text == "1"
    (strong,) = [r for r in body.iter(A + "r") if r.find(A + "rPr").get("b") == "1"]
    assert carried(strong.findtext(A + "t"), bold)
    notes_root = etree.fromstring(members(out)["ppt/notesSlides/notesSlide1.xml"])
    assert sorted(notes_root.findtext(f".//{A}t").split()) == upper_words(notes)


def test_odt_spans_links_lists_and_notes():
    title, before, bold, link, item = words(5)
    source = odt(title, before, bold, link, item)
    out = translated(source, "odt")
    kept_members(source, out, {"content.xml"})
    assert next(iter(members(out))) == "mimetype"
    with zipfile.ZipFile(io.BytesIO(out)) as z:
        assert z.infolist()[0].compress_type == zipfile.ZIP_STORED
    root = etree.fromstring(members(out)["content.xml"])
    heading = next(root.iter(T + "h"))
    assert heading.get(T + "outline-level") == "1"
    assert sorted(heading.text.split()) == upper_words(title)
    span = next(root.iter(T + "span"))
    assert span.get(T + "style-name") == "Bold" and carried(span.text, bold)
    anchor = next(root.iter(T + "a"))
    assert anchor.get("{http://www.w3.org/1999/xlink}href") == "https://example.com/x"
    assert carried(anchor.text, link)
    note = next(root.iter(T + "note"))
    assert note.findtext(f"{T}note-citation") == "1"
    assert sorted(note.findtext(f"{T}note-body/{T}p").split()) == upper_words(item)
    assert next(root.iter(T + "list-item")).find(T + "p") is not None


@pytest.mark.parametrize("chapter_name", ["text/ch1.xhtml", "text/ch 1.xhtml"])
def test_epub_chapters_translated_package_kept(chapter_name):
    title, before, bold, after = words(4)
    source = epub(title, before, bold, after, chapter_name)
    out = translated(source, "epub")
    kept_members(source, out, {f"OEBPS/{chapter_name}"})
    chapter = members(out)[f"OEBPS/{chapter_name}"].decode()
    assert chapter.startswith('<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html>')
    assert '<a href="ch2.xhtml#x">' in chapter and "<pre>keep   this</pre>" in chapter
    assert f"<h1>{' '.join(reversed(title.upper().split()))}</h1>" in chapter
    assert carried(chapter.split("<b>")[1].split("</b>")[0], bold)


def test_subtitles_cue_by_cue_numbers_and_timings_untouched():
    first, second, third = multi30k_lines("val", "en", 3)
    source = srt(first, second, third)
    out = translated(source.encode(), "srt").decode()
    src_lines, out_lines = source.split("\r\n"), out.split("\r\n")
    assert len(out_lines) == len(src_lines)
    for a, b in zip(src_lines, out_lines):
        if "-->" in a or a.isdigit() or not a:
            assert a == b
    assert "<i>" in out_lines[2] + out_lines[3] and "</i>" in out_lines[2] + out_lines[3]
    assert sorted(" ".join(out_lines[2:4]).replace("<i>", "").replace("</i>", "").split()) == (
        upper_words(first)
    )
    source = vtt(first, second)
    out = translated(source.encode(), "vtt").decode()
    for kept in (
        "WEBVTT - a file\n\nNOTE kept as it is\n\nSTYLE\n::cue { color: yellow }\n\nintro\n",
        "00:01.000 --> 00:04.000 align:start line:0\n<v Anna>",
        "</v>\n\n00:05.000 --> 00:07.000\n",
        "<00:06.000>",
    ):
        assert kept in out
    assert out.count("\n") == source.count("\n")


def test_markdown_syntax_code_and_urls_untouched():
    heading, sentence, item, cell = multi30k_lines("test_2017_flickr", "en", 4)
    heading, item, cell = (" ".join(x.rstrip(" .").split()[:4]) for x in (heading, item, cell))
    source = markdown(heading, sentence, item, cell)
    out = translated(source.encode(), "md").decode()
    for kept in (
        "---\ntitle: Keep me\n---\n# ",
        "`nmt translate`",
        '](https://example.com/guide "Guide")',
        "https://example.com/a_b_c",
        "```python\nprint('not translated')\n```\n\n| ",
        "\n|---|---|\n| ",
        " | `x = 1` |\n\n[ref]: https://example.com/ref\n",
    ):
        assert kept in out, kept
    lines = out.split("\n")
    assert lines[3] == "# " + " ".join(reversed(heading.upper().split()))
    assert f"- {' '.join(reversed(item.upper().split()))}" in lines
    assert len(lines) == len(source.split("\n"))
    bold = out.split("**")[1]
    assert bold == sentence.split()[2].upper().rstrip(".")


def test_zip_bombs_and_entities_are_refused_in_one_line():
    source = docx(*words(6))
    with pytest.raises(LimitError, match="members, over the limit of 3"):
        translated(source, "docx", limits=FileLimits(PackageLimits(members=3)))
    with pytest.raises(LimitError, match="bytes, over the limit of 100"):
        translated(source, "docx", limits=FileLimits(PackageLimits(total_bytes=100)))
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("word/document.xml", b" " * (4 << 20))
    with pytest.raises(LimitError, match="expands .* times, over the limit of 100"):
        translated(bomb.getvalue(), "docx")
    laughs = (
        '<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]>'
        f'<w:document xmlns:w="{W[1:-1]}"><w:body><w:p><w:r><w:t>&b;</w:t>'
        "</w:r></w:p></w:body></w:document>"
    )
    evil = io.BytesIO()
    with zipfile.ZipFile(evil, "w") as z:
        z.writestr("word/document.xml", laughs)
    with pytest.raises(UserError, match="DOCTYPE or an entity"):
        translated(evil.getvalue(), "docx")
    evil = io.BytesIO()  # the same in UTF-16, where the bytes do not spell <!DOCTYPE
    with zipfile.ZipFile(evil, "w") as z:
        z.writestr(
            "word/document.xml", laughs.replace("1.0", '1.0" encoding="UTF-16').encode("utf-16")
        )
    with pytest.raises(UserError, match="DOCTYPE or an entity"):
        translated(evil.getvalue(), "docx")
    with pytest.raises(UserError, match="not a zip package"):
        translated(b"not a zip", "odt")
    with pytest.raises(LimitError, match="over 10 bytes"):
        translated(b"# A long heading\n", "md", limits=FileLimits(text_bytes=10))
    with pytest.raises(UserError, match="not UTF-8"):
        translated(b"1\n00:00:01,000 --> 00:00:02,000\n\xff\xfe\n", "srt")
    # a member whose compressed data is damaged (its header intact)
    damaged = bytearray(docx(*words(6)))
    with zipfile.ZipFile(io.BytesIO(bytes(damaged))) as z:
        info = z.getinfo("word/document.xml")
    data_at = info.header_offset + 30 + len(info.filename) + len(info.extra)
    damaged[data_at : data_at + 8] = b"\xff" * 8
    with pytest.raises(UserError, match="cannot unpack word/document.xml"):
        translated(bytes(damaged), "docx")


def test_characters_are_counted_without_translating():
    title, before, bold, after, link, cell = words(6)
    source = io.BytesIO(docx(title, before, bold, after, link, cell))
    sample: list[str] = []
    chars = counted_characters(source, "docx", sample=sample)
    assert source.tell() == 0 and title in sample[0]
    assert chars >= len(title + before + bold + after + link + cell)
    assert PICTURE not in b"".join(s.encode() for s in sample)


def test_subtitles_stream_a_group_of_cues_at_a_time():
    from nmt_cli.documents.subtitles import CUES_AT_ONCE, translate_subtitles

    read = [0]

    def lines():
        for k in range(CUES_AT_ONCE * 5):
            for line in (f"{k + 1}\n", "00:00:01,000 --> 00:00:02,000\n", "A dog runs.\n", "\n"):
                read[0] += 1
                yield line

    out = translate_subtitles(lines(), lambda texts, fmt: [t.upper() for t in texts])
    first = next(out)
    assert "A DOG RUNS." in first and read[0] <= 4 * (CUES_AT_ONCE + 2)
    assert sum(part.count("A DOG RUNS.") for part in out) + first.count("A DOG") == 5 * CUES_AT_ONCE


def _subtitled(text: str) -> str:
    from nmt_cli.documents.subtitles import translate_subtitles

    return "".join(translate_subtitles(iter(text.splitlines(True)), reversed_upper))


def test_a_cue_without_text_and_text_without_a_timing_line_keep_every_line_translated():
    srt = (
        "1\n00:00:01,000 --> 00:00:02,000\n\n"  # a cue without text
        "2\n00:00:03,000 --> 00:00:04,000\nA dog runs.\n\n"
        "Two cats sleep.\n\n"  # cut off its cue by a blank line: still the file's text
        "3\n00:00:05,000 --> 00:00:06,000\nA bird sings.\n"
    )
    assert _subtitled(srt) == (
        "1\n00:00:01,000 --> 00:00:02,000\n\n"
        "2\n00:00:03,000 --> 00:00:04,000\nRUNS. DOG A\n\n"
        "SLEEP. CATS TWO\n\n"
        "3\n00:00:05,000 --> 00:00:06,000\nSINGS. BIRD A\n"
    )
    vtt = (
        "WEBVTT - a title\nKind: captions\n\nNOTE a note --> not a cue\n\n"
        "STYLE\n::cue { color: red }\n\nREGION\nid:fred\n\n00:01.000 --> 00:02.000\nA dog runs.\n"
    )
    assert _subtitled(vtt) == vtt.replace("A dog runs.", "RUNS. DOG A")
    # the same first words in a SubRip file, which has no such blocks: text
    srt = "NOTE the dog.\n\n2\n00:00:03,000 --> 00:00:04,000\nSTYLE matters.\n"
    assert _subtitled(srt) == (
        "DOG. THE NOTE\n\n2\n00:00:03,000 --> 00:00:04,000\nMATTERS. STYLE\n"
    )


def test_markdown_entities_and_escapes_come_back_as_written():
    source = "Tom &amp; Jerry run \\*fast\\* to the <span>park</span>.\n"
    kept = format_patterns("md")
    out = translated(source.encode(), "md", lambda t, f: reversed_upper(t, f, kept)).decode()
    assert "&amp;" in out and "\\*" in out and "<span>" in out and "</span>" in out


def test_a_text_box_inside_a_run_with_words_is_translated_too():
    box = (
        "<w:drawing><wps:txbx><w:txbxContent><w:p><w:r><w:t>two dogs play</w:t></w:r></w:p>"
        "</w:txbxContent></wps:txbx></w:drawing>"
    )
    document = (
        f'<w:document xmlns:w="{W[1:-1]}" xmlns:wps="urn:wps"><w:body><w:p><w:r>'
        f"<w:rPr><w:b/></w:rPr><w:t>a man runs</w:t>{box}</w:r></w:p></w:body></w:document>"
    )
    package = io.BytesIO()
    with zipfile.ZipFile(package, "w") as z:
        z.writestr("word/document.xml", document)
    root = etree.fromstring(members(translated(package.getvalue(), "docx"))["word/document.xml"])
    texts = [t.text for t in root.iter(W + "t")]
    assert "PLAY DOGS TWO" in texts  # the box's own paragraph, inside the copied part
    texts.remove("PLAY DOGS TWO")
    assert sorted(" ".join(texts).split()) == ["A", "MAN", "RUNS"]
    assert all(r.find(f"{W}rPr/{W}b") is not None for r in root.find(f"{W}body/{W}p"))


def test_markdown_lines_are_cut_where_the_parser_cuts_them_and_cells_with_escapes_translate():
    source = (
        "A dog\x0cruns.\n\nA man\u2028walks.\n\nTwo cats sleep.\n\n"  # not line ends to markdown
        "A line ends with a break\\\nand goes on.\n\n"
        "| A | B |\n|---|---|\n| A dog \\| a cat | Two men sit. |\n"
    )
    out = translated(source.encode(), "md").decode()
    assert "SLEEP. CATS TWO" in out  # every paragraph after the form feed is translated
    lines = out.splitlines()
    assert lines[6].endswith("BREAK\\") and "\\" not in lines[7]  # the break ends its line
    assert "SIT. MEN TWO" in out
    cell = out.splitlines()[-1].split(" | ")[0]
    assert "\\|" in cell and "DOG" in cell  # the escaped pipe kept, the cell translated
    assert out.count("\n") == source.count("\n")


def test_markdown_too_deep_or_too_intricate_is_a_one_line_error_and_emphasis_still_carries():
    with pytest.raises(UserError, match="nests emphasis and links more than 100 deep"):
        translated(("[" * 1000 + "a" + "](u)" * 1000 + "\n").encode(), "md")
    with pytest.raises(UserError, match="open and never close"):
        translated(("*a " * 3300 + "\n").encode(), "md")
    # long runs of markers cost a step a run, not a step a marker
    out = translated(("*" * 5000 + "Two dogs." + "*" * 5000 + "\n").encode(), "md").decode()
    assert "DOGS." in out
    out = translated(b"A **big** dog and _a cat_ run.\n", "md").decode()
    assert "**BIG**" in out and "_CAT A_" in out
