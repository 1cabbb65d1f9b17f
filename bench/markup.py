"""HTML, placeholders, URLs, e-mail addresses and characters the vocabulary lacks through a
trained model: real sentences (a Multi30k test set) with inline tags put around random words
and phrases and protected spans put between random words, translated through the document layer
(plan_documents, Translator.translate with alignments, plan.assemble). Prints:

- HTML well-formed, with the same tags and attributes as the input, ``<code>`` untouched;
- HTML with exactly the words of the translation of the same document without its inline tags
  (protected spans and code left out of both: where they go is the next figure);
- every placeholder, URL, e-mail address and unknown character verbatim, exactly once, in HTML
  and in plain text.

    python bench/markup.py -m runs/en-fr --split test_2017_flickr --threads 1

docs/markup.md#measured records the figures.
"""

from __future__ import annotations

import argparse
import gzip
import html
import os
import random
import sys
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nmt_cli.documents.layer import translate_plan  # noqa: E402
from nmt_cli.documents.plan import plan_documents  # noqa: E402
from nmt_cli.documents.protect import Protector  # noqa: E402
from nmt_cli.translation.contract import TranslateOptions  # noqa: E402
from nmt_cli.translation.translator import Translator  # noqa: E402

TAGS = [
    ("b", ""),
    ("i", ""),
    ("em", ""),
    ("strong", ""),
    ("a", ' href="https://example.com/item?id=7&amp;lang=fr" title="An item"'),
    ("span", ' class="hl" style="color: red"'),
    ("u", ""),
    ("sup", ""),
    ("sub", ""),
    ("small", ""),
    ("mark", ' data-note="x &lt; y"'),
]
SPANS = [
    "{name}",
    "{0}",
    "%s",
    "%d",
    "%(count)d",
    "{{ user }}",
    "[X12X]",
    "$HOME",
    "${VAR}",
    "https://example.com/page?id=42",
    "anna.smith@example.org",
    "\U0001f436",
    "\u6771\u4eac",
]
CODE = ["<code>ls -la</code>", "<code>x &lt; 3</code>", "<code>git commit</code>"]
VOID = {"br", "img", "wbr", "hr", "input", "meta", "link"}


def real_lines(split: str, n: int) -> list[str]:
    mirror = Path(os.environ.get("NMT_DATA_MIRROR", "../shared/data"))
    with gzip.open(mirror / "multi30k" / f"{split}.en.gz", "rt", encoding="utf-8") as fh:
        return [line for line in fh.read().split("\n") if line.strip()][:n]


def _split_punct(word: str) -> tuple[str, str]:
    core = word.rstrip(".,;:!?")
    return (core, word[len(core) :]) if core else (word, "")


def make_case(line: str, rng: random.Random) -> tuple[str, str, list[str], list[str]]:
    """(html with inline tags, the same html without them, protected spans put in, code)."""
    words = line.split()
    spans = rng.sample(SPANS, rng.choice([0, 1, 1, 2]))
    for span in spans:
        words.insert(rng.randrange(len(words) + 1), span)
    code = [rng.choice(CODE)] if rng.random() < 0.3 else []
    for c in code:
        words.insert(rng.randrange(len(words) + 1), c)
    opens: dict[int, list[str]] = {}
    closes: dict[int, list[str]] = {}
    candidates = [k for k, w in enumerate(words) if w not in spans and w not in code]
    taken: set[int] = set()
    for _ in range(rng.choice([1, 1, 2, 3])):
        if not candidates:
            break
        start = rng.choice(candidates)
        length = rng.choice([1, 1, 2, 3])
        end = min(start + length, len(words))
        if any(k in taken for k in range(start, end)):
            continue
        taken.update(range(start, end))
        name, attrs = rng.choice(TAGS)
        opens.setdefault(start, []).append(f"<{name}{attrs}>")
        closes.setdefault(end - 1, []).insert(0, f"</{name}>")
        if end - start >= 2 and rng.random() < 0.5:  # a nested one inside
            inner = rng.randrange(start, end)
            iname, iattrs = rng.choice(TAGS)
            opens.setdefault(inner, []).append(f"<{iname}{iattrs}>")
            closes.setdefault(inner, []).insert(0, f"</{iname}>")
    tagged, plain = [], []
    for k, word in enumerate(words):
        escaped = word if word in code else html.escape(word, quote=False)
        core, punct = (escaped, "") if word in code else _split_punct(escaped)
        tagged.append("".join(opens.get(k, [])) + core + "".join(closes.get(k, [])) + punct)
        plain.append(escaped)
    return "<p>" + " ".join(tagged) + "</p>", "<p>" + " ".join(plain) + "</p>", spans, code


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.starts: list[tuple] = []
        self.stack: list[str] = []
        self.nested = True
        self.text: list[str] = []
        self.worded: list[bool] = []  # per open element: whether words were read inside it
        self.elements = self.with_words = 0  # inline elements (not <p>, <code>), those with words

    def handle_starttag(self, tag, attrs):
        self.starts.append((tag, tuple(attrs)))
        if tag not in VOID:
            self.stack.append(tag)
            self.worded.append(False)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.nested = False
        else:
            self.stack.pop()
            worded = self.worded.pop()
            if tag not in ("p", "code"):
                self.elements += 1
                self.with_words += worded

    def handle_data(self, data):
        self.text.append(data)
        if data.strip():
            self.worded = [True] * len(self.worded)


