#!/usr/bin/env bash
# Bahdanau et al. 2015, Figure 2 on Multi30k en-fr: train RNNenc (no attention) and RNNsearch
# (attention) with the same wall-clock budget, then print BLEU per source-length bucket for both
# on test_2016_flickr and draw the chart.
#   SEED_MINUTES=10      training minutes per model
#   SEED_PARALLEL=1      train both at once, one CPU thread each (same budget, half the wall time)
#   OUT=runs/seed-experiment
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES="${SEED_MINUTES:-10}"
OUT="${OUT:-runs/seed-experiment}"
NMT="${NMT:-.venv/bin/nmt}"
$NMT preprocess recipes/experiments/rnnsearch-en-fr.yaml --run-dir "$OUT/rnnsearch-en-fr"
mkdir -p "$OUT/rnnenc-en-fr"
cp -r "$OUT/rnnsearch-en-fr/data" "$OUT/rnnsearch-en-fr/spm.model" "$OUT/rnnsearch-en-fr/recipe.yaml" "$OUT/rnnenc-en-fr/"
if [ "${SEED_PARALLEL:-0}" = 1 ]; then
  pids=()
  for name in rnnenc-en-fr rnnsearch-en-fr; do
    OMP_NUM_THREADS=1 $NMT train "recipes/experiments/$name.yaml" --run-dir "$OUT/$name" \
      --max-minutes "$MINUTES" > "$OUT/$name.train.json" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
else
  for name in rnnenc-en-fr rnnsearch-en-fr; do
    $NMT train "recipes/experiments/$name.yaml" --run-dir "$OUT/$name" --max-minutes "$MINUTES" \
      > "$OUT/$name.train.json"
  done
fi
SRC="$OUT/rnnsearch-en-fr/data/test.src.txt"
REF="$OUT/rnnsearch-en-fr/data/test.tgt.txt"
$NMT eval -m "$OUT/rnnenc-en-fr" -m "$OUT/rnnsearch-en-fr" --src "$SRC" --ref "$REF" \
  --by-length --plot "$OUT/bleu-by-length.png" --metrics bleu,chrf | tee "$OUT/by-length.txt"
