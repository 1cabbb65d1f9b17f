#!/usr/bin/env bash
# Create .venv (if missing) and install nmt with its serve, test and plot extras; as root, also the
# Debian packages the web page's browser test drives (chromium, chromium-driver) when missing.
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
.venv/bin/python -m pip install --quiet -e ".[serve,dev,plot]"
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
   ! { command -v chromium >/dev/null && command -v chromedriver >/dev/null; }; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null \
    || echo "setup.sh: warning: could not install chromium and chromium-driver; the web page's browser test will skip" >&2
fi
