"""Running vLLM's Model Runner V2 on a CPU whose Triton has no CPU backend, for the team tests.

vLLM's CPU build runs Model Runner V2 (``vllm.v1.worker.cpu.model_runner``, the GPU runner
with CPU buffers) only where Triton has a ``cpu`` backend to compile its batch kernels; the
registry's Triton has only ``amd`` and ``nvidia``, so on this machine vLLM falls back to the V1
runner.  Triton's own interpreter (``TRITON_INTERPRET=1``) runs ``@triton.jit`` kernels on CPU
tensors with numpy, no compiler involved.  What is missing is only the backend vLLM looks for
before it enables V2 (``vllm.triton_utils.importing``): this package is that backend, under
the name ``cpu``, registered through Triton's ``triton.backends`` entry point group.  It
compiles nothing (compiling raises, and under the interpreter nothing asks it to), so every
kernel vLLM launches is its real kernel, run by Triton's interpreter.

:func:`v2_environment` writes the entry point's metadata into a folder and returns the
environment a vLLM process needs to run V2 this way.  It is slow (the interpreter runs each
kernel's programs one by one), so only the V2 team tests use it, with a tiny model.
"""

from __future__ import annotations

from pathlib import Path

#: The distribution the entry point is declared by; nothing is installed.
_DIST = "seam_triton_interpreter-0.dist-info"


def v2_environment(folder: Path) -> dict[str, str]:
    """Write the ``triton.backends`` entry point into ``folder`` and return the variables that
    make a vLLM process (started with the repository on its path) run Model Runner V2 with
    Triton's interpreter: ``PYTHONPATH`` gets ``folder`` (merge it with the caller's)."""
    meta = folder / _DIST
    meta.mkdir(parents=True, exist_ok=True)
    (meta / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: seam-triton-interpreter\nVersion: 0\n", encoding="utf-8")
    (meta / "entry_points.txt").write_text(
        f"[triton.backends]\ncpu = {__name__}\n", encoding="utf-8")
    return {"PYTHONPATH": str(folder), "TRITON_INTERPRET": "1",
            "VLLM_USE_V2_MODEL_RUNNER": "1"}
