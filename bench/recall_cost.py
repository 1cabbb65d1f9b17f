"""What the translation memory and the cache cost when they miss, beside what decoding costs, in
one process (so both see the same machine load).

    python bench/recall_cost.py -m runs/en-fr --src test_2016_flickr.en.gz \
        [--lines 500] [--batch 16] [--suggestions 2000] [--threads 1] [--rounds 3]

The sentences are cut into plans of --batch lines (as a batch of requests), each plan's segments
looked up (nmt_cli/documents/recall.py's Recall.split against a --suggestions file of
--suggestions unmatched entries and an empty cache, so every lookup misses), decoded, and the
decoded kept in the cache (Recollection.keep), as `nmt serve` does. Prints the CPU time of the
lookups and keeps per sentence, of decoding per sentence, and their ratio, per round; then the
memory one cache entry holds (tracemalloc, over a last pass that keeps every result), which
times --cache-size bounds what the cache can hold.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--src", required=True, type=Path)
    ap.add_argument("--lines", type=int, default=500)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--suggestions", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    import torch

    from nmt_cli.data.corpora import read_lines
    from nmt_cli.documents.layer import DocumentOptions, document_plan, segment_options
    from nmt_cli.documents.recall import Recall
    from nmt_cli.serving.suggestions import SuggestionStore
    from nmt_cli.translation.cache import TranslationCache
    from nmt_cli.translation.contract import TranslateOptions
    from nmt_cli.translation.translator import Translator

    torch.set_num_threads(args.threads)
    translator = Translator.load(args.model, device="cpu", workers=1)
    recipe = translator.recipe
    lines = [x for x in read_lines(args.src) if x.strip()][: args.lines]
    store = SuggestionStore(Path(tempfile.mkdtemp()) / "suggestions.db")
    for i in range(args.suggestions):
        store.add(recipe.src, recipe.tgt, f"unmatched sentence number {i}", f"phrase {i}")
    options = TranslateOptions()
    documents = DocumentOptions()
    translator.translate(lines[:8])  # warm-up
    print(f"# {args.model}; {len(lines)} lines in plans of {args.batch}, {args.threads} thread(s)")
    for r in range(args.rounds):
        cache = TranslationCache(4096)  # empty each round: every lookup misses
        recall = Recall(recipe.src, recipe.tgt, "model", store, cache)
        looked = decoded = 0.0
        segments = 0
        for at in range(0, len(lines), args.batch):
            plan = document_plan(translator, lines[at : at + args.batch], documents)
            asked = segment_options(plan, options)
            start = time.process_time()
            found = recall.split(plan, asked)
            looked += time.process_time() - start
            start = time.process_time()
            results = translator.translate(found.segments(plan), asked)
            decoded += time.process_time() - start
            start = time.process_time()
            found.keep(found.merged(results))
            looked += time.process_time() - start
            segments += len(plan.segments)
        print(
            f"round {r + 1}: {segments} segments, all missed ({cache.misses} cache misses); "
            f"lookups and keeps {1e6 * looked / segments:.1f} us a segment, decoding "
            f"{1e3 * decoded / segments:.2f} ms a segment: {100 * looked / decoded:.3f}% of it"
        )
    import gc
    import tracemalloc

    cache = TranslationCache(len(lines) + 16)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    results = translator.translate(lines, options)
    count = len(results)
    for i, tr in enumerate(results):
        cache.put(("model", i), tr)
    del results, tr  # what stays is what the cache holds
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    print(f"cache: {held / count / 1024:.2f} KiB an entry over {count} entries")


if __name__ == "__main__":
    main()
