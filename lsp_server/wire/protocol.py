"""pygls's protocol, fed one checked message at a time, with LSP's lifecycle enforced.

pygls's ``LanguageServerProtocol`` keeps doing the typed decoding, dispatch, cancellation and
response bookkeeping. In front of it :meth:`SeamProtocol.receive` takes one top-level JSON value
from the framing layer and

* classifies it (``jsonrpc.classify``) and answers a malformed message with ``InvalidRequest``
  instead of ignoring it;
* applies the lifecycle of the LSP specification: before ``initialize`` a request gets
  ``ServerNotInitialized`` (-32002) and a notification is dropped; a second ``initialize`` is
  refused; after ``shutdown`` a request gets ``InvalidRequest`` and a notification is dropped;
  ``exit`` ends the session with code 0 after ``shutdown`` and 1 without it;
* decodes the params with pygls's converter and answers a request whose params break the
  schema with ``InvalidParams``; a malformed notification is logged on one line and dropped.
  The converter is made strict first and the structured params are checked against their
  declared types (``schema``): cattrs would otherwise coerce a scalar to the schema's type
  (``str(12345)`` for a document's text, ``int("1")`` and ``int(1.9)`` for a position,
  ``str(None)`` for an edit) or let it through a union (``languageId: 7``), so a message that
  breaks the schema would be answered or stored as something the client never sent.

Nothing here logs a message's content: a document's text must not reach the log.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Protocol

import attrs
from cattrs import transform_error
from lsprotocol import types
from pygls.protocol import LanguageServerProtocol, lsp_method

from lsp_server.wire.jsonrpc import (
    ErrorCode,
    Invalid,
    MsgId,
    Notification,
    Request,
    Response,
    classify,
    error_payload,
    valid_id,
)
from lsp_server.wire.schema import schema_problem_of, strict_scalars


class DocumentSync(Protocol):
    """What the protocol hands document notifications to (the server, which imports this
    module: a protocol here instead of an import keeps the two from importing each other)."""

    def on_open(self, params: types.DidOpenTextDocumentParams) -> None: ...

    def on_change(self, params: types.DidChangeTextDocumentParams) -> None: ...

    def on_close(self, params: types.DidCloseTextDocumentParams) -> None: ...

log = logging.getLogger(__name__)


class _DropDeserializeTraceback(logging.Filter):
    """pygls logs a traceback (with values) for every message its converter rejects; Seam
    answers those itself with one line and no content."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Unable to deserialize message")


logging.getLogger("pygls.protocol.json_rpc").addFilter(_DropDeserializeTraceback())


def schema_problem(exc: BaseException) -> str:
    """Where params break the schema, without the offending values (they may be user text)."""
    cause = exc.__cause__ or exc
    try:
        details = transform_error(cause)
    except Exception:
        details = []
    if not details:
        return type(cause).__name__
    shown = "; ".join(d.replace("$.params", "params") for d in details[:3])
    return shown + (f" (+{len(details) - 3} more)" if len(details) > 3 else "")


@functools.cache
def _is_notification_method(method: str) -> bool:
    """Whether LSP defines ``method`` as a notification (its message type has no id)."""
    message_type = types.METHOD_TO_TYPES.get(method, (None,))[0]
    if message_type is None or not attrs.has(message_type):
        return False
    return "id" not in {field.name for field in attrs.fields(message_type)}


