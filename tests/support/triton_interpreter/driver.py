"""The ``cpu`` backend's driver half: always active (it is the machine's only device), the
target is the CPU, and torch's device is ``cpu``."""

from __future__ import annotations

from triton.backends.compiler import GPUTarget
from triton.backends.driver import DriverBase

from tests.support.triton_interpreter.compiler import _REFUSAL


class InterpreterDriver(DriverBase):
    """The driver vLLM's Triton check counts; kernels never reach it (they are interpreted)."""

    @classmethod
    def is_active(cls) -> bool:
        return True

    def map_python_to_cpp_type(self, ty: str) -> str:
        raise RuntimeError(_REFUSAL)

    def get_current_target(self) -> GPUTarget:
        return GPUTarget("cpu", "interpreter", 1)

    def get_active_torch_device(self) -> object:
        import torch

        return torch.device("cpu")

    def get_benchmarker(self) -> object:
        raise RuntimeError(_REFUSAL)
