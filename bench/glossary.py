"""Glossary (lexically constrained) decoding on a test split, with terms drawn from the
references: for each rare source word (seen at most ``--rare`` times in the training split), its
target word by a dictionary learned from the training split's co-occurrence (the target word of
highest Dice coefficient with it), kept where the reference of every test sentence holding the
source word carries that target word.

    python bench/glossary.py -m runs/en-fr [--split test] [--rare 30] [--threads 1]
        [--glossary-out terms.tsv]

Decodes the split with the run's recipe (its beam and shortlist) without and with the
glossary, and prints: the sentences with a term and the share that carry every target term (all
of them, and those whose unconstrained translation missed one), whether the sentences without a
term are byte-identical, BLEU and chrF of both, and the decoding seconds of both (best of two,
wall clock and CPU);
then with unrelated terms (each source term given another term's target word: words the model
would never choose there), and with a prefix per sentence (the first half of the reference's
words, and of the unconstrained translation's): the share of answers that start with their
prefix.
"""

from __future__ import annotations

import argparse
import re
import time
from collections import Counter
from pathlib import Path

WORD = re.compile(r"\w+(?:['-]\w+)*")


def words(line: str) -> list[str]:
    return WORD.findall(line)


def dictionary(src: list[str], tgt: list[str], wanted: set[str]) -> dict[str, str]:
    """For each source word in ``wanted`` (lowercased), the target word (as written) of highest
    Dice coefficient over the sentence pairs."""
    src_count, tgt_count, pair = Counter(), Counter(), Counter()
    for s, t in zip(src, tgt):
        s_words = {w.lower() for w in words(s)}
        t_words = set(words(t))
        tgt_count.update(t_words)
        mine = s_words & wanted
        src_count.update(mine)
        for w in mine:
            pair.update((w, x) for x in t_words)
    best: dict[str, tuple[float, str]] = {}
    for (w, x), n in pair.items():
        dice = 2 * n / (src_count[w] + tgt_count[x])
        if len(x) > 2 and (dice, x) > best.get(w, (0.0, "")):  # ties: the same pick every run
            best[w] = (dice, x)
    return {w: x for w, (dice, x) in best.items() if dice >= 0.3}


