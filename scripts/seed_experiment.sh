#!/usr/bin/env bash
# Bahdanau et al. 2015, Figure 2 on Multi30k en-fr: train RNNenc (no attention) and RNNsearch
# (attention) with the same wall-clock budget, then print BLEU per source-length bucket for both
# on test_2016_flickr and draw the chart.
#   SEED_MINUTES=10 (per model)   OUT=runs/seed-experiment
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES="${SEED_MINUTES:-10}"
OUT="${OUT:-runs/seed-experiment}"
NMT="${NMT:-.venv/bin/nmt}"
for name in rnnenc-en-fr rnnsearch-en-fr; do
  $NMT train "recipes/experiments/$name.yaml" --run-dir "$OUT/$name" --max-minutes "$MINUTES"
done
SRC="$OUT/rnnsearch-en-fr/data/test.src.txt"
REF="$OUT/rnnsearch-en-fr/data/test.tgt.txt"
$NMT eval -m "$OUT/rnnenc-en-fr" -m "$OUT/rnnsearch-en-fr" --src "$SRC" --ref "$REF" \
  --by-length --plot "$OUT/bleu-by-length.png" --metrics bleu | tee "$OUT/by-length.txt"