class SeamProtocol(LanguageServerProtocol):
    """pygls's protocol behind a message gate, with document sync routed to Seam's store."""

    _server: DocumentSync

    def __init__(self, server: Any, converter: Any) -> None:
        strict_scalars(converter)
        super().__init__(server, converter)
        self.initialize_received = False
        self.exited = False
        self.exit_code: int | None = None

    @property
    def shut_down(self) -> bool:
        return self._shutdown

    # ----- sending -------------------------------------------------------------------------

    def send_error(self, msg_id: MsgId | None, code: ErrorCode, message: str) -> None:
        """An error response; ``msg_id`` ``None`` when the request's id could not be read."""
        self._send_data(error_payload(msg_id, code, message))

    # ----- receiving -----------------------------------------------------------------------

    def receive(self, payload: Any) -> None:
        """Handle one top-level JSON value from the framing layer."""
        message = classify(payload)
        if isinstance(message, Invalid):
            log.warning("invalid message: %s", message.reason)
            self.send_error(message.id, ErrorCode.INVALID_REQUEST,
                            f"invalid JSON-RPC message: {message.reason}")
            return
        if isinstance(message, Response):
            self._receive_response(message)
            return
        if not self._admit(message):
            return
        if isinstance(message, Request) and message.method == types.INITIALIZE:
            self.initialize_received = True
        if isinstance(message, Notification) and message.method == types.CANCEL_REQUEST and \
                not (isinstance(message.params, dict) and valid_id(message.params.get("id"))):
            log.warning("dropped a $/cancelRequest without a usable id")
            return
        decoded = self._decode(message, payload)
        if decoded is not None:
            self.handle_message(decoded)

    def _admit(self, message: Request | Notification) -> bool:
        """The lifecycle gate: whether ``message`` may be handled now (answered if not)."""
        method = message.method
        is_request = isinstance(message, Request)
        if is_request and _is_notification_method(method):
            # pygls would run it as a notification and never answer the id.
            self.send_error(message.id, ErrorCode.INVALID_REQUEST,
                            f"{method} is a notification: send it without an id")
            return False
        if method == types.EXIT:
            return True
        if not self.initialize_received:
            if is_request and method != types.INITIALIZE:
                self.send_error(message.id, ErrorCode.SERVER_NOT_INITIALIZED,
                                f"{method} before initialize: the server is not initialized")
                return False
            if not is_request:
                log.info("dropped %s: it came before initialize", method)
                return False
            return True
        if self._shutdown:
            if is_request:
                self.send_error(message.id, ErrorCode.INVALID_REQUEST,
                                f"{method} after shutdown: the server is shutting down")
            else:
                log.info("dropped %s: it came after shutdown", method)
            return False
        if is_request and method == types.INITIALIZE:
            self.send_error(message.id, ErrorCode.INVALID_REQUEST,
                            "initialize was already received; it may be sent only once")
            return False
        return True

    def _decode(self, message: Request | Notification, payload: dict) -> Any:
        """pygls's typed message, or ``None`` after answering/logging why it has none."""
        data = dict(payload)
        data.setdefault("params", None)
        try:
            decoded = self.structure_message(data)
        except Exception as first:
            decoded = None
            problem = schema_problem(first)
            if data["params"] is None:
                # A params-less message whose type wants an object: an empty one may do
                # (`initialized`, `seam/status`).
                try:
                    decoded = self.structure_message({**data, "params": {}})
                except Exception:
                    pass
        if decoded is not None:
            # What the lenient parts of the converter let through (see `schema`).
            problem = schema_problem_of(getattr(decoded, "params", None))
            if problem is None:
                return decoded
        log.warning("invalid params for %s: %s", message.method, problem)
        if isinstance(message, Request):
            self.send_error(message.id, ErrorCode.INVALID_PARAMS,
                            f"invalid params for {message.method}: {problem}")
        return None

    def _receive_response(self, message: Response) -> None:
        if message.id is None:
            log.warning("a response without a usable id from the client; ignored")
            return
        try:
            decoded = self.structure_message(message.payload)
        except Exception as exc:
            log.warning("unreadable response %r from the client: %s", message.id,
                        schema_problem(exc))
            future = self._request_futures.pop(message.id, None)
            if future is not None and not future.done():
                future.set_exception(RuntimeError("the client's response was unreadable"))
            return
        self.handle_message(decoded)

    # ----- lifecycle ---------------------------------------------------------------------

    @lsp_method(types.EXIT)
    def lsp_exit(self, *args: Any) -> None:
        """End the session: exit code 0 after ``shutdown``, 1 without it (LSP)."""
        self.exit_code = 0 if self._shutdown else 1
        self.exited = True

    # ----- document sync, routed to Seam's own store ---------------------------------------

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams) -> None:
        self._server.on_open(params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams) -> None:
        self._server.on_change(params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams) -> None:
        self._server.on_close(params)
