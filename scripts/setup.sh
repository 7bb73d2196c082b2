#!/usr/bin/env bash
# Creates .venv (if missing) and installs Seam with the given extras, e.g. `scripts/setup.sh dev,e2e`.
# Idempotent: a second run only checks that everything is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
py="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$py" -m venv .venv
    .venv/bin/pip install -q --upgrade pip setuptools wheel
fi
spec="."
[ -n "$extras" ] && spec=".[${extras}]"
# torch==2.13.0 is pinned: a CPU build of exactly that version is on every machine's disk.
.venv/bin/pip install -q -e "$spec" 2>&1 | grep -v "is ignored: it is neither a file nor a directory" || true
.venv/bin/python -c "import quotient, lexer, python_language, fim, lsp_server" 
