#!/usr/bin/env bash
# Creates .venv (if missing) and installs Seam with the given extras, e.g. `scripts/setup.sh dev,e2e`.
# Idempotent and quiet: a second run with the same extras and the same pyproject.toml only checks
# a stamp; pip's output goes to .venv/seam-setup.log and is shown only when pip fails.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
py="${PYTHON:-python3}"
log=.venv/seam-setup.log
if [ ! -x .venv/bin/python ]; then
    "$py" -m venv .venv
    .venv/bin/pip install -q --upgrade pip setuptools wheel >"$log" 2>&1 || {
        cat "$log" >&2; exit 1; }
fi
spec="."
[ -n "$extras" ] && spec=".[${extras}]"
stamp=".venv/seam-installed-$(echo "${extras:-none}" | tr ',' '-')"
want="$(sha256sum pyproject.toml | cut -c1-16)"
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
    echo "setup: installing Seam${extras:+ with $extras} into .venv" >&2
    # torch==2.13.0 is pinned: a CPU build of exactly that version is on every machine's disk.
    if ! .venv/bin/pip install -q -e "$spec" >"$log" 2>&1; then
        grep -v "is ignored: it is neither a file nor a directory" "$log" >&2
        exit 1
    fi
    echo "$want" >"$stamp"
fi
# The llama.cpp engine (the default for the bundled model on a CPU): built from source once per
# machine and CPU (about ten minutes on two cores), then installed from a cached wheel.
if [ "${SEAM_NO_LLAMA_CPP:-}" != "1" ]; then
    bash scripts/install_llama_cpp.sh
fi
.venv/bin/python -c "import quotient, lexer, python_language, fim, lsp_server"
