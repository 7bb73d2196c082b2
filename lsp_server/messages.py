"""Seam's own messages on the wire, as typed records: ``seam/status`` and ``seam/cursor``.

The editors (``editors/vscode``, ``editors/nvim``) and the benchmarks read these shapes, so
they are written once, here, with their conversion to and from JSON; docs/INTERFACES.md shows
each one and ``tests/lsp_server/test_messages.py`` checks the two against each other. What a
client sends (``seam/cursor``) is validated on the way in: a malformed one raises
:class:`MessageError` naming the field, never a crash deeper in the server.

* :class:`CompletionRecord`: one completion's timing and what answered it (``recent``);
* :class:`~lsp_server.jobs.DecodeRecord`: what the worker did with a job (``decodes``);
* :class:`~lsp_server.model_host.HostState`: the ``seam/status`` notification;
* :class:`StatusReply`: the answer to the ``seam/status`` request;
* :class:`CursorMessage`: the ``seam/cursor`` notification.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lsp_server.jobs import DecodeRecord
from lsp_server.model_host import HostState, LoadState

STATUS = "seam/status"
CURSOR = "seam/cursor"


class MessageError(ValueError):
    """A client's message that does not have the documented shape (the reason says where)."""


class CompletionSource(enum.StrEnum):
    """What answered a completion request."""

    MODEL = "model"  # a decode on the worker
    EARLY = "early"  # the first line of a decode that goes on into the suggestion cache
    TYPED_THROUGH = "typed-through"  # the suggestion cache (typing through, or a prefetch)


def _json_value(value: Any) -> Any:
    """What a record's field looks like in JSON: enums by name, floats to the microsecond."""
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, tuple):
        return list(value)
    return value


def _to_json(record: Any) -> dict[str, Any]:
    """A record's fields as JSON, leaving out those it does not have (``None``)."""
    return {f.name: _json_value(getattr(record, f.name))
            for f in dataclasses.fields(record) if getattr(record, f.name) is not None}


def _known(cls: type, data: Any) -> dict[str, Any]:
    """The members of ``data`` that are fields of ``cls`` (a newer server may send more)."""
    if not isinstance(data, Mapping):
        raise MessageError(f"{cls.__name__} must be a JSON object, not {type(data).__name__}")
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names}


@dataclass(frozen=True)
class CompletionRecord:
    """One completion request as ``seam/status`` reports it in ``recent``.

    Times are milliseconds from the request's arrival: ``overhead_ms`` is ``total_ms`` less
    the model's own time. Fields a kind of answer does not have are ``None`` (left out of the
    JSON): a typed-through answer has no model timings, a failed one only ``error``.
    """

    uri: str
    source: CompletionSource
    #: a ``fim.options.StopReason`` value, or the server's: ``cache``, ``line`` (early),
    #: ``superseded``, ``cancelled-by-client``, ``error``
    stop: str
    total_ms: float
    overhead_ms: float
    queue_ms: float | None = None
    setup_ms: float | None = None
    model_ms: float | None = None
    constraint_ms: float | None = None
    #: from the worker's finish to the handler running again
    resume_ms: float | None = None
    tokens: int | None = None
    mode: str | None = None  # the constraint's language mode
    scope: str | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None  # of the prompt, served by the model's cache
    context_tokens: int | None = None  # of the prompt: project context
    context_files: tuple[str, ...] | None = None  # the paths the project context held
    context_sources: dict[str, int] | None = None  # its tokens per source
    #: the context was not in the model's cache: answered without it, warmed after
    context_deferred: bool | None = None
    error: str | None = None  # the exception's type, when the decode failed

    def to_json(self) -> dict[str, Any]:
        return _to_json(self)

    @classmethod
    def from_json(cls, data: Any) -> CompletionRecord:
        known = _known(cls, data)
        try:
            known["source"] = CompletionSource(known.get("source"))
            if known.get("context_files") is not None:
                known["context_files"] = tuple(known["context_files"])
            return cls(**known)
        except (TypeError, ValueError) as exc:
            raise MessageError(f"not a completion record: {exc}") from None


