#!/usr/bin/env bash
# Create .venv (if missing) and install nmt with its serve, test and plot extras.
# torch is installed first and pinned, so pip does not pull a different (multi-GB) build.
# Running it again when nothing changed (pyproject.toml, the torch version, the Python) does no
# work: a stamp in .venv records what was installed. NMT_SETUP_FORCE=1 reinstalls anyway.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
TORCH_VERSION="${NMT_TORCH_VERSION:-2.13.0}"
STAMP=.venv/.nmt-setup-stamp
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
wanted="$( (cat pyproject.toml; echo "torch==${TORCH_VERSION}"; .venv/bin/python -VV) | sha256sum | cut -d' ' -f1)"
if [ "${NMT_SETUP_FORCE:-0}" != 1 ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$wanted" ] \
   && [ -x .venv/bin/nmt ]; then
  echo "setup: .venv is up to date (pyproject.toml and torch ${TORCH_VERSION} unchanged); nothing to do"
  exit 0
fi
rm -f "$STAMP"
export PIP_DISABLE_PIP_VERSION_CHECK=1
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet "torch==${TORCH_VERSION}"
.venv/bin/python -m pip install --quiet -e ".[serve,dev,plot]"
echo "$wanted" > "$STAMP"
echo "setup: done; run .venv/bin/nmt --help"
