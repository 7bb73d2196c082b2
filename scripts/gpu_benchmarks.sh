#!/usr/bin/env bash
# The team benchmarks on a CUDA machine, in about ten minutes: installs vLLM's CUDA build (the
# `team-cuda` extra) into .venv-cuda, runs the quality benchmark (benchmarks/vllm_quality.py:
# constrained decodes through vLLM paired with llama.cpp on the same dev cases) and the engine-step
# benchmark (benchmarks/bench_vllm_step.py: the processor's share of a real step at 1, 4 and 16
# requests) against the GPU, and writes their figures into docs/team.md's GPU sections
# (gpu-vllm-quality, gpu-vllm-step), each headed by the GPU it ran on (nvidia-smi's name,
# memory and driver) besides the run record the scripts write (commit, versions, CPU, load).
#
#   bash scripts/gpu_benchmarks.sh                 # on the CUDA machine, from a clone
#   bash scripts/gpu_benchmarks.sh --dry-run       # anywhere: check the pieces, print the commands
#   bash scripts/gpu_benchmarks.sh --device cpu    # the same runs, tiny, on this CPU's .venv-team
#
# Options: --dry-run; --device cuda|cpu (default cuda); --cases N (quality cases per dataset,
# default 25); --skip-quality (no llama.cpp comparison: it needs the bundled GGUF and builds
# llama-cpp-python once, minutes). SEAM_CUDA_PYTHON names a Python that has vLLM's CUDA build
# already (no install then). The model is the bundled one, converted once to a safetensors
# directory (~/.cache/seam/qwen2.5-coder-1.5b-v1), which needs the GGUF (downloaded by `seam`
# when missing). `--device cpu` writes its figures into a copy of docs/team.md under
# $TMPDIR (a CPU's figures never go into the GPU sections) and prints where. vLLM's logs are
# kept in $TMPDIR/seam-gpu-benchmarks too.
set -euo pipefail
cd "$(dirname "$0")/.."
device=cuda dry=false cases=25 quality=true
while [ $# -gt 0 ]; do
    case "$1" in
        --dry-run) dry=true ;;
        --device) device="$2"; shift ;;
        --cases) cases="$2"; shift ;;
        --skip-quality) quality=false ;;
        *) echo "gpu_benchmarks: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
case "$device" in cuda|cpu) ;; *) echo "gpu_benchmarks: --device is cuda or cpu" >&2; exit 2 ;; esac

figures=docs/team.md
work="${TMPDIR:-/tmp}/seam-gpu-benchmarks"
mkdir -p "$work"
if [ "$device" = cpu ]; then
    team_python=.venv-team/bin/python
    [ -x "$team_python" ] || { echo "gpu_benchmarks: run scripts/setup_team.sh first" >&2; exit 1; }
    cp docs/team.md "$work/team.md"
    figures="$work/team.md"
    cases=1
    step_args=(--concurrency 1 --rounds 1 --sampling greedy --max-tokens 4 --kv-cache-gib 1)
    quality_args=(--modes constrained --max-tokens 8 --kv-cache-gib 1)
else
    team_python="${SEAM_CUDA_PYTHON:-.venv-cuda/bin/python}"
    step_args=(--concurrency 1,4,16 --rounds 2)
    quality_args=(--modes constrained)
fi

run() {  # print a step; run it unless --dry-run
    echo "+ $*" >&2
    $dry || "$@"
}

# 1. vLLM's CUDA build, in an environment of its own (never .venv: vLLM pins its packages).
if [ "$device" = cuda ] && [ -z "${SEAM_CUDA_PYTHON:-}" ]; then
    if [ ! -x .venv-cuda/bin/python ]; then
        run python3 -m venv .venv-cuda
    fi
    # Seam's default install includes the llama.cpp engine (no binary wheel on the registry:
    # built once, kept in ~/.cache/seam/wheels), which the quality benchmark pairs with vLLM.
    run env SEAM_VENV=.venv-cuda bash scripts/install_llama_cpp.sh
    run .venv-cuda/bin/pip install -q -e ".[team-cuda]"
fi
if [ "$device" = cuda ]; then
    run "$team_python" -c "import torch, vllm; assert torch.cuda.is_available(), 'no CUDA device'; print('vLLM', vllm.__version__, 'on', torch.cuda.get_device_name(0))"
fi

# The benchmarks' own side runs in .venv when there is one (a clone set up with
# scripts/setup.sh), else in vLLM's environment (a fresh CUDA machine).
py=.venv/bin/python
[ -x "$py" ] || py="$team_python"

# The pieces, checked even in a dry run: the sections exist, the scripts take the arguments.
for section in gpu-vllm-quality gpu-vllm-step; do
    grep -q "<!-- figures:$section -->" "$figures" \
        || { echo "gpu_benchmarks: $figures has no section $section" >&2; exit 1; }
done
if [ -x "$py" ]; then
    PYTHONPATH=$PWD "$py" - "$cases" <<'EOF'
import sys
from benchmarks import bench_vllm_step, vllm_quality
vllm_quality._arguments(["--cases", sys.argv[1], "--modes", "constrained"])
assert callable(bench_vllm_step.main) and callable(vllm_quality.main)
EOF
else
    echo "gpu_benchmarks: no Python with Seam's dependencies yet ($py): the benchmarks'" \
         "arguments are checked once it is installed" >&2
fi

gpu_label() {  # the machine the figures were taken on
    if [ "$device" = cuda ] && command -v nvidia-smi >/dev/null; then
        echo "GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1) (nvidia-smi)"
    else
        echo "Device: this machine's CPU (scripts/gpu_benchmarks.sh --device cpu: a check of the script, not a GPU figure)"
    fi
}

label() {  # put the machine's line first in a section the benchmark just wrote
    $dry && return 0
    PYTHONPATH=$PWD "$py" - "$figures" "$1" "$(gpu_label)" "$device" <<'EOF'
import sys
from pathlib import Path
path, section, line, device = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
begin, end = f"<!-- figures:{section} -->", f"<!-- /figures:{section} -->"
text = path.read_text(encoding="utf-8")
head, rest = text.split(begin + "\n", 1)
body, tail = rest.split(end, 1)
if device == "cuda":  # the step benchmark names the build it is usually run on
    body = body.replace("vLLM's CPU build", "vLLM's CUDA build")
path.write_text(f"{head}{begin}\n**{line}**\n\n{body}{end}{tail}", encoding="utf-8")
EOF
}

# 2. The bundled model as vLLM loads it (converted once; the GGUF is fetched when missing).
run env PYTHONPATH="$PWD" "$py" -c "from fim.engines import bundled; print(bundled.convert(bundled.lookup_spec('bundled:qwen2.5-coder-1.5b')))"

# 3. The engine-step benchmark (the processor's share of a GPU step, measured, not projected).
run env PYTHONPATH="$PWD" "$py" -m benchmarks.bench_vllm_step --team-python "$team_python" \
    "${step_args[@]}" --json "$work/step.json" --server-log "$work/step-vllm.log" \
    --figures "$figures" --section gpu-vllm-step
label gpu-vllm-step

# 4. Quality through vLLM paired with llama.cpp (constrained decodes only, to fit the time).
if $quality; then
    run env PYTHONPATH="$PWD" "$py" -m benchmarks.vllm_quality --cases "$cases" \
        "${quality_args[@]}" --team-python "$team_python" --out "$work/quality-$device" \
        --server-log "$work/quality-vllm.log" \
        --figures "$figures" --section gpu-vllm-quality
    label gpu-vllm-quality
fi
echo "gpu_benchmarks: figures in $figures" >&2
