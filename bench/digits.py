"""Numbers digit for digit, and nothing invented for a line without words: real sentences (a
Multi30k test set) with one to three numbers of every kind put between random words (integers,
thousands, decimals, dates, times, versions, phone numbers, amounts, percentages, ordinals),
translated through the document layer (translate_texts) with each ``numbers`` style. Prints, per
style, the share of sentences whose every run of digits comes back (as many times as in the
source), the share of digit runs kept, and cased BLEU against the references with the words that
have digits taken out of the translations (how much the numbers disturb the words around them; the
same sentences without numbers give the baseline). Then lines with nothing to translate (digits,
symbols, emoticons, code fences, rules): the share that comes back exactly as it was.

    python bench/digits.py -m /tmp/runs/enfr --split test_2017_flickr --threads 1

docs/results.md#numbers-and-capitals records the figures.
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import re
import sys
from collections import Counter
from pathlib import Path

import sacrebleu

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nmt_cli.documents.layer import translate_texts  # noqa: E402
from nmt_cli.translation.translator import Translator  # noqa: E402

NUMBERS = {
    "integer": lambda r: str(r.randint(2, 999)),
    "thousands": lambda r: f"{r.randint(1, 99)},{r.randint(0, 999):03d}",
    "decimal": lambda r: f"{r.randint(0, 99)}.{r.randint(1, 99)}",
    "date": lambda r: f"{r.randint(1, 28):02d}/{r.randint(1, 12):02d}/{r.randint(1950, 2030)}",
    "time": lambda r: f"{r.randint(0, 23)}:{r.randint(0, 59):02d}",
    "version": lambda r: f"v{r.randint(1, 9)}.{r.randint(0, 20)}.{r.randint(0, 9)}",
    "phone": lambda r: f"+33 {r.randint(1, 9)} {r.randint(10, 99)} {r.randint(10, 99)} 42 17",
    "amount": lambda r: f"${r.randint(1, 500)}.{r.randint(0, 99):02d}",
    "percent": lambda r: f"{r.randint(1, 100)}%",
    "ordinal": lambda r: f"{r.randint(1, 30)}{r.choice(['st', 'nd', 'rd', 'th'])}",
}
WORDLESS = [
    "12345",
    "#",
    "---",
    "***",
    "```",
    "```python",
    "~~~",
    ":-)",
    ";)",
    "<3",
    "¯\\_(ツ)_/¯",
    "10:30",
    "12/05/2024",
    "+33 6 12 34 56 78",
    "$5.99",
    "50%",
    "1.",
    "(3)",
    "...",
    "→ ← ↑",
    "© 2024",
    "★★★★☆",
    "= = =",
    "| --- | --- |",
    "42 / 7 = 6",
]


def real_lines(split: str, lang: str, n: int) -> list[str]:
    mirror = Path(os.environ.get("NMT_DATA_MIRROR", "../shared/data"))
    with gzip.open(mirror / "multi30k" / f"{split}.{lang}.gz", "rt", encoding="utf-8") as fh:
        return fh.read().rstrip("\n").split("\n")[:n]


def with_numbers(line: str, rng: random.Random) -> str:
    """``line`` with one to three numbers put between its words."""
    words = line.split()
    for _ in range(rng.randint(1, 3)):
        number = NUMBERS[rng.choice(list(NUMBERS))](rng)
        words.insert(rng.randint(1, len(words) - 1), number)
    return " ".join(words)


def digit_runs(text: str) -> Counter:
    return Counter(re.findall(r"\d+", text))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True, help="run dir")
    ap.add_argument("--split", default="test_2017_flickr")
    ap.add_argument("--src", default="en")
    ap.add_argument("--tgt", default="fr")
    ap.add_argument("--lines", type=int, default=300)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    sources = real_lines(args.split, args.src, args.lines)
    refs = real_lines(args.split, args.tgt, args.lines)
    cases = [with_numbers(line, rng) for line in sources]
    translator = Translator.load(args.model, threads=args.threads)
    plain = [d.text for d in translate_texts(translator, sources)]
    base = sacrebleu.corpus_bleu(plain, [refs]).score
    runs = sum(sum(digit_runs(s).values()) for s in cases)
    print(f"{len(cases)} sentences of {args.split} with {runs} runs of digits put in")
    print(f"BLEU of the same sentences without numbers: {base:.1f}\n")
    print("| numbers | sentences with every digit | digit runs kept | BLEU, numbers taken out |")
    print("|---|---|---|---|")
    for style in ("keep", "target", "model"):
        out = [d.text for d in translate_texts(translator, cases, numbers=style)]
        whole = kept = 0
        for source, text in zip(cases, out):
            want, got = digit_runs(source), digit_runs(text)
            kept += sum(min(n, got[d]) for d, n in want.items())
            whole += all(got[d] >= n for d, n in want.items())
        bare = [
            " ".join(w for w in text.replace("\u00a0%", "%").split() if not re.search(r"\d", w))
            for text in out
        ]
        bleu = sacrebleu.corpus_bleu(bare, [refs]).score
        print(
            f"| {style} | {100 * whole / len(cases):.1f}% | {100 * kept / runs:.1f}% | "
            f"{bleu:.1f} |",
            flush=True,
        )
    back = [d.text for d in translate_texts(translator, WORDLESS)]
    same = sum(a == b for a, b in zip(WORDLESS, back))
    print(f"\nlines without words back as they were: {same}/{len(WORDLESS)}")
    for a, b in zip(WORDLESS, back):
        if a != b:
            print(f"  {a!r} -> {b!r}")


if __name__ == "__main__":
    main()
