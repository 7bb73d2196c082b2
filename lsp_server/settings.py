"""The server's settings (section ``seam``) and the per-request decoding policy.

Settings arrive as JSON from ``initializationOptions``, ``workspace/didChangeConfiguration`` and
``workspace/configuration``. Each key is validated where it arrives, against the values that
actually work: a value that would make every completion fail (``scope: "bogus"``,
``contextTokens: 1``) is refused like a value of the wrong type. A refused value becomes a
:class:`SettingProblem` (the server shows it once, naming the setting and what it accepts) and
the previous value of that key is kept, so one typo never disables completion.

``maxTokens`` must leave room for a prompt in the context (``contextTokens``, or the model's
window): :func:`check_budget` checks it on arrival and again once the model has loaded.

Keys marked "auto" (``maxTokens``, ``timeBudgetMs``, ``contextTokens``, ``newPlaceMs``,
``scope``, ``contextBudgetTokens``, ``threads``; ``0`` and ``null`` mean the same) leave the
value to the planner (``request_plan``: an IDE-friendly policy from the cursor's line, small
contexts on a CPU) or the engine (``threads``: from the CPUs other processes leave free,
``fim.engines.cpu_load``, from the next request on). docs/user-guide.md lists every key.
``model: "bundled"`` names the default bundled model. Keys the server does not know (a client's
own settings such as VS Code's ``seam.server.*``) are ignored.

Each key is written once, as a field of :class:`Settings` that names its JSON key and its
validator; validation (:func:`merge`), the JSON the server reports (:func:`settings_json`) and
the editors' test (``tests/lsp_server/test_settings_and_cache.py`` checks VS Code's
``package.json`` and the Neovim plugin against :data:`KEYS`) all read that one table.
A refused value is quoted as the client sent it, in JSON (``null``, ``true``, ``["python"]``).
"""

from __future__ import annotations

import enum
import json
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

from fim.editor_policy import MIN_PROMPT_TOKENS, known_context
from fim.engines.model_specs import ENGINE_NAMES, EngineKind
from fim.options import (
    DEFAULT_MODEL,
    DEVICE_HELP,
    DTYPE_CHOICES,
    SCOPES,
    Dtype,
    Scope,
    canonical_device,
    canonical_dtype,
    canonical_model,
)
from lsp_server.fallback import FallbackMode, LocalSpec
from lsp_server.model_host import SLOW_AFTER_S

SECTION = "seam"

# This module parses and validates the settings only: resolving them over the "auto" policies
# at a cursor (mid-line vs empty line, the CPU window, the right text's share, the room kept
# for the prompt: `fim.editor_policy.auto_policy`, shared with `seam eval --policy ide`) is
# the planner's (`request_plan.policy_for`, `request_plan.project_sources`).

#: "auto" project context (``contextBudgetTokens``) in tokens, out of the left text's
#: share of the window: chosen by benchmarks/usefulness.py (docs/usefulness.md).  On a GPU,
#: whose window is the model's whole window, "auto" is ``GPU_CONTEXT_BUDGET_TOKENS``
#: (not measured here: no GPU on the project's machine).
CONTEXT_BUDGET_TOKENS = 512
GPU_CONTEXT_BUDGET_TOKENS = 2048
MAX_CONTEXT_BUDGET_TOKENS = 1 << 16
#: The smallest project context worth having (a few definitions).
MIN_CONTEXT_BUDGET_TOKENS = 64

#: The smallest context worth prompting with.
MIN_CONTEXT_TOKENS = 128
MAX_TOP_K = 1000
MAX_TIME_BUDGET_MS = 600_000
#: The least ``newPlaceMs`` (the first window has a floor whatever the time).
MIN_NEW_PLACE_MS = 100
#: Most suggestions per place (``suggestions``): each beyond the first costs a decode.
MAX_SUGGESTIONS = 8
MAX_MODEL_SPEC_CHARS = 4096
#: The most llama.cpp threads a setting may pin (more than the CPUs only slows it down).
MAX_THREADS = 256
#: ``vllmSlowAfterMs``: the default (the model host's) and the least (below a second, a busy
#: but healthy server's one-token answer plus a network round trip would flap the status).
SLOW_AFTER_MS = round(SLOW_AFTER_S * 1000)
MIN_SLOW_AFTER_MS = 1_000


