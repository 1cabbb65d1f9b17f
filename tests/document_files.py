"""Small office, e-book, subtitle and markdown files built in the tests (nothing binary is
committed), and a stand-in translator that keeps the document layer's alignment contract."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence
from urllib.parse import quote

from nmt_cli.documents.plan import plan_documents
from nmt_cli.documents.protect import Protector
from nmt_cli.translation.results import Translation

PICTURE = b"\x89PNG\r\n\x1a\n" + bytes(range(64))  # any bytes: copied, never read


def reversed_upper(texts: Sequence[str], fmt: str, patterns: Sequence[str] = ()) -> list[str]:
    """Each segment's words reversed and upper-cased, aligned word to word, through the plan
    (a translation that reorders, so that tags must follow their words); ``patterns``: spans
    kept verbatim besides the built-in ones."""
    plan = plan_documents(list(texts), fmt=fmt, protector=Protector(list(patterns)))
    out = []
    for segment in plan.segments:
        words = segment.split()
        n = len(words)
        alignment = [(n - 1 - j, j) for j in range(n)]
        text = " ".join(w.upper() for w in reversed(words))
        out.append(Translation(segment, text, [], [], alignment=alignment))
    return plan.assemble(out)


def _zip(members: list[tuple[str, bytes | str]]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, data in members:
            stored = name == "mimetype"
            z.writestr(name, data, zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED)
    return out.getvalue()


W_NS = (
    'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
    'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" '
    'xmlns:w14="http://schemas.microsoft.com/office/word/2010/wordml" '
    'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006" mc:Ignorable="w14"'
)


def docx(title: str, before: str, bold: str, after: str, link: str, cell: str) -> bytes:
    """A Word document: a heading, a paragraph with a bold run, a hyperlink in italics and a
    tab, a list item, a table cell; a picture and the package's other parts."""
    document = f"""<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document {W_NS}><w:body>
<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>{title}</w:t></w:r></w:p>
<w:p><w:r><w:t xml:space="preserve">{before} </w:t></w:r>
<w:r><w:rPr><w:b/></w:rPr><w:t>{bold}</w:t></w:r>
<w:r><w:t xml:space="preserve"> {after} </w:t></w:r>
<w:hyperlink r:id="rId9"><w:r><w:rPr><w:i/></w:rPr><w:t>{link}</w:t></w:r></w:hyperlink>
<w:r><w:t>.</w:t><w:tab/><w:t>{title}</w:t></w:r></w:p>
<w:p><w:pPr><w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr></w:pPr>
<w:r><w:t>{cell}</w:t></w:r></w:p>
<w:tbl><w:tr><w:tc><w:p><w:r><w:t>{cell}</w:t></w:r></w:p></w:tc></w:tr></w:tbl>
<w:sectPr/></w:body></w:document>"""
    return _zip(
        [
            ("[Content_Types].xml", '<?xml version="1.0"?><Types/>'),
            ("_rels/.rels", '<?xml version="1.0"?><Relationships/>'),
            ("word/document.xml", document),
            ("word/_rels/document.xml.rels", '<?xml version="1.0"?><Relationships/>'),
            ("word/media/image1.png", PICTURE),
        ]
    )


def pptx(title: str, before: str, bold: str, notes: str) -> bytes:
    """A presentation: a slide with a title and a body of two runs (one bold), a slide number
    field; notes; a layout not translated."""
    a = 'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"'
    p = 'xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main"'
    slide = f"""<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<p:sld {a} {p}><p:cSld><p:spTree>
<p:sp><p:txBody><a:bodyPr/>
<a:p><a:r><a:rPr lang="en-US"/><a:t>{title}</a:t></a:r></a:p></p:txBody></p:sp>
<p:sp><p:txBody><a:bodyPr/><a:p><a:pPr lvl="1"/>
<a:r><a:rPr lang="en-US"/><a:t xml:space="preserve">{before} </a:t></a:r>
<a:r><a:rPr lang="en-US" b="1"/><a:t>{bold}</a:t></a:r>
<a:fld id="{{1}}" type="slidenum"><a:t>1</a:t></a:fld><a:endParaRPr lang="en-US"/></a:p>
</p:txBody></p:sp>
</p:spTree></p:cSld></p:sld>"""
    note = f"""<?xml version="1.0" encoding="UTF-8"?>
<p:notes {a} {p}><p:cSld><p:spTree><p:sp><p:txBody>
<a:p><a:r><a:t>{notes}</a:t></a:r></a:p>
</p:txBody></p:sp></p:spTree></p:cSld></p:notes>"""
    layout = f'<?xml version="1.0"?><p:sldLayout {a} {p}><a:p><a:r><a:t>Click</a:t></a:r></a:p>'
    layout += "</p:sldLayout>"
    return _zip(
        [
            ("[Content_Types].xml", '<?xml version="1.0"?><Types/>'),
            ("ppt/presentation.xml", '<?xml version="1.0"?><presentation/>'),
            ("ppt/slides/slide1.xml", slide),
            ("ppt/notesSlides/notesSlide1.xml", note),
            ("ppt/slideLayouts/slideLayout1.xml", layout),
            ("ppt/media/image1.png", PICTURE),
        ]
    )


