#!/usr/bin/env bash
# Sets up everything the test suite needs (Python packages, Neovim, Node + code-server + Chromium
# for the editor end-to-end tests) and runs the whole suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev,e2e
if [ -x scripts/setup_e2e.sh ] || [ -f scripts/setup_e2e.sh ]; then
    bash scripts/setup_e2e.sh
fi
.venv/bin/ruff check .
exec .venv/bin/python -m pytest "$@"
