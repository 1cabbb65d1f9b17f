"""Each document format round-tripped through a model: .docx, .pptx, .odt, .epub, .srt, .vtt and
.md files built from test sentences, one sentence a paragraph (a slide line, a cue), with bold,
italic and link runs over random words, translated by `nmt_cli.translate_file`.

For each format: whether the structure came back as it was (the package's members in order,
those not translated byte for byte, as many paragraphs, headings, tables, bold, italic and link
runs; for text formats every line that is not text), the share of formatted runs that still hold
words, the share of paragraphs translated (changed), the share whose words (tags left out) equal
the same sentence translated as plain text, and seconds.

    python bench/documents.py -m runs/en-fr --split test_2016_flickr --sentences 200 --threads 1

``libraries``: the candidates for reading the formats, on a generated .docx, .pptx and .odt and
subtitle files: whether a load and save keeps the package's other parts and the namespace
prefixes, and seconds to read, walk the runs and write:

    python bench/documents.py libraries --paragraphs 2000
"""

from __future__ import annotations

import argparse
import gzip
import html
import io
import os
import random
import re
import sys
import tempfile
import time
import zipfile
from pathlib import Path

PICTURE = bytes(range(256)) * 4
URL = "https://example.com/page"


def spans(words: list[str], rng: random.Random) -> tuple[int, int, int, int]:
    """Two disjoint word ranges of a sentence: (bold start, bold end, link start, link end)."""
    n = len(words)
    a = rng.randrange(0, max(1, n // 2))
    b = min(n // 2, a + rng.randint(1, 2))
    c = rng.randrange(b, n)
    d = min(n, c + rng.randint(1, 2))
    return a, max(b, a + 1), c, d


def runs(sentence: str, rng: random.Random) -> list[tuple[str, str]]:
    """(kind, text) of a sentence cut into plain, bold and link runs."""
    words = sentence.split()
    a, b, c, d = spans(words, rng)
    parts = [("", words[:a]), ("b", words[a:b]), ("", words[b:c]), ("a", words[c:d])]
    parts.append(("", words[d:]))
    out, first = [], True
    for kind, chosen in parts:
        if chosen:
            out.append((kind, ("" if first else " ") + " ".join(chosen)))
            first = False
    return out


def _zip(members: list[tuple[str, str | bytes]]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, data in members:
            kind = zipfile.ZIP_STORED if name == "mimetype" else zipfile.ZIP_DEFLATED
            z.writestr(name, data, kind)
    return out.getvalue()


def build(fmt: str, sentences: list[str], seed: int = 1) -> bytes:
    """A file of format ``fmt``, one sentence a paragraph (a slide line, a cue), each cut into
    plain, bold and link runs over random words."""
    rng = random.Random(seed)
    cut = [runs(s, rng) for s in sentences]
    builders = {"docx": _docx, "pptx": _pptx, "odt": _odt, "epub": _epub, "md": _markdown}
    if fmt in ("srt", "vtt"):
        return _subtitles(cut, fmt)
    return builders[fmt](cut)


def _esc(text: str) -> str:
    return html.escape(text, quote=False)


def _docx(cut: list) -> bytes:
    w = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    r = 'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"'

    def run(kind, text):
        props = {"b": "<w:rPr><w:b/></w:rPr>", "a": "<w:rPr><w:i/></w:rPr>"}.get(kind, "")
        body = f'<w:r>{props}<w:t xml:space="preserve">{_esc(text)}</w:t></w:r>'
        return f'<w:hyperlink r:id="rId1">{body}</w:hyperlink>' if kind == "a" else body

    paragraphs = []
    for k, parts in enumerate(cut):
        style = '<w:pPr><w:pStyle w:val="Heading2"/></w:pPr>' if k % 10 == 0 else ""
        p = f"<w:p>{style}{''.join(run(*x) for x in parts)}</w:p>"
        if k % 10 == 5:
            p = f"<w:tbl><w:tr><w:tc>{p}</w:tc></w:tr></w:tbl>"
        paragraphs.append(p)
    document = f"<?xml version='1.0'?><w:document {w} {r}><w:body>{''.join(paragraphs)}"
    document += "<w:sectPr/></w:body></w:document>"
    return _zip(
        [
            ("[Content_Types].xml", "<Types/>"),
            ("word/document.xml", document),
            ("word/media/image1.png", PICTURE),
        ]
    )


def _pptx(cut: list) -> bytes:
    a = 'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"'
    p = 'xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main"'
    slides = []
    for at in range(0, len(cut), 5):
        body = ""
        for parts in cut[at : at + 5]:
            marks = {"b": ' b="1"', "a": ' i="1"'}
            rr = "".join(
                f'<a:r><a:rPr lang="en-US"{marks.get(k, "")}/><a:t>{_esc(t)}</a:t></a:r>'
                for k, t in parts
            )
            body += f'<a:p>{rr}<a:endParaRPr lang="en-US"/></a:p>'
        slides.append(
            f"<?xml version='1.0'?><p:sld {a} {p}><p:cSld><p:spTree><p:sp><p:txBody>"
            f"<a:bodyPr/>{body}</p:txBody></p:sp></p:spTree></p:cSld></p:sld>"
        )
    members = [(f"ppt/slides/slide{k + 1}.xml", s) for k, s in enumerate(slides)]
    return _zip([("[Content_Types].xml", "<Types/>"), *members, ("ppt/m.png", PICTURE)])


def _odt(cut: list) -> bytes:
    ns = (
        'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
        'xmlns:xlink="http://www.w3.org/1999/xlink"'
    )

    def span(kind, text):
        if kind == "b":
            return f'<text:span text:style-name="Bold">{_esc(text)}</text:span>'
        if kind == "a":
            return f'<text:a xlink:href="{URL}">{_esc(text)}</text:a>'
        return _esc(text)

    body = "".join(
        (
            f'<text:h text:outline-level="2">{"".join(span(*x) for x in parts)}</text:h>'
            if k % 10 == 0
            else f"<text:p>{''.join(span(*x) for x in parts)}</text:p>"
        )
        for k, parts in enumerate(cut)
    )
    content = (
        f"<?xml version='1.0'?><office:document-content {ns}><office:body><office:text>"
        f"{body}</office:text></office:body></office:document-content>"
    )
    return _zip(
        [
            ("mimetype", "application/vnd.oasis.opendocument.text"),
            ("content.xml", content),
            ("Pictures/a.png", PICTURE),
        ]
    )


def _epub(cut: list) -> bytes:

    def tag(kind, text):
        if kind == "b":
            return f"<b>{_esc(text)}</b>"
        if kind == "a":
            return f'<a href="{URL}">{_esc(text)}</a>'
        return _esc(text)

    body = "\n".join(
        f"<h2>{''.join(tag(*x) for x in parts)}</h2>"
        if k % 10 == 0
        else f"<p>{''.join(tag(*x) for x in parts)}</p>"
        for k, parts in enumerate(cut)
    )
    chapter = (
        '<?xml version="1.0" encoding="utf-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml">'
        f"<head><title>T</title></head><body>\n{body}\n</body></html>\n"
    )
    return _zip(
        [
            ("mimetype", "application/epub+zip"),
            ("OEBPS/ch1.xhtml", chapter),
            ("OEBPS/cover.png", PICTURE),
        ]
    )


def _subtitles(cut: list, fmt: str) -> bytes:
    out = ["WEBVTT\n\n"] if fmt == "vtt" else []
    for k, parts in enumerate(cut):
        text = "".join(f"<i>{t}</i>" if kind else t for kind, t in parts)
        words = text.split(" ")
        half = len(words) // 2
        lines = [" ".join(words[:half]), " ".join(words[half:])] if half else [text]
        start, sep = k * 3, "," if fmt == "srt" else "."
        timing = f"00:{start // 60:02d}:{start % 60:02d}{sep}000 --> "
        timing += f"00:{(start + 2) // 60:02d}:{(start + 2) % 60:02d}{sep}500"
        number = f"{k + 1}\n" if fmt == "srt" else ""
        out.append(f"{number}{timing}\n" + "\n".join(lines) + "\n\n")
    return "".join(out).encode()


def _markdown(cut: list) -> bytes:

    def mark(kind, text):
        lead = text[: len(text) - len(text.lstrip())]
        core = text.strip()
        if kind == "b":
            return f"{lead}**{core}**"
        if kind == "a":
            return f"{lead}[{core}]({URL})"
        return text

    blocks = []
    for k, parts in enumerate(cut):
        text = "".join(mark(*x) for x in parts)
        blocks.append(f"## {text}" if k % 10 == 0 else f"- {text}" if k % 10 == 7 else text)
        if k % 10 == 3:
            blocks.append("```\ncode stays\n```")
    return ("\n\n".join(blocks) + "\n").encode()


def paragraph_texts(fmt: str, data: bytes) -> list[str]:
    """The text of each paragraph (slide line, cue) of a built or translated file, tags out."""
    if fmt in ("docx", "pptx", "odt", "epub"):
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            names = [
                n
                for n in z.namelist()
                if re.search(r"(document|slide\d+|content)\.xml$|\.xhtml$", n)
            ]
            names.sort(key=lambda n: [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", n)])
            xml = "".join(z.read(n).decode() for n in names)
        pattern = {
            "docx": r"<w:p>(.*?)</w:p>",
            "pptx": r"<a:p>(.*?)</a:p>",
            "odt": r"<text:[ph]\b[^>]*>(.*?)</text:[ph]>",
            "epub": r"<(?:p|h2)>(.*?)</(?:p|h2)>",
        }[fmt]
        texts = [html.unescape(re.sub(r"<[^>]+>", "", m)) for m in re.findall(pattern, xml)]
        return [" ".join(t.split()) for t in texts]
    text = data.decode()
    if fmt in ("srt", "vtt"):
        cues = [b.split("\n") for b in text.strip().split("\n\n") if "-->" in b]
        return [
            " ".join(re.sub(r"<[^>]+>", "", " ".join(c[2 if fmt == "srt" else 1 :])).split())
            for c in cues
        ]
    out = []
    for block in text.strip().split("\n\n"):
        if block.startswith("```"):
            continue
        block = re.sub(r"^(## |- )", "", block)
        block = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", block).replace("**", "")
        out.append(" ".join(block.split()))
    return out


def structure(fmt: str, data: bytes) -> tuple:
    """What must come back as it was: members, untranslated members' bytes, paragraphs,
    headings, tables, links, spans; for text formats the lines that are not text and the tags
    (bold and italic runs are counted apart: a run of the paragraph's base properties may come
    back cut in two around a word the translation moved)."""
    if fmt in ("docx", "pptx", "odt", "epub"):
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            names = z.namelist()
            kept = [z.read(n) for n in names if n.endswith(".png")]
            xml = "".join(z.read(n).decode() for n in names if n.endswith(("xml", "xhtml")))
        marks = ("<w:hyperlink", "<w:tbl>", "Heading2", "<a:p>", "<w:p>", "<p:sp>")
        marks += ("<text:span", "<text:a ", "<text:h ", "<b>", "<a href", "<h2>", "<p>")
        return tuple(names), tuple(kept), tuple(xml.count(m) for m in marks)
    lines = data.decode().split("\n")
    fixed = [x for x in lines if "-->" in x or x.isdigit() or x.startswith(("```", "code", "WEB"))]
    marks = ("<i>", "</i>", "**", "](", "## ", "- ")
    return tuple(fixed), tuple(data.decode().count(m) for m in marks), len(lines)


def formatted_with_words(fmt: str, data: bytes) -> tuple[int, int]:
    """(formatted runs holding words, formatted runs) of a file."""
    text = data.decode() if fmt in ("srt", "vtt", "md") else ""
    if fmt in ("docx", "pptx", "odt", "epub"):
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            text = "".join(z.read(n).decode() for n in z.namelist() if n.endswith(("xml", "xhtml")))
    pattern = {
        "docx": r"<w:rPr><w:[bi]/></w:rPr><w:t[^>]*>(.*?)</w:t>",
        "pptx": r'<a:rPr lang="en-US" [bi]="1"/><a:t>(.*?)</a:t>',
        "odt": r"<text:(?:span|a)\b[^>]*>(.*?)</text:(?:span|a)>",
        "epub": r"<(?:b|a [^>]*)>(.*?)</(?:b|a)>",
        "srt": r"<i>(.*?)</i>",
        "vtt": r"<i>(.*?)</i>",
        "md": r"\*\*(.*?)\*\*|\[([^\]]*)\]\(",
    }[fmt]
    found = re.findall(pattern, text, re.DOTALL)
    found = ["".join(f) if isinstance(f, tuple) else f for f in found]
    return sum(bool(f.strip()) for f in found), len(found)


def measure(args) -> None:
    from nmt_cli import Translator, translate_file, translate_texts

    torch_threads(args.threads)
    sentences = read_split(args.split, args.sentences)
    translator = Translator.load(args.model, threads=args.threads)
    started = time.perf_counter()
    plain = [r.text for r in translate_texts(translator, sentences)]
    plain_s = time.perf_counter() - started
    print(f"plain text: {len(sentences)} sentences in {plain_s:.1f} s")
    print(
        "| format | structure kept | formatted runs with words | translated | words as plain | s |"
    )
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        for fmt in args.formats.split(","):
            data = build(fmt, sentences)
            source, target = Path(work, f"in.{fmt}"), Path(work, f"out.{fmt}")
            source.write_bytes(data)
            started = time.perf_counter()
            translate_file(translator, source, target)
            seconds = time.perf_counter() - started
            out = target.read_bytes()
            kept = structure(fmt, out) == structure(fmt, data)
            with_words, formatted = (
                formatted_with_words(fmt, out)[0],
                formatted_with_words(fmt, data)[1],
            )
            before, after = paragraph_texts(fmt, data), paragraph_texts(fmt, out)
            changed = sum(a != b for a, b in zip(before, after))
            expect = {" ".join(s.split()): " ".join(p.split()) for s, p in zip(sentences, plain)}
            same = [expect.get(b) == a for a, b in zip(after, before)]
            print(
                f"| .{fmt} | {'yes' if kept and len(after) == len(before) else 'NO'} | "
                f"{with_words}/{formatted} | {changed}/{len(before)} | {sum(same)}/{len(same)} | "
                f"{seconds:.1f} |"
            )


def torch_threads(threads: int) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))


def read_split(split: str, n: int) -> list[str]:
    mirror = Path(os.environ.get("NMT_DATA_MIRROR", "shared/data"))
    path = mirror / "multi30k" / f"{split}.en.gz"
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [line.strip() for line, _ in zip(fh, range(n))]


def libraries(args) -> None:
    """Each candidate: does a load and save keep the package's other parts and namespace
    prefixes; seconds to read, walk the runs and write a generated document."""
    sentences = [
        f"A man number {k} rides a red bike down the street." for k in range(args.paragraphs)
    ]
    docx_data = build("docx", sentences)
    with zipfile.ZipFile(io.BytesIO(docx_data)) as z:
        document = z.read("word/document.xml")
    document = document.replace(
        b"<w:document ",
        b'<w:document xmlns:w14="http://schemas.microsoft.com/office/word/2010/wordml" '
        b'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006" '
        b'mc:Ignorable="w14" ',
    )
    print("| reader | prefixes and mc:Ignorable kept | seconds to read, walk and write |")
    print("|---|---|---|")
    from lxml import etree

    started = time.perf_counter()
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
    root = etree.fromstring(document, parser)
    texts = [t.text for t in root.iter("{*}t")]
    out = etree.tostring(root)
    lxml_s = time.perf_counter() - started
    kept = b"w14" in out and b"mc:Ignorable" in out
    print(f"| lxml (no entities, no DTD) | {kept} | {lxml_s:.3f} |")
    try:
        import xml.etree.ElementTree as et

        import defusedxml.ElementTree as safe_et
    except ImportError:
        print("| defusedxml | not installed | |")
    else:
        started = time.perf_counter()
        root = safe_et.fromstring(document)
        texts = [
            t.text
            for t in root.iter("{http://schemas.openxmlformats.org/wordprocessingml/2006/main}t")
        ]
        out = et.tostring(root)
        seconds = time.perf_counter() - started
        kept = b"w14" in out and b'mc:Ignorable="w14"' in out and b"<w:p>" in out
        print(f"| defusedxml + ElementTree | {kept} | {seconds:.3f} |")
    try:
        import docx  # python-docx
    except ImportError:
        print("| python-docx | not installed | |")
    else:
        word_package(docx, sentences)
    del texts
    subtitle = "1\r\n00:00:01,000 --> 00:00:02,000 X1:10\r\n<i>Hello</i>\r\n\r\n\r\n"
    subtitle += "2\r\n00:00:03,5 --> 00:00:04,000\r\nworld\r\n"
    try:
        import srt
    except ImportError:
        print("| srt | not installed | |")
    else:
        try:
            back = srt.compose(list(srt.parse(subtitle)))
            print(f"| srt (compose of parse) | byte-identical: {back == subtitle} | |")
        except Exception as exc:
            print(f"| srt | fails: {type(exc).__name__} | |")
    vtt = "WEBVTT - t\n\nNOTE kept\n\nSTYLE\n::cue { color: red }\n\nid1\n"
    vtt += "00:01.000 --> 00:02.000 align:start\n<v A>Hi <00:01.500>there</v>\n"
    try:
        import webvtt
    except ImportError:
        print("| webvtt-py | not installed | |")
    else:
        with tempfile.NamedTemporaryFile("w", suffix=".vtt", delete=False) as fh:
            fh.write(vtt)
        try:
            captions = webvtt.read(fh.name)
            back = captions.content
            print(
                f"| webvtt-py (content of read) | byte-identical: {back == vtt}; "
                f"NOTE kept: {'NOTE kept' in back} | |"
            )
        except Exception as exc:
            print(f"| webvtt-py | fails: {type(exc).__name__} | |")
    from nmt_cli.documents.subtitles import translate_subtitles

    same = lambda texts, fmt: list(texts)  # noqa: E731
    for name, text in (("srt", subtitle), ("vtt", vtt)):
        back = "".join(translate_subtitles(iter(io.StringIO(text, newline="").readline, ""), same))
        print(f"| nmt_cli subtitles ({name}) | byte-identical: {back == text} | |")


def upper_outside_tags(texts, fmt: str) -> list[str]:
    """A stand-in translation: every text's words upper-cased, its tags as they were."""
    return [re.sub(r"(<[^>]*>)|([^<]+)", lambda m: m[1] or m[2].upper(), t) for t in texts]


def word_package(docx, sentences: list[str]) -> None:
    """A .docx made by python-docx (bold runs, a table): read, walk every run and write with
    python-docx, against nmt_cli's zip and lxml walk changing every paragraph; how many of the
    package's members come back changed besides word/document.xml."""
    from nmt_cli.documents.files import translate_file

    made = docx.Document()
    for k, sentence in enumerate(sentences):
        p = made.add_paragraph(sentence[:20])
        p.add_run(sentence[20:]).bold = True
        if k % 100 == 0:
            made.add_table(rows=1, cols=1).cell(0, 0).text = sentence
    data = io.BytesIO()
    made.save(data)
    source = data.getvalue()

    def changed(out: bytes) -> int:
        with zipfile.ZipFile(io.BytesIO(source)) as a, zipfile.ZipFile(io.BytesIO(out)) as b:
            return sum(a.read(n) != b.read(n) for n in a.namelist() if n != "word/document.xml")

    started = time.perf_counter()
    d = docx.Document(io.BytesIO(source))
    cells = [p for t in d.tables for row in t.rows for c in row.cells for p in c.paragraphs]
    for p in d.paragraphs + cells:
        for r in p.runs:
            r.text = r.text.upper()
    saved = io.BytesIO()
    d.save(saved)
    seconds = time.perf_counter() - started
    print(f"| python-docx | other members changed: {changed(saved.getvalue())} | {seconds:.3f} |")
    out = io.BytesIO()
    started = time.perf_counter()
    translate_file(io.BytesIO(source), out, "docx", upper_outside_tags)
    seconds = time.perf_counter() - started
    print(
        f"| nmt_cli zip + lxml walk | other members changed: {changed(out.getvalue())} | "
        f"{seconds:.3f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", nargs="?", default="measure", choices=["measure", "libraries"])
    parser.add_argument("-m", "--model", default="runs/en-fr")
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--formats", default="docx,pptx,odt,epub,srt,vtt,md")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--paragraphs", type=int, default=2000)
    args = parser.parse_args()
    (libraries if args.mode == "libraries" else measure)(args)


if __name__ == "__main__":
    sys.exit(main())
