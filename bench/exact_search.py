"""Search exactness and its cost on a test set: BLEU and seconds of greedy and beam search, whether
a line's translation depends on its batch-mates, and whether a beam of one is greedy search.

    python bench/exact_search.py -m RUN --src test.en --ref test.fr [--quantize int8]

Prints one JSON line per measurement and a Markdown table. Runs against whatever ``nmt_cli`` is
on PYTHONPATH, so two versions of the code can be measured back to back on one model:
  * ``seconds``: translating the whole file in one call (model loaded, not counted);
  * ``changed_shuffled``: lines whose translation differs when the file is translated in a random
    order (other batch-mates), ``changed_alone``: when every line is translated on its own;
  * ``beam1_vs_greedy``: lines where beam search with a beam of one differs from greedy search.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import time
from pathlib import Path


def read(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return fh.read().split("\n")[:-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-m", "--model", required=True, help="run dir")
    ap.add_argument("--src", type=Path, required=True)
    ap.add_argument("--ref", type=Path, required=True)
    ap.add_argument("--label", default="", help="name of the code version measured, for the table")
    ap.add_argument("--quantize", default="none")
    ap.add_argument("--beams", default="1,5", help="beam sizes to measure")
    ap.add_argument(
        "--alone", type=int, default=200, help="lines translated one at a time (0 = skip)"
    )
    ap.add_argument(
        "--repeat", type=int, default=3, help="timed runs per beam size; the minimum is reported"
    )
    args = ap.parse_args()

    import torch

    import nmt_cli
    import nmt_cli.translate as translate
    from nmt_cli.scoring import score
    from nmt_cli.search import beam_search

    sources, refs = read(args.src), read(args.ref)
    translator = translate.load_translator([args.model], quantize=args.quantize)
    rows = []
    for beam in [int(b) for b in args.beams.split(",")]:
        translator.opts.beam_size = beam
        seconds, hyps = [], None
        for _ in range(args.repeat):
            start = time.perf_counter()
            hyps = [t.text for t in translator.translate(sources)]
            seconds.append(time.perf_counter() - start)
        bleu = score(hyps, refs, ("bleu",))[0].score
        order = list(range(len(sources)))
        random.Random(1).shuffle(order)
        shuffled = [t.text for t in translator.translate([sources[i] for i in order])]
        changed_shuffled = sum(shuffled[j] != hyps[i] for j, i in enumerate(order))
        changed_alone = None
        if args.alone:
            changed_alone = sum(
                translator.translate([sources[i]])[0].text != hyps[i] for i in range(args.alone)
            )
        row = {
            "code": args.label or str(Path(nmt_cli.__file__).parent),
            "quantize": args.quantize,
            "beam": beam,
            "bleu": round(bleu, 2),
            "seconds": round(min(seconds), 2),
            "threads": torch.get_num_threads(),
            "changed_shuffled": changed_shuffled,
            "changed_alone": changed_alone,
            "alone_of": args.alone,
        }
        if beam == 1:
            plain = translate.search

            def beam_of_one(model, src, src_lengths, **kw):
                kw.pop("beam_size")
                return beam_search(model, src, src_lengths, beam_size=1, **kw)

            translate.search = beam_of_one
            try:
                beam1 = [t.text for t in translator.translate(sources)]
            finally:
                translate.search = plain
            row["beam1_vs_greedy"] = sum(a != b for a, b in zip(beam1, hyps))
        print(json.dumps(row), flush=True)
        rows.append(row)
    print(
        "| code | int8 | beam | BLEU | seconds | changed, shuffled | changed, alone | beam 1 ≠ greedy |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['code']} | {r['quantize']} | {r['beam']} | {r['bleu']:.2f} | {r['seconds']:.2f} | "
            f"{r['changed_shuffled']} | {r['changed_alone']}/{r['alone_of']} | {r.get('beam1_vs_greedy', '')} |"
        )


if __name__ == "__main__":
    main()