class Rejected(ValueError):
    """A value outside what a key accepts; the argument says what it accepts."""


class SettingsShapeError(ValueError):
    """The ``seam`` section itself is not an object."""


# ----- validators: value -> parsed, or raise Rejected(what is accepted) -----------------------

def _is_int(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _auto(value: Any) -> bool:
    return value is None or value == "auto" or (_is_int(value) and value == 0)


def _budget(limit: int) -> Callable[[Any], int | None]:
    def check(value: Any) -> int | None:
        if _auto(value):
            return None
        if not _is_int(value) or not 0 < value <= limit:
            raise Rejected(f'a whole number from 1 to {limit}, or "auto"')
        return int(value)
    return check


def _context_tokens(value: Any) -> int | None:
    if _auto(value):
        return None
    if not _is_int(value) or not MIN_CONTEXT_TOKENS <= value <= 1 << 20:
        raise Rejected(f'a whole number of tokens, at least {MIN_CONTEXT_TOKENS}, or "auto"')
    return int(value)


def _context_budget(value: Any) -> int | None:
    if _auto(value):
        return None
    if not _is_int(value) or not MIN_CONTEXT_BUDGET_TOKENS <= value <= MAX_CONTEXT_BUDGET_TOKENS:
        raise Rejected(f"a whole number of tokens from {MIN_CONTEXT_BUDGET_TOKENS} to "
                       f'{MAX_CONTEXT_BUDGET_TOKENS}, or "auto" (turn sources off with '
                       "contextDefinitions, contextOpenFiles, contextRecentEdits)")
    return int(value)


def _top_k(value: Any) -> int:
    if not _is_int(value) or not 1 <= value <= MAX_TOP_K:
        raise Rejected(f"a whole number from 1 to {MAX_TOP_K}")
    return int(value)


def _suggestions(value: Any) -> int:
    if not _is_int(value) or not 1 <= value <= MAX_SUGGESTIONS:
        raise Rejected(f"a whole number from 1 to {MAX_SUGGESTIONS} (1: one suggestion)")
    return int(value)


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise Rejected("true or false")
    return value


def _languages(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if (not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value)
            or not any(v.strip() for v in value)):
        raise Rejected('a list of language ids, e.g. ["python"], or ["*"] for every file')
    return tuple(dict.fromkeys(v.strip() for v in value if v.strip()))


def _one_of(names: tuple[str, ...]) -> str:
    return "one of " + ", ".join(f'"{name}"' for name in names)


def _scope(value: Any) -> Scope | None:
    if value is None or value == "auto":
        return None
    if value not in SCOPES:
        raise Rejected(_one_of(("auto", *SCOPES)))
    return Scope(value)


def _model(value: Any) -> str:
    if (not isinstance(value, str) or not value.strip()
            or len(value) > MAX_MODEL_SPEC_CHARS or "\x00" in value):
        raise Rejected('a Hugging Face id, a local model directory, a .gguf file or "bundled"')
    return canonical_model(value)


def _device(value: Any) -> str:
    name = canonical_device(value)
    if name is None:
        raise Rejected(DEVICE_HELP)
    return name


def _dtype(value: Any) -> Dtype:
    name = canonical_dtype(value)
    if name is None:
        raise Rejected(_one_of(DTYPE_CHOICES))
    return name


def _vllm_server(value: Any) -> str:
    """"" (none) or an http(s) URL with a host: the vLLM server of ``engine: "vllm"``."""
    text = value.strip() if isinstance(value, str) else None
    if text is None or len(text) > MAX_MODEL_SPEC_CHARS or any(c.isspace() for c in text):
        raise Rejected('an http(s) URL such as "http://gpu-box:8000", or ""')
    parts = urllib.parse.urlsplit(text)
    if text and (parts.scheme not in ("http", "https") or not parts.hostname):
        raise Rejected('an http(s) URL such as "http://gpu-box:8000", or ""')
    return text


def _server_model(value: Any) -> str:
    """"" (the first model the server lists) or the served model's name."""
    if (not isinstance(value, str) or len(value) > MAX_MODEL_SPEC_CHARS
            or any(not c.isprintable() for c in value)):
        raise Rejected('the served model\'s name as one line of text, or ""')
    return value.strip()


def _fim_template(value: Any) -> str:
    """"" (from the served model's name, or its tokens) or a FIM template's name."""
    from fim.templates import TEMPLATES

    if value == "" or (isinstance(value, str) and value in TEMPLATES):
        return value
    raise Rejected(_one_of(("", *TEMPLATES)))


def _api_key(value: Any) -> str:
    if (not isinstance(value, str) or len(value) > MAX_MODEL_SPEC_CHARS
            or any(not c.isprintable() for c in value)):
        raise Rejected('the API key as one line of text, or ""')
    return value.strip()


def _millis(low: int, auto: bool = False) -> Callable[[Any], int | None]:
    """Whole milliseconds from ``low`` to ``MAX_TIME_BUDGET_MS`` (or "auto": ``None``)."""
    def check(value: Any) -> int | None:
        if auto and _auto(value):
            return None
        if not _is_int(value) or not low <= value <= MAX_TIME_BUDGET_MS:
            raise Rejected(f"a whole number of milliseconds from {low} to "
                           f"{MAX_TIME_BUDGET_MS}" + (', or "auto"' if auto else ""))
        return int(value)
    return check


def _fallback(value: Any) -> FallbackMode:
    if value not in tuple(FallbackMode):
        raise Rejected(_one_of(tuple(FallbackMode)))
    return FallbackMode(value)


def _engine(value: Any) -> EngineKind:
    try:
        return EngineKind.parse(value if isinstance(value, str) else None)
    except ValueError:
        raise Rejected(_one_of(ENGINE_NAMES)) from None


def _threads(value: Any) -> int | None:
    if _auto(value):
        return None
    if not _is_int(value) or not 1 <= value <= MAX_THREADS:
        raise Rejected(f'a whole number of threads from 1 to {MAX_THREADS}, or "auto" (chosen '
                       "from the CPUs other processes leave free)")
    return int(value)


@dataclass(frozen=True)
class SettingKey:
    """One setting as the client sends it: its JSON key, its validator, and whether ``None``
    stands for "auto" (sent and reported as ``"auto"``)."""

    name: str
    validate: Callable[[Any], Any]
    auto: bool = False
    #: the values of a key that takes one of a few names (what the editors offer)
    choices: tuple[str, ...] = ()
    #: taken only from the server's command line (``seam serve --trust-remote-code``), so
    #: the editors send no value (the server refuses one)
    pinned: bool = False
    #: never reported back (``seam/status``, the log): shown as ``"<set>"`` when set
    secret: bool = False
    #: chooses what runs or where the code goes (or, ``vllmSlowAfterMs``, how that vLLM
    #: server is judged): the editors take it from the user's own settings only, never from a
    #: workspace's
    user_only: bool = False


def _key(name: str, validate: Callable[[Any], Any], default: Any, *, auto: bool = False,
         choices: tuple[str, ...] = (), pinned: bool = False, secret: bool = False,
         user_only: bool = False) -> Any:
    """A :class:`Settings` field that is the setting ``name`` on the wire."""
    spec = SettingKey(name, validate, auto, choices, pinned, secret, user_only)
    return field(default=default, metadata={SECTION: spec}, repr=not secret)


@dataclass(frozen=True)
class Settings:
    """Validated settings, one field per JSON key (the table the server and the editors'
    test read). ``None`` for the "auto" keys means "auto"."""

    model: str = _key("model", _model, DEFAULT_MODEL, user_only=True)
    device: str = _key("device", _device, "auto")
    dtype: Dtype = _key("dtype", _dtype, Dtype.AUTO, choices=DTYPE_CHOICES)
    max_tokens: int | None = _key("maxTokens", _budget(1 << 16), None, auto=True)
    time_budget_ms: int | None = _key("timeBudgetMs", _budget(MAX_TIME_BUDGET_MS), None,
                                      auto=True)
    context_tokens: int | None = _key("contextTokens", _context_tokens, None, auto=True)
    #: the first request's prompt time at a new place ("auto": ``request_plan`` decides)
    new_place_ms: int | None = _key("newPlaceMs", _millis(MIN_NEW_PLACE_MS, True), None, auto=True)
    scope: Scope | None = _key("scope", _scope, None, auto=True, choices=("auto", *SCOPES))
    top_k: int = _key("topK", _top_k, 50)
    constrained: bool = _key("constrained", _bool, True)
    #: the editors' language ids served (``"*"``: every file; see ``documents.served``)
    languages: tuple[str, ...] = _key("languages", _languages, ("*",))
    trust_remote_code: bool = _key("trustRemoteCode", _bool, False, pinned=True)
    engine: EngineKind = _key("engine", _engine, EngineKind.AUTO, choices=ENGINE_NAMES)
    #: ``engine: "vllm"``: the team's vLLM server and its key (where the code is sent)
    vllm_server: str = _key("vllmServer", _vllm_server, "", user_only=True)
    vllm_api_key: str = _key("vllmApiKey", _api_key, "", secret=True, user_only=True)
    #: ``engine: "llama-server"`` or ``"openai"``: the model server the user runs, its key
    #: and the served model's name (where the code is sent)
    #: (not ``server``: VS Code's ``seam.server.*`` settings say how to start Seam's own)
    model_server: str = _key("modelServer", _vllm_server, "", user_only=True)
    model_server_api_key: str = _key("modelServerApiKey", _api_key, "", secret=True,
                                     user_only=True)
    served_model: str = _key("servedModel", _server_model, "", user_only=True)
    #: the served model's FIM template, where its name does not tell it ("": from the name)
    fim_template: str = _key("fimTemplate", _fim_template, "", user_only=True)
    #: how long the vLLM server may take to answer a one-token question before it is
    #: reported slow (``lsp_server.model_host``); a property of that server, set with it
    vllm_slow_after_ms: int = _key("vllmSlowAfterMs", _millis(MIN_SLOW_AFTER_MS), SLOW_AFTER_MS,
                                   user_only=True)
    #: what answers while that server is unreachable: nothing, or the local model
    #: (``model``, loaded in this process the first time it is needed: what runs here)
    fallback: FallbackMode = _key("fallback", _fallback, FallbackMode.NONE,
                                  choices=tuple(FallbackMode), user_only=True)
    #: project context: its budget in tokens (``None``: "auto") and its sources
    context_budget: int | None = _key("contextBudgetTokens", _context_budget, None, auto=True)
    context_definitions: bool = _key("contextDefinitions", _bool, True)
    context_open_files: bool = _key("contextOpenFiles", _bool, True)
    context_recent_edits: bool = _key("contextRecentEdits", _bool, True)
    context_similar_code: bool = _key("contextSimilarCode", _bool, True)
    #: suggestions per place, the likeliest first (``fim.alternatives``); the first answer is
    #: the greedy one at once, the others are decoded when the worker is idle (1: off)
    suggestions: int = _key("suggestions", _suggestions, 3)
    #: llama.cpp's thread count (``None``: "auto", chosen from the CPU load per request)
    threads: int | None = _key("threads", _threads, None, auto=True)
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def model_key(self) -> tuple[str, str, Dtype, bool, EngineKind, int | None, str, str,
                                 str, str]:
        """What decides whether the model must be reloaded (the context, because llama.cpp
        sizes its cache for it when it loads; the server, key and served model, to connect
        again)."""
        return (self.model, self.device, self.dtype, self.trust_remote_code, self.engine,
                self.context_tokens, self.remote_server, self.remote_api_key,
                self.served_model, self.fim_template)

    @property
    def local_spec(self) -> LocalSpec:
        """The local model ``fallback: "local"`` loads: ``model`` on this machine, as the
        local engines load it."""
        return LocalSpec(self.model, self.device, self.dtype, self.trust_remote_code,
                         self.context_tokens)

    @property
    def remote_server(self) -> str:
        """The URL of the server the engine talks to: ``vllmServer`` for ``vllm``,
        ``modelServer`` for ``llama-server`` and ``openai``; "" for a local engine."""
        kind = EngineKind.parse(self.engine)
        if kind is EngineKind.VLLM:
            return self.vllm_server
        return self.model_server if kind.remote else ""

    @property
    def remote_api_key(self) -> str:
        """That server's API key ("" for none)."""
        kind = EngineKind.parse(self.engine)
        if kind is EngineKind.VLLM:
            return self.vllm_api_key
        return self.model_server_api_key if kind.remote else ""


#: JSON key -> (``Settings`` field, the key), in the order of the fields.
_KEYS: dict[str, tuple[str, SettingKey]] = {
    f.metadata[SECTION].name: (f.name, f.metadata[SECTION])
    for f in fields(Settings) if SECTION in f.metadata}
KEYS = tuple(_KEYS)
#: The keys, for the editors' test and the documentation.
SETTING_KEYS: tuple[SettingKey, ...] = tuple(spec for _, spec in _KEYS.values())


def _json_value(spec: SettingKey, value: Any) -> Any:
    """A validated value as the server reports it (and as a client may send it back)."""
    if value is None and spec.auto:
        return "auto"
    if spec.secret:
        return "<set>" if value else ""
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, enum.Enum):
        return value.value
    return value


