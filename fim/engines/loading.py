"""Loading a model spec with the engine that runs it, importing only that engine.

``fim.engines.model_specs`` says what a spec names and which engine runs it; this module imports
the chosen engine (llama.cpp or transformers with torch) and returns its
``fim.engines.backend.Backend``. Kept apart from the records in ``fim.engines.backend`` so that
the engines, which build those records, and this module, which imports the engines, do not
import each other.
"""

from __future__ import annotations

from fim.engines.backend import Backend, Progress
from fim.engines.model_specs import EngineKind, ModelSpecError, choose_engine, classify_spec
from fim.options import Dtype, canonical_model


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
