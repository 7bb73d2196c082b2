"""The ``cpu`` backend's compiler half: it names the target and refuses to compile (under
``TRITON_INTERPRET=1`` Triton interprets every kernel and never calls it)."""

from __future__ import annotations

from triton.backends.compiler import BaseBackend, GPUTarget

_REFUSAL = ("this Triton backend only opens vLLM's Model Runner V2 to Triton's interpreter; "
            "run with TRITON_INTERPRET=1 (compiling for a CPU needs a real Triton CPU backend)")


class InterpreterBackend(BaseBackend):
    """Stands for a CPU backend; every kernel is interpreted, so nothing is compiled."""

    @staticmethod
    def supports_target(target: GPUTarget) -> bool:
        return target.backend == "cpu"

    def hash(self) -> str:
        return "seam-triton-interpreter"

    def parse_options(self, options: dict) -> object:
        raise RuntimeError(_REFUSAL)

    def add_stages(self, stages: dict, options: object, language: object) -> None:
        raise RuntimeError(_REFUSAL)

    def load_dialects(self, context: object) -> None:
        pass  # no dialects: nothing is lowered

    def get_module_map(self) -> dict:
        return {}