def settings_json(settings: Settings) -> dict[str, Any]:
    """The settings as JSON, one entry per key (``seam/status`` reports this)."""
    return {name: _json_value(spec, getattr(settings, attr))
            for name, (attr, spec) in _KEYS.items()}


@dataclass(frozen=True)
class SettingProblem:
    """A refused setting: the key, the value the client sent, what is accepted, and the value
    that stays in force (in the JSON form of :func:`settings_json`)."""

    key: str
    value: Any
    accepted: str
    kept: Any

    def message(self) -> str:
        return (f"seam.{self.key} = {_shown(self.value)} is not valid ({self.accepted}); "
                f"keeping {_shown(self.kept)}")


def _shown(value: Any) -> str:
    """A value in JSON, as the client wrote it (``null``, ``true``, ``["python"]``); a value
    that is no JSON (from a Python caller) in its Python form."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def section_of(payload: Any) -> dict[str, Any] | None:
    """Extract the ``seam`` section from initializationOptions or a configuration payload.

    Accepts ``{"seam": {...}}`` (what VS Code and Neovim send) or the bare section. Returns
    ``None`` when the payload holds no Seam settings at all; raises
    :class:`SettingsShapeError` when it holds a ``seam`` entry that is not an object.
    """
    if not isinstance(payload, dict):
        return None
    if SECTION in payload:
        inner = payload[SECTION]
        if isinstance(inner, dict):
            return inner
        if inner is None:
            return None
        raise SettingsShapeError(
            f'the "{SECTION}" settings must be an object of keys such as "model", '
            f"not {type(inner).__name__}")
    if any(k in _KEYS for k in payload):
        return payload
    return None


def merge(base: Settings, payload: dict[str, Any]) -> tuple[Settings, list[SettingProblem]]:
    """Apply a settings payload; return the new settings and the refused values."""
    changes: dict[str, Any] = {}
    problems: list[SettingProblem] = []
    for key, value in payload.items():
        spec = _KEYS.get(key)
        if spec is None:
            continue
        attr, setting = spec
        try:
            changes[attr] = setting.validate(value)
        except Rejected as exc:
            kept = _json_value(setting, getattr(base, attr))
            problems.append(SettingProblem(key, value, str(exc), kept))
    return replace(base, **changes), problems


def context_for(settings: Settings, device_type: str | None,
                model_window: int | None) -> int | None:
    """The context (prompt plus middle, in tokens) requests will get, where it is known.

    ``device_type`` and ``model_window`` are ``None`` while no model is loaded.
    """
    return known_context(settings.context_tokens, device_type, model_window)


def check_budget(settings: Settings, previous: Settings, device_type: str | None,
                 model_window: int | None) -> tuple[Settings, list[SettingProblem]]:
    """Refuse a ``maxTokens`` that leaves no room for the prompt in the known context.

    The previous ``maxTokens`` is kept if it fits, else "auto".
    """
    context = context_for(settings, device_type, model_window)
    wanted = settings.max_tokens
    if context is None or wanted is None or wanted <= context - MIN_PROMPT_TOKENS:
        return settings, []
    most = max(1, context - MIN_PROMPT_TOKENS)
    kept = previous.max_tokens if (previous.max_tokens or 0) <= most else None
    problem = SettingProblem(
        "maxTokens", wanted,
        f"at most {most} with a context of {context} tokens, or \"auto\"",
        _json_value(_KEYS["maxTokens"][1], kept))
    return replace(settings, max_tokens=kept), [problem]