def has_word(text: str, word: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text) is not None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", type=Path, required=True, help="run dir")
    ap.add_argument("--split", default="test", help="stored split (test = the first test set)")
    ap.add_argument("--rare", type=int, default=30, help="most training occurrences of a term")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--glossary-out", type=Path, help="write the glossary here (TSV)")
    args = ap.parse_args()

    from nmt_cli.evaluation.scores import score
    from nmt_cli.translation.glossary import Glossary, Term
    from nmt_cli.translation.translator import Translator

    data = args.model / "data"

    def read(name: str) -> list[str]:
        return (data / name).read_text(encoding="utf-8").split("\n")[:-1]

    train_src, train_tgt = read("train.src.txt"), read("train.tgt.txt")
    sources, refs = read(f"{args.split}.src.txt"), read(f"{args.split}.tgt.txt")
    counts = Counter(w.lower() for line in train_src for w in words(line))
    test_words = {w.lower() for line in sources for w in words(line)}
    rare = {w for w in test_words if 0 < counts[w] <= args.rare and len(w) > 2}
    table = dictionary(train_src, train_tgt, rare)
    terms = []
    for w, x in sorted(table.items()):
        holding = [i for i, s in enumerate(sources) if w in {v.lower() for v in words(s)}]
        if holding and all(has_word(refs[i], x) for i in holding):
            terms.append(Term(w, x, f"term {w}"))
    glossary = Glossary(terms)
    if args.glossary_out:
        args.glossary_out.write_text("".join(f"{t.source}\t{t.target}\n" for t in terms))
    translator = Translator.load(args.model, threads=args.threads)

    def timed(**kwargs):
        """The texts, and the better of two runs' seconds: wall clock and this process's CPU
        time (which other work on a shared machine disturbs less)."""
        best, out = None, None
        for _ in range(2):
            wall, cpu = time.perf_counter(), time.process_time()
            out = translator.translate(sources, **kwargs)
            took = (time.perf_counter() - wall, time.process_time() - cpu)
            best = took if best is None else (min(best[0], took[0]), min(best[1], took[1]))
        return [t.text for t in out], best

    plain, plain_s = timed()
    plain_norm = [t.hypotheses[0].norm_score for t in translator.translate(sources)]
    forced, forced_s = timed(glossary=glossary)
    needs = [glossary.targets(s) for s in sources]
    with_term = [i for i, n in enumerate(needs) if n]
    carried = [i for i in with_term if all(has_word(forced[i], x) for x in needs[i])]
    missed = [i for i in with_term if not all(has_word(plain[i], x) for x in needs[i])]
    carried_missed = [i for i in missed if i in set(carried)]
    without = [i for i, n in enumerate(needs) if not n]
    same = sum(plain[i] == forced[i] for i in without)
    bleu_plain = {s.metric: s.score for s in score(plain, refs, ["bleu", "chrf"])}
    bleu_forced = {s.metric: s.score for s in score(forced, refs, ["bleu", "chrf"])}
    print(
        f"{args.model} {args.split}: {len(sources)} sentences, {len(terms)} terms "
        f"(rare: at most {args.rare} training occurrences)"
    )
    print("| | value |")
    print("|---|---|")
    print(f"| sentences with a term | {len(with_term)} |")
    print(
        f"| ... carrying every target term | {len(carried)} "
        f"({100 * len(carried) / max(len(with_term), 1):.1f}%) |"
    )
    print(f"| ... whose unconstrained translation missed one | {len(missed)} |")
    print(
        f"| ... of those, carrying every target term | {len(carried_missed)} "
        f"({100 * len(carried_missed) / max(len(missed), 1):.1f}%) |"
    )
    print(f"| sentences without a term, byte-identical | {same} of {len(without)} |")
    print(f"| BLEU / chrF unconstrained | {bleu_plain['bleu']:.2f} / {bleu_plain['chrf']:.2f} |")
    print(
        f"| BLEU / chrF with the glossary | {bleu_forced['bleu']:.2f} / {bleu_forced['chrf']:.2f} |"
    )
    print(
        f"| seconds unconstrained / with the glossary | wall {plain_s[0]:.2f} / {forced_s[0]:.2f} "
        f"({forced_s[0] / plain_s[0]:.2f}x); CPU {plain_s[1]:.2f} / {forced_s[1]:.2f} "
        f"({forced_s[1] / plain_s[1]:.2f}x) |"
    )

    # terms the model would never choose: each source term given another term's target word
    targets = [t.target for t in terms]
    shuffled = Glossary(
        Term(t.source, targets[(i + len(targets) // 2) % len(targets)], t.where)
        for i, t in enumerate(terms)
    )
    odd = translator.translate(sources, glossary=shuffled)
    odd_needs = [shuffled.targets(s) for s in sources]
    odd_with = [i for i, n in enumerate(odd_needs) if n]
    odd_carried = sum(all(has_word(odd[i].text, x) for x in odd_needs[i]) for i in odd_with)
    print(
        f"| unrelated terms (each source term given another's target word): carrying every "
        f"target term | {odd_carried} of {len(odd_with)} "
        f"({100 * odd_carried / max(len(odd_with), 1):.1f}%) |"
    )

    # prefixes: the reference's first half (in words), and the model's own translation's
    from nmt_cli.data.tokenizer import normalize

    def halves(texts):
        return [" ".join(t.split()[: max(1, len(t.split()) // 2)]) for t in texts]

    for name, prefixes in (
        ("the reference's", halves(refs)),
        ("its own translation's", halves(plain)),
    ):
        start = time.perf_counter()
        done = translator.translate(sources, prefixes=prefixes)
        took = time.perf_counter() - start
        out = [t.text for t in done]
        kept = sum(o.startswith(normalize(p)) for o, p in zip(out, prefixes))
        same = sum(o == p for o, p in zip(out, plain))
        better = sum(
            o != p and t.hypotheses[0].norm_score >= n
            for o, p, t, n in zip(out, plain, done, plain_norm)
        )
        print(
            f"| prefix = first half of {name} words: answers starting with it | {kept} of "
            f"{len(out)} ({100 * kept / len(out):.1f}%); equal to the unconstrained "
            f"translation: {same}; different and scored at least as high: {better}; "
            f"{took:.2f} s |"
        )


if __name__ == "__main__":
    main()
