"""The transformers engine: hub ids, model directories and CUDA, through torch.

Loads a causal LM with ``transformers`` (the bundled GGUF model from its one-time safetensors
cache, a ``.gguf`` file by dequantizing it, ``random:santacoder`` built in-process) and drives
it through :class:`TransformersStepModel`, which keeps one ``DynamicCache`` per slot.

``trust_remote_code`` is passed to ``transformers`` only when the caller sets it.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from fim.engines import bundled
from fim.engines.backend import Backend, Progress
from fim.engines.model_specs import EngineKind, ModelKind, ModelSpecError
from fim.engines.step_model import Interrupt, Slot, StepModel
from fim.engines.vocab import Vocabulary, build_vocabulary, cached_vocabulary

log = logging.getLogger(__name__)


class _RenamedCacheNotice(logging.Filter):
    """Drops transformers' one-time notice that ``past_key_values`` is now called ``cache``.

    The engine keeps the name every transformers 5.x release accepts; newer releases log the
    rename on stderr, where users of ``seam complete`` (and its tests, which read stderr line by
    line) would see it as noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "are deprecated. Use `cache` instead" not in record.getMessage()


logging.getLogger("transformers.utils.generic").addFilter(_RenamedCacheNotice())


@dataclass
class LoadedModel:
    """A transformers causal LM ready for decoding, with what it was loaded from."""

    model: torch.nn.Module
    tokenizer: object
    device: torch.device
    dtype: torch.dtype
    spec: str
    cache_dir: Path | None = None  # Seam's own cache of this model, for derived tables
    gguf: Path | None = None  # the GGUF file the weights came from, if any


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
    measured slower than fp32 on this project's machines without AMX (see
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


def _random(spec: str, device: torch.device, dtype: torch.dtype):
    from fim.engines.random_model import build_random_santacoder, parse_random_spec

    seed = parse_random_spec(spec)
    model, tokenizer = build_random_santacoder(seed=seed)
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
                f"loading {what} with transformers needs the {module!r} package: "
                "pip install 'seam-complete[transformers]' (or use the llama.cpp engine, which "
                "reads GGUF itself)"
            )


def load_model(
    spec: str,
    device: str = "auto",
    dtype: str = "auto",
    trust_remote_code: bool = False,
    progress: Progress | None = None,
    kind: ModelKind | None = None,
) -> LoadedModel:
    """Load ``spec`` (see ``fim.engines.model_specs``) onto ``device`` in ``dtype``."""
    from fim.engines.model_specs import classify_spec
    from fim.options import canonical_model

    spec = canonical_model(spec)
    kind = kind or classify_spec(spec)
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    if kind is ModelKind.RANDOM:
        model, tokenizer = _random(spec, dev, dt)
        return LoadedModel(model, tokenizer, dev, dt, spec)

    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs: dict = {"dtype": dt}
    if trust_remote_code:
        kwargs["trust_remote_code"] = True
    tok_kwargs = {"trust_remote_code": True} if trust_remote_code else {}
    gguf = None
    if kind is ModelKind.BUNDLED:
        info = bundled.lookup_spec(spec)
        path = bundled.convert(info, progress=progress)
        gguf = bundled.gguf_file(info)
        if progress:
            progress(1.0, "loading the bundled model")
        tokenizer = _cached_tokenizer(path)
        model = AutoModelForCausalLM.from_pretrained(str(path), **kwargs)
    elif kind is ModelKind.GGUF:
        _need_gguf_support(spec)
        path = gguf = Path(spec).expanduser()
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
            where = "directory" if kind is ModelKind.DIRECTORY else "hub id (is it downloaded?)"
            raise ModelSpecError(f"cannot load model {spec!r} as a {where}: {err}") from err
    model.to(dev)
    model.eval()
    if progress:
        progress(1.0, "model ready")
    return LoadedModel(model, tokenizer, dev, dt, spec,
                       cache_dir=path if kind is ModelKind.BUNDLED else None, gguf=gguf)


class HFTokenizer:
    """A ``transformers`` tokenizer behind :class:`fim.tokenizer.TextTokenizer`."""

    def __init__(self, tokenizer) -> None:
        self.hf = tokenizer
        self.bos_token_id = tokenizer.bos_token_id
        self.eos_token_id = tokenizer.eos_token_id
        self._backend = getattr(tokenizer, "backend_tokenizer", None)

    def encode(self, text: str) -> list[int]:
        if not text:
            return []
        if self._backend is not None:
            # The Rust tokenizer without special-token matching: special names are text.
            return list(self.hf(text, add_special_tokens=False, split_special_tokens=True,
                                verbose=False)["input_ids"])
        return list(self.hf.encode(text, add_special_tokens=False, verbose=False))

    def decode(self, ids: Sequence[int]) -> str:
        return self.hf.decode(list(ids)) if len(ids) else ""

    def token_id(self, piece: str) -> int | None:
        # ``get_vocab()`` builds a dict of the whole vocabulary (~0.2 s for Qwen's 151k
        # entries), too slow for every request: ask the Rust backend when there is one.
        if self._backend is not None:
            return self._backend.token_to_id(piece)
        return self.hf.get_vocab().get(piece)


