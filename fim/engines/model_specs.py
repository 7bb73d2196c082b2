"""What a model spec names, and which engine runs it; no engine is imported here.

Accepted specs:

* ``random:santacoder`` (optionally ``random:santacoder@SEED``): tiny random model, in-process;
* ``bundled:qwen2.5-coder-1.5b`` (or just ``bundled``): the offline default from the
  ``bundled`` pip extra;
* a path to a ``.gguf`` file;
* a local model directory (``config.json`` inside);
* a Hugging Face hub id such as ``bigcode/gpt_bigcode-santacoder``.

Two engines run models: llama.cpp (through ``llama-cpp-python``) reads GGUF files directly
and is the fast one on a CPU or Apple's Metal; transformers (with torch) runs hub ids and
model directories, and is the engine for CUDA.  ``auto`` picks llama.cpp for GGUF models
(bundled, ``.gguf``) unless CUDA is present, and transformers for everything else; it never
falls back from llama.cpp to transformers for a GGUF model (a missing llama-cpp-python is an
error that says how to install it).  Choosing
never imports torch, so a llama.cpp server starts without paying for it.
"""

from __future__ import annotations

import enum
import importlib.util
import re
from pathlib import Path

from fim.options import BUNDLED_ALIAS, DEFAULT_MODEL, canonical_model

SPEC_FORMS = (
    "random:santacoder[@SEED]",
    f"{DEFAULT_MODEL} (or {BUNDLED_ALIAS})",
    "a path to a .gguf file",
    "a local model directory",
    "a Hugging Face hub id (owner/name)",
)
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


class ModelSpecError(ValueError):
    """A model spec that names no loadable model."""


class ModelKind(enum.StrEnum):
    """The forms a model spec takes."""

    RANDOM = "random"
    BUNDLED = "bundled"
    GGUF = "gguf"
    DIRECTORY = "dir"
    HUB = "hub"

    @property
    def is_gguf(self) -> bool:
        return self in (ModelKind.BUNDLED, ModelKind.GGUF)


class EngineKind(enum.StrEnum):
    """The model runtimes; ``AUTO`` is resolved by :func:`choose_engine`."""

    AUTO = "auto"
    LLAMA_CPP = "llama.cpp"
    TRANSFORMERS = "transformers"
    #: a vLLM server running Seam's constraint (``fim.vllm.client``): no local model
    VLLM = "vllm"
    #: llama.cpp's ``llama-server`` over its native API, constrained by verify-and-repair
    #: (``fim.servers``): no local model
    LLAMA_SERVER = "llama-server"
    #: any OpenAI-compatible ``/v1/completions`` with ``logprobs`` (vLLM without Seam's
    #: processor, LM Studio, Ollama), constrained by verify-and-repair (``fim.servers``)
    OPENAI = "openai"

    @property
    def remote(self) -> bool:
        """Whether this engine is a client of a model server (no local weights)."""
        return self in (EngineKind.VLLM, EngineKind.LLAMA_SERVER, EngineKind.OPENAI)

    @classmethod
    def parse(cls, value: str | EngineKind | None) -> EngineKind:
        """``auto``, ``llama.cpp`` (also ``llama``, ``llamacpp``) or ``transformers``."""
        if isinstance(value, EngineKind):
            return value
        text = (value or "auto").strip().lower()
        aliases = {"llama": "llama.cpp", "llamacpp": "llama.cpp", "llama-cpp": "llama.cpp",
                   "hf": "transformers", "torch": "transformers",
                   "llama_server": "llama-server", "llamaserver": "llama-server",
                   "openai-compatible": "openai"}
        try:
            return cls(aliases.get(text, text))
        except ValueError:
            raise ValueError(
                f"unknown engine {value!r}; use auto, llama.cpp, transformers, vllm, "
                "llama-server or openai"
            ) from None


ENGINE_NAMES = tuple(e.value for e in EngineKind)


def classify_spec(spec: str) -> ModelKind:
    """The kind of ``spec``; raises ``ModelSpecError`` for what names no model."""
    if not isinstance(spec, str) or not spec.strip():
        raise ModelSpecError("empty model spec; accepted forms: " + "; ".join(SPEC_FORMS))
    spec = canonical_model(spec)
    if spec.startswith("random:"):
        return ModelKind.RANDOM
    if spec.startswith("bundled:"):
        return ModelKind.BUNDLED
    try:
        path = Path(spec).expanduser()
    except RuntimeError:  # "~user" naming no known user
        path = Path(spec)
    if spec.endswith(".gguf"):
        if not path.is_file():
            raise ModelSpecError(f"GGUF file not found: {spec}")
        return ModelKind.GGUF
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelSpecError(f"{spec} is a directory without a config.json (not a model)")
        return ModelKind.DIRECTORY
    if _HUB_ID.match(spec) and not path.exists():
        return ModelKind.HUB
    raise ModelSpecError(
        f"cannot interpret model spec {spec!r}; accepted forms: " + "; ".join(SPEC_FORMS)
    )


def llama_cpp_available() -> bool:
    """Whether ``llama-cpp-python`` is installed (without importing it)."""
    return importlib.util.find_spec("llama_cpp") is not None


def cuda_requested(device: str | None) -> bool:
    """Whether ``device`` asks for CUDA explicitly."""
    return bool(device) and str(device).startswith("cuda")


def _cuda_present() -> bool:
    """CUDA without importing torch: an NVIDIA driver is loaded on Linux."""
    return Path("/proc/driver/nvidia/version").exists()


def choose_engine(kind: ModelKind, engine: EngineKind | str | None = None,
                  device: str | None = "auto") -> EngineKind:
    """The engine that runs a model of ``kind`` (see the module docstring).

    An explicit choice that cannot run the model is a ``ModelSpecError`` naming why.
    """
    engine = EngineKind.parse(engine)
    if engine is EngineKind.VLLM:
        raise ModelSpecError("the vllm engine runs no local model: it is a server's URL "
                             "(fim.vllm.client.VllmEngine.connect)")
    if engine.remote:
        raise ModelSpecError(f"the {engine} engine runs no local model: it is a server's URL "
                             "(fim.servers.connect)")
    if engine is EngineKind.AUTO:
        if not kind.is_gguf or cuda_requested(device):
            return EngineKind.TRANSFORMERS
        if device in (None, "", "auto") and _cuda_present():
            return EngineKind.TRANSFORMERS
        if not llama_cpp_available():
            # Every install includes llama.cpp, so this is a broken one. Falling back to
            # transformers would need torch and cost a one-off conversion of many GB and ~9 GB
            # of RAM for the bundled model: say what to fix instead (an explicit
            # ``--engine transformers`` still runs it there).
            raise ModelSpecError(
                "GGUF models run on the llama.cpp engine, and llama-cpp-python is not "
                "installed: bash scripts/install_llama_cpp.sh (from a clone), or pip install "
                "llama-cpp-python==0.3.36; --engine transformers runs it on transformers")
        return EngineKind.LLAMA_CPP
    if engine is EngineKind.LLAMA_CPP:
        if kind in (ModelKind.DIRECTORY, ModelKind.HUB):
            raise ModelSpecError(
                "the llama.cpp engine reads GGUF files (bundled:..., a .gguf path, random:...); "
                "use --engine transformers for hub ids and model directories")
        if cuda_requested(device):
            raise ModelSpecError("the llama.cpp engine in Seam runs on the CPU (or Metal); "
                                 "use --engine transformers for CUDA")
        if not llama_cpp_available():
            raise ModelSpecError(
                "the llama.cpp engine needs llama-cpp-python: bash scripts/install_llama_cpp.sh")
    return engine
