#!/usr/bin/env bash
# Runs the team-server tests (tests/team: the vLLM plugin's unit tests and the integration test
# against a real vLLM server) with .venv-team's Python, made by scripts/setup_team.sh. A missing
# vLLM fails here instead of skipping (SEAM_TEAM_TESTS=1). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_team.sh
export SEAM_TEAM_TESTS=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec .venv-team/bin/python -m pytest tests/team -p no:cacheprovider "$@"