class TransformersStepModel(StepModel):
    """A transformers causal LM over one ``DynamicCache`` per slot.

    Prompt chunks are small on a CPU (64 tokens of a 1.5B model take about two seconds on two
    cores, so that cancellation acts within one chunk) and large on a GPU, where each pass
    has a fixed cost.
    """

    CPU_CHUNK = 64
    GPU_CHUNK = 1024

    def __init__(self, model: torch.nn.Module, device: torch.device, slots: int = 1) -> None:
        super().__init__(slots, self.CPU_CHUNK if device.type == "cpu" else self.GPU_CHUNK)
        self.model = model
        self.device = device
        self._caches: dict[int, object] = {}
        self._vocab_size = int(model.get_output_embeddings().weight.shape[0])

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    def _forward(self, slot: Slot, ids: list[int], interrupt: Interrupt | None) -> np.ndarray:
        with torch.inference_mode():
            out = self.model(
                input_ids=torch.tensor([ids], device=self.device),
                past_key_values=self._caches.get(slot.index),
                use_cache=True,
                logits_to_keep=1,
            )
        self._caches[slot.index] = out.past_key_values
        return out.logits[0, -1].float().cpu().numpy()

    def _truncate(self, slot: Slot, keep: int) -> bool:
        cache = self._caches.get(slot.index)
        if cache is None or not getattr(cache, "is_croppable", False):
            return False
        try:
            remove = cache.get_seq_length() - keep
            if remove > 0:
                cache.crop(-remove)  # transformers 5: a negative count removes tokens
            return cache.get_seq_length() == keep
        except (NotImplementedError, ValueError, AttributeError, TypeError):
            return False

    def _copy_prefix(self, src: Slot, dst: Slot, keep: int) -> bool:
        cache = self._caches.get(src.index)
        if cache is None or not getattr(cache, "is_croppable", False):
            return False
        clone = copy.deepcopy(cache)
        self._caches[dst.index] = clone
        dst.tokens = list(src.tokens)  # so that _truncate sees the right length
        return self._truncate(dst, keep)

    def _clear(self, slot: Slot) -> None:
        self._caches.pop(slot.index, None)


def _gguf_non_text_ids(path: Path | None) -> set[int]:
    """Ids a GGUF file marks as control, unused or unknown (never text)."""
    if path is None or importlib.util.find_spec("gguf") is None:
        return set()
    try:
        from gguf import GGUFReader

        field = GGUFReader(str(path)).fields.get("tokenizer.ggml.token_type")
        if field is None:
            return set()
        types = np.asarray([int(field.parts[i][0]) for i in field.data])
    except (OSError, ValueError, KeyError, IndexError) as err:
        log.warning("could not read token types from %s: %s", path, err)
        return set()
    # GGUF token types: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte.
    return {int(i) for i in np.flatnonzero(np.isin(types, (2, 3, 5)))}


def load_transformers_backend(spec: str, kind: ModelKind, device: str, dtype: str,
                              trust_remote_code: bool, progress: Progress | None,
                              slots: int = 1) -> Backend:
    """Load ``spec`` with transformers into a :class:`fim.engines.backend.Backend`."""
    loaded = load_model(spec, device, dtype, trust_remote_code, progress, kind=kind)
    return backend_from_loaded(loaded, slots)


def backend_from_loaded(loaded: LoadedModel, slots: int = 1) -> Backend:
    """A :class:`fim.engines.backend.Backend` over ``loaded``, with a step model of its own (fresh,
    empty caches: two backends over one model never see each other's cache)."""
    tok = loaded.tokenizer
    step = TransformersStepModel(loaded.model, loaded.device, slots)

    def build() -> Vocabulary:
        vocab = build_vocabulary(tok, step.vocab_size)
        return vocab.without(_gguf_non_text_ids(loaded.gguf))

    key_file = loaded.cache_dir / "tokenizer.json" if loaded.cache_dir else None
    vocab, order = cached_vocabulary(build, step.vocab_size, loaded.cache_dir, key_file)
    return Backend(
        engine=EngineKind.TRANSFORMERS, spec=loaded.spec, step_model=step,
        tokenizer=HFTokenizer(tok), vocab=vocab, heal_order=order,
        window=model_window(loaded.model.config, tok), device=loaded.device.type,
        description=f"transformers {_version('transformers')}, torch {torch.__version__}, "
                    f"{str(loaded.dtype).replace('torch.', '')} on {loaded.device}",
        cache_dir=loaded.cache_dir, native=loaded)


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "?"


def model_window(config, tokenizer=None) -> int:
    """The positions a transformers model attends over (capped by its tokenizer's limit)."""
    window = None
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            window = value
            break
    limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(limit, int) and 0 < limit < 10**8:
        window = min(window, limit) if window else limit
    return window or 2048
