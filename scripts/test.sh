#!/usr/bin/env bash
# Set up (scripts/setup.sh), run the lint and format gate (ruff, configured in pyproject.toml),
# then the whole test suite, slow end-to-end tests included.
# As root with apt-get, the Debian packages the web page's browser test drives (chromium,
# chromium-driver) are installed when missing; elsewhere that test skips with its reason.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
   ! { command -v chromium >/dev/null && command -v chromedriver >/dev/null; }; then
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null; } \
    || echo "test.sh: warning: could not install chromium and chromium-driver; the web page's browser test will skip" >&2
fi
export NMT_DATA_MIRROR="${NMT_DATA_MIRROR:-$(cd .. && pwd)/shared/data}"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
exec .venv/bin/python -m pytest -q "$@"
