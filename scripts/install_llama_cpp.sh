#!/usr/bin/env bash
# Installs llama-cpp-python (the llama.cpp engine) into .venv (or the virtual environment
# SEAM_VENV names, e.g. SEAM_VENV=.venv-team).
#
# The registry has no binary wheel, so it is built from source once (about ten minutes on two
# cores) and the wheel is kept in ~/.cache/seam/wheels/<key>, where <key> names the version
# and the instruction sets it was built for: a later setup, or another checkout on the same
# machine, installs it in seconds, and a machine with other CPU features builds its own.
#
# Kernels: on x86-64 the build is not "-march=native" but lists the features this CPU reports
# (AVX, AVX2, FMA, F16C, BMI2, and the AVX-512 family when present). AMX stays off: with it
# on, llama.cpp 0.3.36's AMX matrix kernels crash on the first decode on CPUs whose hypervisor
# hides AMX from the OS. Elsewhere (arm64 Linux, Apple Silicon with Metal) llama.cpp's own
# defaults apply. SEAM_LLAMA_CMAKE_ARGS replaces the computed flags.
#
# `--print-flags` only prints the CMake flags for this CPU (benchmarks/llama_server.py builds
# llama.cpp's own server with the same kernels).
set -euo pipefail
cd "$(dirname "$0")/.."
version="0.3.36"
venv="${SEAM_VENV:-.venv}"
pip="$venv/bin/pip"
py="$venv/bin/python"
print_only=false
[ "${1:-}" = "--print-flags" ] && print_only=true

if ! $print_only && "$py" -c \
    "import llama_cpp, sys; sys.exit(llama_cpp.__version__ != '$version')" 2>/dev/null; then
    exit 0
fi

flags=()
if [ -n "${SEAM_LLAMA_CMAKE_ARGS:-}" ]; then
    read -r -a flags <<< "$SEAM_LLAMA_CMAKE_ARGS"
elif [ "$(uname -s)" = Linux ] && [ "$(uname -m)" = x86_64 ]; then
    cpu=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
    has() { [[ "$cpu" == *" $1 "* ]]; }
    onoff() { if has "$1"; then echo ON; else echo OFF; fi; }
    avx512=OFF
    if has avx512f && has avx512cd && has avx512vl && has avx512dq && has avx512bw; then
        avx512=ON
    fi
    vbmi=OFF; vnni=OFF; bf16=OFF
    if [ $avx512 = ON ]; then
        vbmi=$(onoff avx512vbmi); vnni=$(onoff avx512_vnni); bf16=$(onoff avx512_bf16)
    fi
    flags=(-DGGML_NATIVE=OFF
           -DGGML_SSE42="$(onoff sse4_2)" -DGGML_AVX="$(onoff avx)" -DGGML_AVX2="$(onoff avx2)"
           -DGGML_FMA="$(onoff fma)" -DGGML_F16C="$(onoff f16c)" -DGGML_BMI2="$(onoff bmi2)"
           -DGGML_AVX_VNNI="$(onoff avx_vnni)" -DGGML_AVX512=$avx512
           -DGGML_AVX512_VBMI="$vbmi" -DGGML_AVX512_VNNI="$vnni" -DGGML_AVX512_BF16="$bf16"
           -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF)
fi
if $print_only; then
    echo "${flags[*]}"
    exit 0
fi
# Only the text library: no multimodal (llava/mtmd) part, which Seam does not use.
flags+=(-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
        -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF)

key=$(printf '%s %s %s %s' "$version" "$(uname -s)-$(uname -m)" "$("$py" -c \
    'import sys; print(sys.implementation.cache_tag)')" "${flags[*]}" | sha256sum | cut -c1-16)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/seam/wheels/llama-cpp-python-$version-$key"
wheel=$(ls "$cache"/llama_cpp_python-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ]; then
    echo "building llama-cpp-python $version from source (once per machine, ~10 min on 2 cores)" >&2
    echo "  flags: ${flags[*]}" >&2
    mkdir -p "$cache.tmp"
    if ! CMAKE_ARGS="${flags[*]}" "$pip" wheel -q --no-deps --no-cache-dir \
            --no-binary llama-cpp-python -w "$cache.tmp" "llama-cpp-python==$version" \
            >"$cache.tmp/build.log" 2>&1; then
        grep -v "is ignored: it is neither a file nor a directory" "$cache.tmp/build.log" \
            | tail -n 60 >&2
        echo "install_llama_cpp: the build failed (full log: $cache.tmp/build.log)" >&2
        exit 1
    fi
    rm -rf "$cache"
    mv "$cache.tmp" "$cache"
    wheel=$(ls "$cache"/llama_cpp_python-*.whl | head -n 1)
fi
"$pip" install -q "$wheel" 2>&1 | grep -v "is ignored: it is neither a file nor a directory" \
    >&2 || true
"$py" -c "import llama_cpp" 
