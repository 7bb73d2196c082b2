"""The server's settings (section ``seam``) and the per-request decoding policy.

Settings arrive as JSON from ``initializationOptions`` and ``workspace/didChangeConfiguration``.
Each key is validated on its own: a bad value is reported (the caller shows the problems to the
user) and the previous value of that key is kept, so one typo never disables completion.

``maxTokens``, ``timeBudgetMs``, ``contextTokens`` and ``scope`` accept ``"auto"`` (the default;
``0`` and ``null`` mean the same), which picks an IDE-friendly policy from the cursor's line:
mid-line a short single-statement completion, on an empty line a longer one that may fill a
whole block; "auto" context is small on a CPU and the model's whole window on a GPU.
``model: "bundled"`` names the default bundled model. Keys the server does not know (a client's
own settings such as VS Code's ``seam.server.*``) are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

SECTION = "seam"

#: The offline default: the bundled Qwen2.5-Coder GGUF (see DESIGN.md, "Models").
DEFAULT_MODEL = "bundled:qwen2.5-coder-1.5b"

#: Policies chosen by "auto": (scope, max tokens, time budget in ms). The budgets suit the
#: bundled 1.5B model on a laptop CPU (0.4-0.6 s per token here: a one-line middle of ~14
#: tokens needs 6-9 s; with 2 s it never finished one). A long budget costs no responsiveness:
#: the next keystroke cancels the decode within one model step.
MID_LINE_POLICY = ("statement", 32, 10000)
EMPTY_LINE_POLICY = ("block", 96, 20000)

#: "auto" context (prompt plus middle, in tokens) for a model on a CPU; on a GPU, "auto" is the
#: model's whole window.  On this project's 2-core machine the bundled model prefills ~30
#: tokens/s, and in the fill-in-the-middle prompt the right context comes after the cursor,
#: so each keystroke re-runs it: a quarter of 1,024 tokens is what a 10 s budget can afford.
CPU_CONTEXT_TOKENS = 1024


@dataclass(frozen=True)
class Settings:
    """Validated settings. ``None`` for maxTokens / timeBudgetMs / scope means "auto"."""

    model: str = DEFAULT_MODEL
    device: str = "auto"
    dtype: str = "auto"
    max_tokens: int | None = None
    time_budget_ms: int | None = None
    context_tokens: int | None = None
    scope: str | None = None
    top_k: int = 50
    constrained: bool = True
    languages: tuple[str, ...] = ("python",)
    trust_remote_code: bool = False
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def model_key(self) -> tuple[str, str, str, bool]:
        """What decides whether the model must be reloaded."""
        return (self.model, self.device, self.dtype, self.trust_remote_code)


def _auto_or_positive_int(name: str, value: Any) -> int | None:
    if value is None or value == "auto" or (value == 0 and not isinstance(value, bool)):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise ValueError(f"{name} must be a positive integer or \"auto\", not {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be positive, not {value!r}")
    return int(value)


def _nonempty_str(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty string, not {value!r}")
    return value.strip()


def _bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, not {value!r}")
    return value


def _languages(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{name} must be a list of language ids, not {value!r}")
    return tuple(v.strip() for v in value if v.strip())


def _scope(name: str, value: Any) -> str | None:
    if value is None or value == "auto":
        return None
    return _nonempty_str(name, value)


def _model(name: str, value: Any) -> str:
    spec = _nonempty_str(name, value)
    return DEFAULT_MODEL if spec == "bundled" else spec


def _top_k(name: str, value: Any) -> int:
    parsed = _auto_or_positive_int(name, value)
    if parsed is None:
        raise ValueError(f"{name} must be a positive integer, not {value!r}")
    return parsed


# JSON key -> (dataclass field, validator)
_KEYS = {
    "model": ("model", _model),
    "device": ("device", _nonempty_str),
    "dtype": ("dtype", _nonempty_str),
    "maxTokens": ("max_tokens", _auto_or_positive_int),
    "timeBudgetMs": ("time_budget_ms", _auto_or_positive_int),
    "contextTokens": ("context_tokens", _auto_or_positive_int),
    "scope": ("scope", _scope),
    "topK": ("top_k", _top_k),
    "constrained": ("constrained", _bool),
    "languages": ("languages", _languages),
    "trustRemoteCode": ("trust_remote_code", _bool),
}


def section_of(payload: Any) -> dict[str, Any] | None:
    """Extract the ``seam`` section from initializationOptions or a configuration payload.

    Accepts ``{"seam": {...}}`` (what VS Code and Neovim send) or the bare section. Returns
    ``None`` when the payload holds no Seam settings at all.
    """
    if not isinstance(payload, dict):
        return None
    inner = payload.get(SECTION)
    if isinstance(inner, dict):
        return inner
    if any(k in _KEYS for k in payload):
        return payload
    return None


def merge(base: Settings, payload: dict[str, Any]) -> tuple[Settings, list[str]]:
    """Apply a settings payload; return the new settings and the invalid values found."""
    changes: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in payload.items():
        spec = _KEYS.get(key)
        if spec is None:
            continue
        attr, validate = spec
        try:
            changes[attr] = validate(key, value)
        except ValueError as exc:
            problems.append(f"seam.{exc} (keeping {getattr(base, attr)!r})")
    return replace(base, **changes), problems


@dataclass(frozen=True)
class Policy:
    """What one completion request asks of the decoder."""

    scope: str
    max_tokens: int
    time_budget_ms: int
    mode: str
    top_k: int
    context_tokens: int | None = None  # None: the model's whole window


def policy_for(settings: Settings, line_before: str, line_after: str,
               device_type: str = "cpu") -> Policy:
    """Resolve "auto" settings for a cursor whose line reads ``line_before|line_after``.

    ``device_type`` is where the model runs (``"cpu"``, ``"cuda"``): it decides the "auto"
    context size.
    """
    empty_line = not line_before.strip() and not line_after.strip()
    scope, max_tokens, budget = EMPTY_LINE_POLICY if empty_line else MID_LINE_POLICY
    auto_context = CPU_CONTEXT_TOKENS if device_type == "cpu" else None
    return Policy(
        scope=settings.scope or scope,
        max_tokens=settings.max_tokens or max_tokens,
        time_budget_ms=settings.time_budget_ms or budget,
        mode="constrained" if settings.constrained else "unconstrained",
        top_k=settings.top_k,
        context_tokens=settings.context_tokens or auto_context,
    )
