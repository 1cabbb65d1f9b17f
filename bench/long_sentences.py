"""Long sentences: translated whole, or in parts cut at clause boundaries, or at plain spaces.

Consecutive Multi30k test_2016_flickr lines are joined with ", and " (their references with
", et ") until the sentence has ``--words`` words or more. Each joined sentence is translated
whole (only the output length cap relative to the source applies), then cut into parts of at
most N source subwords, at clause boundaries (nmt_cli/documents/segment.py's clause_spans: commas,
semicolons, conjunctions) or at the space nearest the middle, each part translated alone and
the translations joined with a space; and through the document layer as nmt translate does it
(decode.max_segment_tokens, a retry of translations that lost words). Printed per variant:
BLEU against the joined references, how many outputs repeat some 4-gram more than three times,
the most repetitions of one 4-gram, and the range of output/input word ratios; the references'
own line shows how often captions joined so repeat a 4-gram with no loop at all.

    OMP_NUM_THREADS=1 python bench/long_sentences.py -m RUN [--words 100] [--parts 20,30,40]
        [--max-repeats 3]
"""

from __future__ import annotations

import argparse
import gzip
import os
import platform
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import sacrebleu

from nmt_cli.data.tokenizer import normalize
from nmt_cli.documents.layer import translate_texts
from nmt_cli.documents.segment import clause_spans
from nmt_cli.translation.translator import Translator


def joined(data: Path, words: int) -> tuple[list[str], list[str]]:
    def read(lang):
        path = data / "multi30k" / f"test_2016_flickr.{lang}.gz"
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            return [line.strip().rstrip(".") for line in fh]

    src, ref = read("en"), read("fr")
    sources, references, group = [], [], []
    for i in range(len(src)):
        group.append(i)
        if sum(len(src[j].split()) for j in group) >= words:
            sources.append(", and ".join(src[j] for j in group) + ".")
            references.append(", et ".join(ref[j] for j in group) + ".")
            group = []
    return sources, references


def most_repeated(text: str, n: int = 4) -> int:
    words = text.split()
    grams = Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))
    return max(grams.values(), default=0)


def in_parts(translator, sources, limit: int, clauses: bool) -> list[str]:
    def count(text: str) -> int:
        return len(translator.tokenizer.encode_src([normalize(text)])[0])

    def too_long(text: str) -> bool:
        return count(text) > limit

    pieces, owner = [], []
    for i, text in enumerate(sources):
        for a, b in clause_spans(text, 0, len(text), too_long, at_clauses=clauses):
            pieces.append(text[a:b])
            owner.append(i)
    outputs = [[] for _ in sources]
    for i, tr in zip(owner, translator.translate(pieces)):
        outputs[i].append(tr.text)
    return [" ".join(parts) for parts in outputs]


def report(name, sources, outputs, references) -> None:
    bleu = sacrebleu.corpus_bleu(outputs, [references]).score
    repeats = [most_repeated(x) for x in outputs]
    ratios = [len(o.split()) / len(s.split()) for s, o in zip(sources, outputs)]
    print(
        f"{name:<22} BLEU {bleu:5.2f}  outputs with a 4-gram >3 times: "
        f"{sum(r > 3 for r in repeats):3d}  most repeats {max(repeats):3d}  "
        f"words out/in {min(ratios):.2f}-{max(ratios):.2f}",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--data", default=os.environ.get("NMT_DATA_MIRROR", "../shared/data"))
    ap.add_argument("--words", type=int, default=100)
    ap.add_argument("--parts", default="20,30,40", help="subword limits of a part ('': none)")
    ap.add_argument("--beam-size", type=int, default=None)
    ap.add_argument("--max-repeats", type=int, default=None, help="decode.max_repeats")
    args = ap.parse_args()
    translator = Translator.load(
        args.model, threads=1, beam_size=args.beam_size, max_repeats=args.max_repeats
    )
    sources, references = joined(Path(args.data), args.words)
    lengths = [len(translator.tokenizer.encode_src([s])[0]) for s in sources]
    print(
        f"# {platform.node()}, one thread, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; "
        f"{args.model}, beam {translator.config.beam_size}, max_repeats "
        f"{translator.config.max_repeats}; {len(sources)} sentences of "
        f"{min(len(s.split()) for s in sources)}-{max(len(s.split()) for s in sources)} words, "
        f"{min(lengths)}-{max(lengths)} subwords"
    )
    report("references", sources, references, references)
    report("whole", sources, [t.text for t in translator.translate(sources)], references)
    layer = [t.text for t in translate_texts(translator, sources)]
    report(f"document layer ({translator.config.max_segment_tokens})", sources, layer, references)
    for limit in [int(x) for x in args.parts.split(",") if x]:
        for clauses in (True, False):
            outputs = in_parts(translator, sources, limit, clauses)
            name = f"parts <= {limit} " + ("clauses" if clauses else "spaces")
            report(name, sources, outputs, references)


if __name__ == "__main__":
    main()
