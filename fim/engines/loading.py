"""Loading a model spec with the engine that runs it, importing only that engine.

``fim.engines.model_specs`` says what a spec names and which engine runs it; this module imports
the chosen engine (llama.cpp or transformers with torch) and returns its
``fim.engines.backend.Backend``. Kept apart from the records in ``fim.engines.backend`` so that
the engines, which build those records, and this module, which imports the engines, do not
import each other.

Both engines run their threads with OpenMP (torch with its own copy of the runtime, the
llama.cpp build with the system's), and each copy reads ``OMP_WAIT_POLICY`` once, when it is
loaded. The two want opposite settings. torch's idle threads spun after each forward pass and
delayed the server's event loop (5 to 35 ms before an answer went out, on a busy CPU), so torch
is imported with ``PASSIVE``: idle threads sleep at once. llama.cpp meets its threads at a
barrier after every operation of a forward pass, hundreds of times per token, and sleeping
there made a decode step 40% slower (73 to 103 ms per token on the project's two-core machine;
a prompt's large batches barely change), so llama.cpp keeps the runtime's default (spin a
little, then sleep). The setting is made only for torch's import and taken back after it; a
user's own ``OMP_WAIT_POLICY`` is left alone.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from fim.engines.backend import Backend, Progress
from fim.engines.model_specs import EngineKind, ModelSpecError, choose_engine, classify_spec
from fim.options import Dtype, canonical_model

#: The environment variable each OpenMP runtime reads when it is loaded (module docstring).
OMP_WAIT_POLICY = "OMP_WAIT_POLICY"


@contextmanager
def idle_threads_sleep() -> Iterator[None]:
    """``OMP_WAIT_POLICY=PASSIVE`` while torch's OpenMP runtime loads (unless the user set the
    variable), then the environment as it was, so that a llama.cpp loaded later in the same
    process keeps its spinning threads."""
    if OMP_WAIT_POLICY in os.environ:
        yield
        return
    os.environ[OMP_WAIT_POLICY] = "PASSIVE"
    try:
        yield
    finally:
        os.environ.pop(OMP_WAIT_POLICY, None)


def load_backend(
    spec: str,
    engine: EngineKind | str | None = EngineKind.AUTO,
    device: str = "auto",
    dtype: Dtype | str = Dtype.AUTO,
    trust_remote_code: bool = False,
    progress: Progress | None = None,
    *,
    slots: int = 4,
    window: int | None = None,
    threads: int | None = None,
) -> Backend:
    """Load ``spec`` with the chosen engine (see ``fim.engines.model_specs``).

    ``slots`` is how many token sequences the step model keeps cached; ``window`` bounds the
    positions per sequence, the model's token window (llama.cpp allocates ``(slots + 1) *
    window`` cells up front);
    ``threads`` is llama.cpp's thread count (default: the CPUs this process may use, at
    most 8).
    """
    spec = canonical_model(spec)
    kind = classify_spec(spec)
    chosen = choose_engine(kind, engine, device)
    if chosen is EngineKind.LLAMA_CPP:
        if dtype not in (None, "", "auto"):
            raise ValueError("--dtype applies to the transformers engine; a GGUF file carries "
                             "its own quantization (use --engine transformers to set it)")
        from fim.engines.llama_engine import load_llama_backend

        return load_llama_backend(spec, kind, progress=progress, slots=slots,
                                  window=window, threads=threads)
    # transformers dequantizes GGUF weights (the bundled model: once, into a safetensors cache).
    try:
        with idle_threads_sleep():
            from fim.engines.transformers_engine import load_transformers_backend
    except ModuleNotFoundError as exc:
        # The default install leaves torch and transformers out: say which extra brings them.
        if (exc.name or "").split(".")[0] not in ("torch", "transformers"):
            raise
        raise ModelSpecError(
            f"the transformers engine needs {exc.name.split('.')[0]}, which Seam's default "
            "install leaves out: pip install 'seam-complete[transformers]' (or run a GGUF "
            "model on the llama.cpp engine)") from exc

    return load_transformers_backend(spec, kind, device, dtype, trust_remote_code, progress,
                                     slots=slots)
