#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the whole test suite, slow end-to-end tests included.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export NMT_DATA_MIRROR="${NMT_DATA_MIRROR:-$(cd .. && pwd)/shared/data}"
exec .venv/bin/python -m pytest -q "$@"
