"""JSON-RPC 2.0 message shapes as LSP uses them, checked before anything else looks inside.

pygls hands every JSON object of a body, nested ones included, to its message decoder
(``json.loads(..., object_hook=...)``), so an object shaped like a request deep inside a
request's params was treated as a request of its own and answered under an id the client never
sent. Here only the top-level value is classified, once, into a typed record; whatever is not a
request, notification or response becomes :class:`Invalid` and is answered with
``InvalidRequest`` (-32600) as JSON-RPC prescribes.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

MsgId = int | str


class ErrorCode(IntEnum):
    """The JSON-RPC and LSP error codes Seam answers with."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    SERVER_NOT_INITIALIZED = -32002
    REQUEST_CANCELLED = -32800


@dataclass(frozen=True)
class Request:
    id: MsgId
    method: str
    params: dict | list | None


@dataclass(frozen=True)
class Notification:
    method: str
    params: dict | list | None


@dataclass(frozen=True)
class Response:
    """The client's answer to a request the server sent."""

    id: MsgId | None
    payload: dict


@dataclass(frozen=True)
class Invalid:
    """Not a JSON-RPC 2.0 message; ``id`` is set only when the message carried a valid one."""

    reason: str
    id: MsgId | None = None


Message = Request | Notification | Response | Invalid


def valid_id(value: Any) -> bool:
    """LSP ids are integers or strings (``bool`` is an ``int`` to Python, not to JSON)."""
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)


def error_payload(msg_id: MsgId | None, code: ErrorCode, message: str) -> dict[str, Any]:
    """An error response; ``msg_id`` ``None`` when the request's id could not be read (the
    one shape every error Seam answers with, before and after a session exists)."""
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": int(code), "message": message}}


def classify(payload: Any) -> Message:
    """What a top-level JSON value is, as a JSON-RPC message."""
    if isinstance(payload, list):
        return Invalid("batches (JSON arrays of messages) are not part of LSP")
    if not isinstance(payload, dict):
        return Invalid(f"a message must be a JSON object, not {type(payload).__name__}")
    has_id = "id" in payload
    msg_id = payload.get("id")
    good_id = msg_id if valid_id(msg_id) else None
    if payload.get("jsonrpc") != "2.0":
        return Invalid('"jsonrpc" must be "2.0"', good_id)
    if "method" in payload:
        method = payload["method"]
        if not isinstance(method, str) or not method:
            return Invalid('"method" must be a non-empty string', good_id)
        params = payload.get("params")
        if params is not None and not isinstance(params, (dict, list)):
            return Invalid('"params" must be an object or an array', good_id)
        if not has_id:
            return Notification(method, params)
        if good_id is None:
            return Invalid('"id" must be an integer or a string')
        return Request(good_id, method, params)
    if has_id and ("result" in payload or "error" in payload):
        return Response(good_id, payload)
    return Invalid("neither a request, a notification nor a response", good_id)
