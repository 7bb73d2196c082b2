"""Names the command line and the language server both accept: dtypes, devices, scopes, modes,
and the reasons a decode stops.

``seam complete --dtype`` documented ``fp32 | bf16 | fp16`` while ``seam serve --dtype`` and the
editors' settings said ``float32 | bfloat16 | float16``; both spellings were accepted in places
and rejected in others. Every entry point now accepts both and documents the long names.
This module imports nothing heavy (the engine's small ``quotient`` package, no model library),
so ``seam serve`` and ``--help`` can use it before torch.

``Scope`` is the engine's (``quotient.constraint``), re-exported: the language packages below
``fim`` take it too, and imports never point upward.
"""

from __future__ import annotations

import enum
import re

from quotient.constraint import Scope  # re-exported: fim's callers take it from here


class Dtype(enum.StrEnum):
    """The documented dtype names; ``AUTO`` lets the engine choose for the device."""

    AUTO = "auto"
    FLOAT32 = "float32"
    BFLOAT16 = "bfloat16"
    FLOAT16 = "float16"


#: Documented dtype names, each with the short aliases also accepted.
DTYPES: dict[Dtype, tuple[str, ...]] = {
    Dtype.FLOAT32: ("fp32",),
    Dtype.BFLOAT16: ("bf16",),
    Dtype.FLOAT16: ("fp16", "half"),
}
DTYPE_CHOICES = tuple(d.value for d in Dtype)
_DTYPE_ALIASES = {alias: name for name, aliases in DTYPES.items() for alias in (name, *aliases)}
_DTYPE_ALIASES[Dtype.AUTO] = Dtype.AUTO

#: Devices: ``auto`` (CUDA when present), ``cpu``, ``cuda`` or ``cuda:N``.
DEVICE_PATTERN = re.compile(r"auto|cpu|cuda(:[0-9]{1,3})?")
DEVICE_HELP = "auto, cpu, cuda or cuda:N"


class Mode(enum.StrEnum):
    """How decoding treats the grammar: not at all, a check after it, or at every token."""

    UNCONSTRAINED = "unconstrained"
    CHECKED = "checked"
    CONSTRAINED = "constrained"


class StopReason(enum.StrEnum):
    """Why a decode ended (``CompletionResult.stop``)."""

    #: The model chose a stop token (in constrained mode, only where the file is complete).
    EOS = "eos"
    #: The model ended the line where the file is complete (``line_stop``).
    LINE_END = "line_end"
    #: The model's next tokens would re-write the right context, and the file is complete
    #: where they begin: the middle ends there (``right_context`` decoding option).
    RIGHT_CONTEXT = "right_context"
    #: Out of tokens or candidates: the best complete stopping point was taken.
    BEST_COMPLETE = "best_complete"
    #: The model chose to end where the file could not, the constraint made it go on at
    #: length, and the middle went back to the best complete point before that end.
    REFUSED_END = "refused_end"
    #: Out of tokens with no complete stopping point (or unconstrained decoding's budget).
    BUDGET = "budget"
    #: No candidate among the top ``top_k`` kept the text completable, and no stopping point.
    NO_CANDIDATE = "no_candidate"
    #: The caller cancelled.
    CANCELLED = "cancelled"
    #: The time budget ran out.
    TIME = "time"


#: The values, for argument parsers and messages.
SCOPES = tuple(s.value for s in Scope)
MODES = tuple(m.value for m in Mode)

#: The bundled offline model, and the short name for it.
DEFAULT_MODEL = "bundled:qwen2.5-coder-1.5b"
BUNDLED_ALIAS = "bundled"


def canonical_dtype(name: str) -> Dtype | None:
    """``"fp32"`` -> ``"float32"``; ``None`` for a name that is no dtype."""
    if not isinstance(name, str):
        return None
    return _DTYPE_ALIASES.get(name.strip().lower())


def canonical_device(name: str) -> str | None:
    """The device name if it is one Seam can use, else ``None``."""
    if not isinstance(name, str):
        return None
    name = name.strip().lower()
    return name if DEVICE_PATTERN.fullmatch(name) else None


def canonical_model(spec: str) -> str:
    """``"bundled"`` names the bundled model; any other spec is returned stripped.

    The one spelling of model specs, for the command line, the server's settings and the
    loaders (``fim.engines.model_specs``); a value that is not a string is returned as it is,
    for the loaders to refuse with a message."""
    if not isinstance(spec, str):
        return spec
    spec = spec.strip()
    return DEFAULT_MODEL if spec == BUNDLED_ALIAS else spec
