"""Language identification of Tatoeba lines: accuracy by length and speed, per identifier.

    python bench/language_id.py [--languages en,fr,de] [--split test] \
        [--identifiers py3langid,lingua]

Reads the Tatoeba en-fr and en-de splits from the data mirror ($NMT_DATA_MIRROR, default
../shared/data): the English and French sides of en-fr and the German side of en-de, each line
labelled with its language. Every identifier is restricted to --languages (as `nmt serve`
restricts it to the languages it serves) and asked for each line alone. Prints, per identifier,
the share of lines identified right in each length bucket (characters) and overall, and lines/s.
`py3langid` is nmt_cli/serving/language_id.py (what `nmt serve` uses); `lingua`
(lingua-language-detector, not a dependency: pip install it to compare) is measured beside it.
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BUCKETS = [(0, 20), (20, 40), (40, 80), (80, 10**9)]
FILES = {
    "en": ("tatoeba-en-fr", "en"),
    "fr": ("tatoeba-en-fr", "fr"),
    "de": ("tatoeba-en-de", "de"),
}


def labelled_lines(mirror: Path, languages: list[str], split: str) -> list[tuple[str, str]]:
    out = []
    for lang in languages:
        corpus, side = FILES[lang]
        with gzip.open(mirror / corpus / f"{split}.{side}.gz", "rt", encoding="utf-8") as fh:
            out += [(line.strip(), lang) for line in fh if line.strip()]
    return out


def py3langid_identifier(languages: list[str]):
    from nmt_cli.serving.language_id import LanguageIdentifier

    ident = LanguageIdentifier(languages)
    return lambda text: ident.detect(text)[0][0]


def lingua_identifier(languages: list[str]):
    from lingua import IsoCode639_1, LanguageDetectorBuilder

    codes = [IsoCode639_1.from_str(code) for code in languages]
    detector = LanguageDetectorBuilder.from_iso_codes_639_1(*codes).build()
    return lambda text: detector.detect_language_of(text).iso_code_639_1.name.lower()


IDENTIFIERS = {"lingua": lingua_identifier, "py3langid": py3langid_identifier}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--languages", default="en,fr,de")
    parser.add_argument("--split", default="test")
    parser.add_argument("--identifiers", default="py3langid,lingua")
    args = parser.parse_args()
    mirror = Path(os.environ.get("NMT_DATA_MIRROR", ROOT.parent / "shared" / "data"))
    languages = args.languages.split(",")
    lines = labelled_lines(mirror, languages, args.split)
    print(f"{len(lines)} Tatoeba {args.split} lines of {', '.join(languages)}")
    head = " | ".join(f"{lo}-{hi - 1 if hi < 10**9 else ''} chars" for lo, hi in BUCKETS)
    print(f"| identifier | {head} | all | lines/s |")
    print("|---" * (len(BUCKETS) + 3) + "|")
    for name in args.identifiers.split(","):
        identify = IDENTIFIERS[name](languages)
        identify("warm up")
        right = {b: [0, 0] for b in BUCKETS}
        start = time.perf_counter()
        guesses = [identify(text) for text, _ in lines]
        seconds = time.perf_counter() - start
        for (text, lang), guess in zip(lines, guesses):
            bucket = next(b for b in BUCKETS if b[0] <= len(text) < b[1])
            right[bucket][0] += guess == lang
            right[bucket][1] += 1
        cells = [f"{100 * r / n:.1f}% of {n}" if n else "-" for r, n in right.values()]
        total = sum(r for r, _ in right.values()) / len(lines)
        print(f"| {name} | {' | '.join(cells)} | {100 * total:.2f}% | {len(lines) / seconds:.0f} |")


if __name__ == "__main__":
    main()
