#!/usr/bin/env bash
# The main job on a laptop CPU: fetch Multi30k en-fr, preprocess, train for a few minutes,
# translate a few test sentences, print BLEU on the test set, and say where the model is.
#   QUICKSTART_MINUTES=5   training time (wall clock)
#   NMT_DATA_MIRROR=DIR    read corpora from DIR/<corpus>/<file> instead of the network; by default
#                          ../shared/data where that folder exists (as scripts/test.sh), else the
#                          public URLs. Either way files are cached in ~/.cache/nmt/data.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ -z "${NMT_DATA_MIRROR:-}" ] && [ -d ../shared/data ]; then
  NMT_DATA_MIRROR="$(cd ../shared/data && pwd)"
  export NMT_DATA_MIRROR
fi
MINUTES="${QUICKSTART_MINUTES:-5}"
RUN=runs/quickstart-en-fr
NMT=.venv/bin/nmt
$NMT preprocess recipes/en-fr.yaml --run-dir "$RUN"
$NMT train recipes/en-fr.yaml --run-dir "$RUN" --max-minutes "$MINUTES" --set train.valid_every=200
echo "--- a few translations (greedy) ---"
head -n 5 "$RUN/data/test.src.txt" | $NMT translate -m "$RUN" --beam-size 1
echo "--- test_2016_flickr, beam 5 ---"
$NMT translate -m "$RUN" -i "$RUN/data/test.src.txt" -o "$RUN/test.hyp.fr"
$NMT eval --hyp "$RUN/test.hyp.fr" --ref "$RUN/data/test.tgt.txt"
steps=$(.venv/bin/python -c 'import json,sys; print(json.load(open(sys.argv[1]))["final_step"])' "$RUN/summary.json")
echo "--- expected (README, quick start): about 41 BLEU after 800 steps, 25 after 186; this run trained $steps steps"
if [ "$steps" -lt 400 ]; then
  echo "    few steps for ${MINUTES} minutes: is another job using the cores? see docs/running.md (--threads)"
fi
echo "--- the model: $(pwd)/$RUN (checkpoints/best.pt, with its SentencePiece model and recipe)"
echo "    translate: echo 'Two dogs run through the snow.' | $NMT translate -m $RUN"
echo "               $NMT translate -m $RUN -i input.en -o output.fr"
echo "    more training: $NMT train recipes/en-fr.yaml --run-dir $RUN --max-minutes 10 (resumes)"