def read_tags(document: str) -> _Tags:
    parser = _Tags()
    parser.feed(document)
    parser.close()
    return parser


def model_words(tags: _Tags, spans: list[str]) -> list[str]:
    """The words of a document's text, its protected spans and code left out: the words the
    model's translation gave (where the spans went is measured apart)."""
    text = "".join(tags.text)
    for span in spans + [html.unescape(c[6:-7]) for c in CODE]:
        text = text.replace(span, " ")
    return text.split()


def translate(translator, texts, fmt, protector):
    """``texts`` through the document layer's own path: a plan, its segments translated as the
    layer asks (alignments where tags and spans are put back), the plan assembled."""
    plan = plan_documents(texts, fmt=fmt, protector=protector)
    return plan.assemble(translate_plan(translator, plan, TranslateOptions()))


def verbatim_once(outputs: list[str], spans: list[list[str]], unescape: bool) -> tuple[int, int]:
    good = total = 0
    for out, these in zip(outputs, spans):
        text = html.unescape(out) if unescape else out
        for span in these:
            total += 1
            good += text.count(span) == 1
    return good, total


def probe(translator, lines: list[str], symbols: list[str], seed: int) -> None:
    """How often each symbol, put in at a random place, comes out exactly once."""
    rng = random.Random(seed)
    print(f"{len(lines)} sentences; the symbol once in the translation:")
    for symbol in symbols:
        inputs = []
        for line in lines:
            words = line.split()
            words.insert(rng.randrange(len(words) + 1), symbol)
            inputs.append(" ".join(words))
        out = translator.translate(inputs)
        once = sum(t.text.split().count(symbol) == 1 for t in out)
        print(f"  {symbol!r:12} {once}/{len(lines)} = {100 * once / len(lines):.1f}%")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--split", default="test_2017_flickr")
    ap.add_argument("--lines", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--examples", type=int, default=3)
    ap.add_argument(
        "--probe",
        default="",
        help="comma-separated symbols: instead, how often the model copies each one, put "
        "between two random words of --lines sentences, into its translation exactly once",
    )
    args = ap.parse_args()
    translator = Translator.load(args.model, threads=args.threads)
    if args.probe:
        probe(translator, real_lines(args.split, args.lines), args.probe.split(","), args.seed)
        return
    protector = Protector(vocabulary=translator.tokenizer)
    rng = random.Random(args.seed)
    lines = real_lines(args.split, args.lines)
    cases = [make_case(line, rng) for line in lines]
    tagged = translate(translator, [c[0] for c in cases], "html", protector)
    untagged = translate(translator, [c[1] for c in cases], "html", protector)
    n = len(cases)
    formed = same_tags = code_ok = same_words = elements = with_words = 0
    for (source, _, spans, code), out, ref in zip(cases, tagged, untagged):
        src_tags, out_tags, ref_tags = read_tags(source), read_tags(out), read_tags(ref)
        well = out_tags.nested and not out_tags.stack
        formed += well
        same_tags += well and Counter(src_tags.starts) == Counter(out_tags.starts)
        code_ok += all(out.count(c) == source.count(c) for c in code)
        same_words += model_words(out_tags, spans) == model_words(ref_tags, spans)
        elements += src_tags.elements
        with_words += out_tags.with_words
    span_good, span_total = verbatim_once(tagged, [c[2] for c in cases], unescape=True)
    text_cases = []
    for line in lines:
        words = line.split()
        spans = rng.sample(SPANS, rng.choice([1, 2]))
        for span in spans:
            words.insert(rng.randrange(len(words) + 1), span)
        text_cases.append((" ".join(words), spans))
    text_out = translate(translator, [t for t, _ in text_cases], "text", protector)
    text_good, text_total = verbatim_once(text_out, [s for _, s in text_cases], unescape=False)

    def pct(a: int, b: int) -> str:
        return f"{a}/{b} = {100 * a / max(b, 1):.1f}%"

    print(f"model {args.model}, {n} lines of {args.split}, seed {args.seed}")
    print(f"html well-formed:                       {pct(formed, n)}")
    print(f"html same tags and attributes:          {pct(same_tags, n)}")
    print(f"html <code> untouched:                  {pct(code_ok, n)}")
    print(f"html words = translation without tags:  {pct(same_words, n)}")
    print(f"html inline elements holding words:     {pct(with_words, elements)}")
    print(f"html protected spans verbatim once:     {pct(span_good, span_total)}")
    print(f"text protected spans verbatim once:     {pct(text_good, text_total)}")
    for (source, _, _, _), out in list(zip(cases, tagged))[: args.examples]:
        print(f"\n  {source}\n  {out}")
    for (source, _), out in list(zip(text_cases, text_out))[: args.examples]:
        print(f"\n  {source}\n  {out}")


if __name__ == "__main__":
    main()
