#!/usr/bin/env bash
# Makes .venv-syncode: SynCode 0.4.16 (from its sdist) in a venv of its own, for the Go
# side-by-side benchmark (benchmarks/bench_go.py runs it as a subprocess, so the project's
# .venv never imports syncode). Not part of CI. torch is pinned to the CPU build so pip never
# pulls a CUDA torch; syncode itself goes in with --no-deps and only what its parser, mask
# store and package import need is added (not `datasets`, which pulls pyarrow and pandas: the runner stands in for `syncode.dataset`, the one module that imports it, which the parser never uses).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
VENV=.venv-syncode
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP="$VENV/bin/python -m pip install --quiet"
# CPU torch only: pip prefers the local 2.13.0+cpu wheel (find-links) over the CUDA one.
$PIP --no-deps "torch==2.13.0"
$PIP --no-deps filelock typing_extensions sympy mpmath networkx jinja2 MarkupSafe fsspec
$PIP "transformers==4.53.2" "regex==2024.11.6" interegular tqdm fire jsonschema
$PIP --no-deps --no-binary syncode "syncode==0.4.16"
"$VENV/bin/python" - <<'PY'
import torch
assert not torch.version.cuda, f"a CUDA torch was installed ({torch.version.cuda}); remove it"
import syncode.parsers  # noqa: F401  (the package import must work without datasets/jsonschema)
print("syncode ready, torch", torch.__version__)
PY
