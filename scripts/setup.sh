#!/usr/bin/env bash
# Create .venv (if missing) and install nmt with its test and plot extras.
# torch is installed first and pinned, so pip does not pull a different (multi-GB) build.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
TORCH_VERSION="${NMT_TORCH_VERSION:-2.13.0}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet "torch==${TORCH_VERSION}"
.venv/bin/python -m pip install --quiet -e ".[dev,plot]"
