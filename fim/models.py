"""Model specs resolved to a loaded ``transformers`` causal LM, its tokenizer, device and dtype.

Accepted specs:

* ``random:santacoder`` (optionally ``random:santacoder@SEED``): tiny random model, in-process;
* ``bundled:qwen2.5-coder-1.5b``: the offline default from the ``bundled`` pip extra;
* a path to a ``.gguf`` file (needs the ``gguf`` and ``accelerate`` packages);
* a local model directory (``config.json`` inside);
* a Hugging Face hub id such as ``bigcode/gpt_bigcode-santacoder``.

``trust_remote_code`` is passed to ``transformers`` only when the caller sets it.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from fim import bundled

Progress = Callable[[float, str], None]

SPEC_FORMS = (
    "random:santacoder[@SEED]",
    "bundled:qwen2.5-coder-1.5b",
    "a path to a .gguf file",
    "a local model directory",
    "a Hugging Face hub id (owner/name)",
)
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


class ModelSpecError(ValueError):
    """A model spec that names no loadable model."""


@dataclass
class LoadedModel:
    """A causal LM ready for decoding, with what it was loaded from."""

    model: torch.nn.Module
    tokenizer: object
    device: torch.device
    dtype: torch.dtype
    spec: str
    cache_dir: Path | None = None  # Seam's own cache of this model, for derived tables


def resolve_device(device: str = "auto") -> torch.device:
    """``auto`` picks CUDA when present, else CPU; an explicit CUDA without CUDA is an error."""
    if device in (None, "", "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"unknown device {device!r}; use auto, cpu or cuda[:N]") from err
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device {device!r} requested but CUDA is not available on this machine "
            "(torch reports no GPU); use --device cpu or auto"
        )
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"unsupported device {device!r}; use auto, cpu or cuda[:N]")
    return dev


_DTYPES = {
    "fp32": torch.float32, "float32": torch.float32,
    "fp16": torch.float16, "float16": torch.float16, "half": torch.float16,
    "bf16": torch.bfloat16, "bfloat16": torch.bfloat16,
}


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """``auto``: bf16 on GPUs that support it, else fp16; fp32 on CPU.

    On CPU, one-token decoding is matrix-vector work, and torch's bf16 matrix-vector kernels
    measured ~3x slower than fp32 on this project's machine (an AVX-512 EPYC; see
    docs/evaluation.md), so ``auto`` keeps fp32 there; ``--dtype bf16`` remains available.
    """
    if dtype in (None, "", "auto"):
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    try:
        return _DTYPES[dtype]
    except KeyError:
        raise ValueError(
            f"unknown dtype {dtype!r}; use auto, {', '.join(sorted(set(_DTYPES)))}"
        ) from None


def classify_spec(spec: str) -> str:
    """One of ``random``, ``bundled``, ``gguf``, ``dir``, ``hub``; raises ``ModelSpecError``."""
    if not isinstance(spec, str) or not spec.strip():
        raise ModelSpecError("empty model spec; accepted forms: " + "; ".join(SPEC_FORMS))
    if spec.startswith("random:"):
        return "random"
    if spec.startswith("bundled:"):
        return "bundled"
    try:
        path = Path(spec).expanduser()
    except RuntimeError:  # "~user" naming no known user
        path = Path(spec)
    if spec.endswith(".gguf"):
        if not path.is_file():
            raise ModelSpecError(f"GGUF file not found: {spec}")
        return "gguf"
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelSpecError(f"{spec} is a directory without a config.json (not a model)")
        return "dir"
    if _HUB_ID.match(spec) and not path.exists():
        return "hub"
    raise ModelSpecError(
        f"cannot interpret model spec {spec!r}; accepted forms: " + "; ".join(SPEC_FORMS)
    )


def _random(spec: str, device: torch.device, dtype: torch.dtype):
    from fim.random_model import build_random_santacoder

    name, _, seed = spec[len("random:"):].partition("@")
    if name != "santacoder":
        raise ModelSpecError(f"unknown random model {name!r}; only random:santacoder exists")
    try:
        seed_value = int(seed) if seed else 0
    except ValueError:
        raise ModelSpecError(f"random model seed must be an integer, got {seed!r}") from None
    model, tokenizer = build_random_santacoder(seed=seed_value)
    return model.to(device=device, dtype=dtype), tokenizer


# tokenizer_config.json fields that _cached_tokenizer passes on.
_TOKENIZER_FIELDS = ("bos_token", "eos_token", "pad_token", "unk_token", "model_max_length",
                     "clean_up_tokenization_spaces", "extra_special_tokens",
                     "additional_special_tokens")


def _cached_tokenizer(path: Path):
    """The tokenizer of a Seam cache directory, read straight into the ``tokenizers`` library.

    ``AutoTokenizer`` re-parses Qwen's 11 MB ``tokenizer.json`` in Python several times
    (~0.8 s); the native reader takes ~0.25 s and gives the same ids, special and added tokens
    (tested).  Falls back to ``AutoTokenizer`` for a directory it cannot read this way.
    """
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    try:
        config = json.loads((path / "tokenizer_config.json").read_text(encoding="utf-8"))
        fields = {k: config[k] for k in _TOKENIZER_FIELDS if config.get(k) is not None}
        return PreTrainedTokenizerFast(tokenizer_file=str(path / "tokenizer.json"), **fields)
    except (OSError, ValueError, TypeError, KeyError):
        return AutoTokenizer.from_pretrained(str(path))


def _need_gguf_support(what: str) -> None:
    for module in ("gguf", "accelerate"):
        if importlib.util.find_spec(module) is None:
            raise ModelSpecError(
                f"loading {what} needs the {module!r} package: pip install \".[gguf]\""
            )


def load_model(
    spec: str,
    device: str = "auto",
    dtype: str = "auto",
    trust_remote_code: bool = False,
    progress: Progress | None = None,
) -> LoadedModel:
    """Load ``spec`` (see the module docstring) onto ``device`` in ``dtype``."""
    kind = classify_spec(spec)
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    if kind == "random":
        model, tokenizer = _random(spec, dev, dt)
        return LoadedModel(model, tokenizer, dev, dt, spec)

    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs: dict = {"dtype": dt}
    if trust_remote_code:
        kwargs["trust_remote_code"] = True
    tok_kwargs = {"trust_remote_code": True} if trust_remote_code else {}
    if kind == "bundled":
        name = spec[len("bundled:"):]
        try:
            info = bundled.lookup(name)
        except KeyError as err:
            raise ModelSpecError(str(err.args[0])) from None
        path = bundled.convert(info, progress=progress)
        if progress:
            progress(1.0, "loading the bundled model")
        tokenizer = _cached_tokenizer(path)
        model = AutoModelForCausalLM.from_pretrained(str(path), **kwargs)
    elif kind == "gguf":
        _need_gguf_support(spec)
        path = Path(spec).expanduser()
        if progress:
            progress(0.0, f"loading {path.name} (dequantizing GGUF weights)")
        tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(
            str(path.parent), gguf_file=path.name, **kwargs
        )
    else:
        if progress:
            progress(0.0, f"loading {spec}")
        try:
            tokenizer = AutoTokenizer.from_pretrained(spec, **tok_kwargs)
            model = AutoModelForCausalLM.from_pretrained(spec, **kwargs)
        except OSError as err:
            where = "directory" if kind == "dir" else "hub id (is the model downloaded?)"
            raise ModelSpecError(f"cannot load model {spec!r} as a {where}: {err}") from err
    model.to(dev)
    model.eval()
    if progress:
        progress(1.0, "model ready")
    return LoadedModel(model, tokenizer, dev, dt, spec,
                       cache_dir=path if kind == "bundled" else None)
