"""The vLLM interfaces Seam's logits processor is built on, each imported on its own.

vLLM 0.32 has two model runners with two logits-processor interfaces (``fim.vllm.processor``
implements both).  They live in different modules and change on different schedules, so each is
imported here apart: a vLLM that drops (or moves) one runner's interface still loads the
processor for the other, and the processor says which runners it serves.  A name whose module
is missing becomes a stand-in class that no vLLM object is an instance of, so code that tests
``isinstance`` against it simply never takes that runner's path, and the class statement
``SeamLogitsProcessor(V1LogitsProcessor, V2LogitsProcessor)`` still works with the one base
that exists.  With neither, the import fails with a clear error.

The vLLM version is checked here too (:func:`check_version`, run when the processor module
loads, so in every vLLM process that loads the plugin): Seam is written against
``SUPPORTED`` and refuses another version with a message naming both, because the interfaces
above (and the runner's token table, ``all_token_ids.gpu``) are internal to vLLM and change
between minor versions.  ``SEAM_VLLM_ANY_VERSION=1`` loads it anyway (logged), to try a newer
vLLM at one's own risk.
"""

from __future__ import annotations

import enum
import importlib
import logging
import os
import re

log = logging.getLogger("vllm.seam")

#: The vLLM versions Seam's processor is written and tested against: ``(low, high)``, low
#: included, high excluded (``>=0.32,<0.33``; pyproject.toml's ``team`` and ``team-cuda``
#: extras pin the same range).
SUPPORTED = ((0, 32), (0, 33))
SUPPORTED_TEXT = ">=0.32,<0.33"
#: Set to 1 to load the processor under a vLLM outside ``SUPPORTED`` (a warning is logged).
ANY_VERSION_ENV = "SEAM_VLLM_ANY_VERSION"


class UnsupportedVllm(RuntimeError):
    """The installed vLLM is not one Seam's processor supports (the message says which)."""


def version_tuple(text: str) -> tuple[int, ...]:
    """``"0.32.0+cpu"`` -> ``(0, 32, 0)``: the leading numeric release parts."""
    parts = []
    for piece in re.split(r"[.+-]", text):
        if not piece.isdigit():
            break
        parts.append(int(piece))
    return tuple(parts)


def check_version(version: str) -> None:
    """Refuse a vLLM ``version`` outside ``SUPPORTED`` (:class:`UnsupportedVllm`), unless
    ``SEAM_VLLM_ANY_VERSION=1`` (then only a warning)."""
    release = version_tuple(version)
    low, high = SUPPORTED
    if release and low <= release[:2] < high:
        return
    message = (f"Seam's logits processor supports vLLM {SUPPORTED_TEXT}, not {version}: "
               f"install a supported vLLM (pip install 'seam-complete[team]' on a CPU, "
               f"'seam-complete[team-cuda]' on CUDA), or set {ANY_VERSION_ENV}=1 to try "
               "this one at your own risk")
    if os.environ.get(ANY_VERSION_ENV) == "1":
        log.warning("%s (loading anyway: %s=1)", message, ANY_VERSION_ENV)
        return
    raise UnsupportedVllm(message)


def _missing(name: str, module: str) -> type:
    """A stand-in for ``module.name`` where that module is missing: a class no vLLM object is
    an instance of."""
    return type(name, (), {"__doc__": f"{module}.{name} is not in this vLLM (stand-in).",
                           "__module__": __name__, "missing": True})


class _MissingDirection(enum.Enum):
    """Stand-in for V1's ``MoveDirectionality`` (never met: no V1 batch update comes)."""

    SWAP = "swap"
    UNIDIRECTIONAL = "unidirectional"


V1_MODULE = "vllm.v1.sample.logits_processor"
V2_MODULE = "vllm.v1.worker.gpu.sample.logits_processor"


def _import(module: str):
    """The module, or ``None`` when this vLLM has none by that name."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        log.info("Seam: %s is not importable here (%s): that model runner is not served",
                 module, err)
        return None


_v1 = _import(V1_MODULE)
_v2 = _import(V2_MODULE)

#: Whether this vLLM has the V1 runner's interface (``BatchUpdate`` and its processor base).
HAS_V1 = _v1 is not None and hasattr(_v1, "LogitsProcessor")
#: Whether this vLLM has Model Runner V2's interface (``LogitsContext`` and its base).
HAS_V2 = _v2 is not None and hasattr(_v2, "LogitsProcessor")

if HAS_V1:
    V1LogitsProcessor = _v1.LogitsProcessor
    BatchUpdate = _v1.BatchUpdate
    MoveDirectionality = _v1.MoveDirectionality
else:
    V1LogitsProcessor = _missing("V1LogitsProcessor", V1_MODULE)
    BatchUpdate = _missing("BatchUpdate", V1_MODULE)
    MoveDirectionality = _MissingDirection

if HAS_V2:
    V2LogitsProcessor = _v2.LogitsProcessor
    LogitsContext = _v2.LogitsContext
    LogitsProcRequestState = _v2.LogitsProcRequestState
else:
    V2LogitsProcessor = _missing("V2LogitsProcessor", V2_MODULE)
    LogitsContext = _missing("LogitsContext", V2_MODULE)
    LogitsProcRequestState = _missing("LogitsProcRequestState", V2_MODULE)

if not (HAS_V1 or HAS_V2):
    raise UnsupportedVllm(f"this vLLM has neither model runner's logits-processor interface "
                          f"({V1_MODULE}, {V2_MODULE}); Seam supports vLLM {SUPPORTED_TEXT}")


def log_load() -> None:
    """The one line a server's log gets when the plugin loads: vLLM's version, the runners
    served, and that speculative decoding is off (``SPECULATIVE_NOTE``)."""
    import vllm

    from fim.vllm.speculative import SPECULATIVE_NOTE

    log.info("Seam's logits processor for vLLM %s (runners: %s); %s",
             getattr(vllm, "__version__", "?"), ", ".join(runners()), SPECULATIVE_NOTE)


def runners() -> list[str]:
    """The model runners this vLLM lets the processor serve (what the load line names)."""
    return [name for name, has in (("V1", HAS_V1), ("V2", HAS_V2)) if has]


__all__ = ["ANY_VERSION_ENV", "BatchUpdate", "HAS_V1", "HAS_V2", "LogitsContext",
           "LogitsProcRequestState", "MoveDirectionality", "SUPPORTED", "SUPPORTED_TEXT",
           "UnsupportedVllm", "V1LogitsProcessor", "V2LogitsProcessor",
           "check_version", "log_load", "runners", "version_tuple"]