def odt(title: str, before: str, bold: str, link: str, item: str) -> bytes:
    """An OpenDocument text: a heading, a paragraph with a bold span and a link, a list item,
    a footnote inside the paragraph, a styles part."""
    ns = (
        'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
        'xmlns:xlink="http://www.w3.org/1999/xlink"'
    )
    content = f"""<?xml version="1.0" encoding="UTF-8"?>
<office:document-content {ns} office:version="1.3"><office:body><office:text>
<text:h text:outline-level="1">{title}</text:h>
<text:p text:style-name="P1">{before} {{span}} {{a}}.{{note}}</text:p>
<text:list><text:list-item><text:p>{item}</text:p></text:list-item></text:list>
</office:text></office:body></office:document-content>"""
    anchor = f'<text:a xlink:href="https://example.com/x">{link}</text:a>'
    note = (
        '<text:note text:id="n1"><text:note-citation>1</text:note-citation>'
        f"<text:note-body><text:p>{item}</text:p></text:note-body></text:note>"
    )
    span = f'<text:span text:style-name="Bold">{bold}</text:span>'
    content = content.replace("{span}", span).replace("{a}", anchor).replace("{note}", note)
    return _zip(
        [
            ("mimetype", "application/vnd.oasis.opendocument.text"),
            ("content.xml", content),
            ("styles.xml", f'<?xml version="1.0"?><office:document-styles {ns}/>'),
            ("META-INF/manifest.xml", '<?xml version="1.0"?><manifest/>'),
            ("Pictures/a.png", PICTURE),
        ]
    )


def epub(title: str, before: str, bold: str, after: str, chapter: str = "text/ch1.xhtml") -> bytes:
    """An e-book: one chapter (member OEBPS/``chapter``, listed by its URL: a space is %20)
    with a heading, a paragraph with <b> and a link, a code block; its package document, style
    sheet and cover kept."""
    container = (
        '<?xml version="1.0"?><container version="1.0" '
        'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
        '<rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
        "</rootfiles></container>"
    )
    opf = (
        '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
        f'<manifest><item id="c1" href="{quote(chapter)}" media-type="application/xhtml+xml"/>'
        '<item id="css" href="style.css" media-type="text/css"/></manifest>'
        '<spine><itemref idref="c1"/></spine></package>'
    )
    document = f"""<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml"><head><title>{title}</title>
<link href="../style.css" rel="stylesheet"/></head>
<body><h1>{title}</h1>
<p class="first">{before} <b>{bold}</b> <a href="ch2.xhtml#x">{after}</a>.</p>
<pre>keep   this</pre></body></html>
"""
    return _zip(
        [
            ("mimetype", "application/epub+zip"),
            ("META-INF/container.xml", container),
            ("OEBPS/content.opf", opf),
            (f"OEBPS/{chapter}", document),
            ("OEBPS/style.css", "p { margin: 0 }"),
            ("OEBPS/cover.png", PICTURE),
        ]
    )


def srt(first: str, second: str, third: str) -> str:
    """Two cues, the first on two lines with an italic word; CRLF line ends."""
    half = first.split()
    cut = len(half) // 2
    return (
        "1\r\n00:00:01,000 --> 00:00:03,500\r\n"
        f"{' '.join(half[:cut])} <i>{half[cut]}</i>\r\n{' '.join(half[cut + 1 :])}\r\n\r\n"
        f"2\r\n00:00:04,000 --> 00:00:06,000\r\n{second}\r\n\r\n"
        f"3\r\n00:00:07,000 --> 00:00:08,000\r\n{third}\r\n"
    )


def vtt(first: str, second: str) -> str:
    """A WebVTT file: header, a NOTE, a STYLE block, a cue with an identifier and settings and
    a voice tag, a cue with a timestamp tag."""
    words = second.split()
    return (
        "WEBVTT - a file\n\nNOTE kept as it is\n\nSTYLE\n::cue { color: yellow }\n\n"
        f"intro\n00:01.000 --> 00:04.000 align:start line:0\n<v Anna>{first}</v>\n\n"
        f"00:05.000 --> 00:07.000\n{' '.join(words[:3])} <00:06.000>{' '.join(words[3:])}\n"
    )


def markdown(heading: str, sentence: str, item: str, cell: str) -> str:
    """Markdown with front matter, a heading, emphasis, inline code, a link, a bare URL, a
    list, a fenced code block, a table and a reference definition."""
    words = sentence.rstrip(".").split()
    return (
        "---\ntitle: Keep me\n---\n"
        f"# {heading}\n\n"
        f"{' '.join(words[:2])} **{words[2]}** `nmt translate` {' '.join(words[3:])} "
        '[the guide](https://example.com/guide "Guide") and\n'
        "https://example.com/a_b_c on a second line.\n\n"
        f"- {item}\n- *{cell}*\n\n"
        "```python\nprint('not translated')\n```\n\n"
        f"| {cell} | Notes |\n|---|---|\n| {item} | `x = 1` |\n\n"
        "[ref]: https://example.com/ref\n"
    )