@dataclass(frozen=True)
class RuntimeInfo:
    """How the loaded model runs (``seam/status``'s ``runtime``)."""

    engine: str  # ``fim.engines.model_specs.EngineKind`` value
    device: str
    description: str
    window: int

    def to_json(self) -> dict[str, Any]:
        return _to_json(self)

    @classmethod
    def from_json(cls, data: Any) -> RuntimeInfo:
        try:
            return cls(**_known(cls, data))
        except TypeError as exc:
            raise MessageError(f"not a runtime: {exc}") from None


@dataclass(frozen=True)
class StatusReply:
    """The answer to a ``seam/status`` request: the notification's fields (``state``,
    ``model``, ``message``) and what the server is doing."""

    state: HostState
    settings: dict[str, Any]  # the settings in force, as ``seam.*`` keys
    recent: tuple[CompletionRecord, ...] = ()  # the last completions, oldest first
    decodes: tuple[DecodeRecord, ...] = ()  # the worker's recent jobs, oldest first
    running: tuple[str, ...] = ()  # documents whose request is being decoded now
    idle: bool = True  # nothing queued, running or about to rest (for tests and benchmarks)
    documents: int = 0  # open documents
    runtime: RuntimeInfo | None = None  # once a model is loaded
    #: the editors' language ids whose suggestions are exact; every other file's are unchecked
    checked: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out = self.state.as_json()
        out.update(settings=self.settings, recent=[r.to_json() for r in self.recent],
                   decodes=[d.to_json() for d in self.decodes], running=list(self.running),
                   idle=self.idle, documents=self.documents, checked=list(self.checked))
        if self.runtime is not None:
            out["runtime"] = self.runtime.to_json()
        return out

    @classmethod
    def from_json(cls, data: Any) -> StatusReply:
        known = _known(cls, data)
        runtime = known.get("runtime")
        try:
            return cls(
                state=HostState.from_json(data), settings=dict(known.get("settings") or {}),
                recent=tuple(CompletionRecord.from_json(r) for r in known.get("recent", ())),
                decodes=tuple(DecodeRecord.from_json(d) for d in known.get("decodes", ())),
                running=tuple(known.get("running", ())), idle=bool(known.get("idle", True)),
                documents=int(known.get("documents", 0)),
                runtime=RuntimeInfo.from_json(runtime) if runtime is not None else None,
                checked=tuple(str(c) for c in known.get("checked", ())))
        except (TypeError, ValueError) as exc:
            raise MessageError(f"not a seam/status reply: {exc}") from None


def _count(value: Any, name: str) -> int:
    """A non-negative JSON integer (``true`` is not one, though Python says it is an int)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MessageError(f"{name} must be a non-negative integer")
    return value


@dataclass(frozen=True)
class CursorMessage:
    """Where the cursor moved or rests: ``{"textDocument": {"uri"}, "position": {"line",
    "character"}}`` (``character`` in the session's position encoding)."""

    uri: str
    line: int
    character: int

    def to_json(self) -> dict[str, Any]:
        return {"textDocument": {"uri": self.uri},
                "position": {"line": self.line, "character": self.character}}

    @classmethod
    def from_json(cls, params: Any) -> CursorMessage:
        """The message in ``params``; :class:`MessageError` when it is malformed."""
        params = _plain(params)
        if not isinstance(params, Mapping):
            raise MessageError("seam/cursor params must be an object")
        document = params.get("textDocument")
        uri = document.get("uri") if isinstance(document, Mapping) else None
        if not isinstance(uri, str) or not uri:
            raise MessageError("seam/cursor needs textDocument.uri, a string")
        position = params.get("position")
        if not isinstance(position, Mapping):
            raise MessageError("seam/cursor needs position, an object")
        return cls(uri, _count(position.get("line"), "position.line"),
                   _count(position.get("character"), "position.character"))


def _plain(value: Any) -> Any:
    """pygls hands the params of a method it does not know as named tuples: as dicts."""
    if hasattr(value, "_asdict"):
        value = value._asdict()
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


__all__ = ["CURSOR", "STATUS", "CompletionRecord", "CompletionSource", "CursorMessage",
           "DecodeRecord", "HostState", "LoadState", "MessageError", "RuntimeInfo",
           "StatusReply"]
