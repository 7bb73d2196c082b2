"""The Seam language server: document sync, settings, model lifecycle and completions.

Requests never wait for the model to load and never fail on odd input: a document that is not
open, not in an enabled language, a position outside the text or inside a UTF-16 surrogate pair
all answer an empty list (and say why in the log). Only the model's own output is slow; every
decode runs on :class:`~lsp_server.decoding.Decoder`'s worker thread.

Custom messages, for editor status bars and benchmarks:

* notification ``seam/status`` (server -> client): ``{"state", "model", "message"}`` whenever
  the model's state changes (``loading`` / ``ready`` / ``error``);
* request ``seam/status`` (client -> server): the same, plus ``settings`` and ``recent``: the
  timing breakdown of the last completions (``total_ms``, ``queue_ms``, ``setup_ms``,
  ``model_ms``, ``constraint_ms``, ``overhead_ms`` = total minus model time, ``resume_ms`` =
  from the worker's finish to the handler running again, ``tokens``,
  ``stop``, ``source`` = ``model`` or ``typed-through``) and ``decodes``: what the worker did
  with recent jobs (``stop``, ``tokens``, and ``after_cancel_ms`` when it was cancelled), and
  ``running``: the documents being decoded now.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

from lsprotocol import types
from pygls.capabilities import ServerCapabilitiesBuilder
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, lsp_method

from .decoding import Decoder
from .documents import Document, DocumentStore, PositionError
from .logs import EditorLogHandler
from .model_host import HostState, ModelHost
from .settings import Settings, merge, policy_for, section_of
from .suggestions import SuggestionCache

log = logging.getLogger(__name__)

SERVER_NAME = "seam"
SERVER_VERSION = "0.1.0"
RECENT_TIMINGS = 256
CONFIG_PULL_TIMEOUT_S = 5.0


def _device_type(engine) -> str:
    """``"cpu"``, ``"cuda"`` or ``"metal"``: where the engine's model runs."""
    return engine.backend.device


class _DropDeserializeTraceback(logging.Filter):
    """pygls logs a full traceback for each request that breaks the schema; SeamProtocol
    answers those with InvalidParams and logs one line instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Unable to deserialize message")


logging.getLogger("pygls.protocol.json_rpc").addFilter(_DropDeserializeTraceback())


class _Answered:
    """Stands in for a request that was answered with an error while being decoded."""

    jsonrpc = None


class SeamProtocol(LanguageServerProtocol):
    """pygls' protocol with document sync routed to Seam's own :class:`DocumentStore`.

    It also answers requests whose parameters break the LSP schema (a negative line, a missing
    field) with a JSON-RPC ``InvalidParams`` error: pygls only logs those, and the client would
    wait for an answer forever.
    """

    _server: SeamServer

    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if not (isinstance(data, dict) and "id" in data and "method" in data):
                raise
            cause = exc.__cause__ or exc
            log.warning("invalid %s request: %s", data.get("method"), cause)
            error = JsonRpcInvalidParams(f"invalid params for {data.get('method')}: {cause}")
            self._send_response(data["id"], None, error.to_response_error())
            return _Answered()

    def handle_message(self, message: Any) -> None:
        if isinstance(message, _Answered):
            return
        super().handle_message(message)

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams) -> None:
        self._server.on_open(params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams) -> None:
        self._server.on_change(params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams) -> None:
        self._server.on_close(params)


@dataclasses.dataclass
class Suggestion:
    """A middle to insert at an offset of a document."""

    middle: str
    cursor_offset: int
    line_end: int


class SeamServer(LanguageServer):
    """The language server. Construct it, then ``start_io()`` or ``start_tcp(host, port)``."""

    def __init__(self, settings: Settings | None = None,
                 pinned: set[str] | None = None) -> None:
        """``pinned``: settings keys given on the command line, which the editor cannot change."""
        super().__init__(SERVER_NAME, SERVER_VERSION, protocol_cls=SeamProtocol,
                         text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.settings = settings or Settings()
        self.pinned = frozenset(pinned or ())
        self.documents = DocumentStore()
        self.suggestions = SuggestionCache()
        self.decoder = Decoder()
        self.host = ModelHost(on_state=self._state_changed, on_progress=self._load_progress)
        self.recent: deque[dict[str, Any]] = deque(maxlen=RECENT_TIMINGS)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._progress_token: str | None = None
        self._load_started = False  # settings that arrive before `initialized` load nothing
        self._register()

    # ----- plumbing ------------------------------------------------------------------------

    def call_in_loop(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the event loop thread (pygls' writer is not thread-safe)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(fn)
        except RuntimeError:  # loop shutting down
            pass

    def _send_log(self, kind: types.MessageType, text: str) -> None:
        self.call_in_loop(lambda: self.window_log_message(
            types.LogMessageParams(type=kind, message=text)))

    def _show(self, kind: types.MessageType, text: str) -> None:
        self.call_in_loop(lambda: self.window_show_message(
            types.ShowMessageParams(type=kind, message=text)))

    def attach_editor_log(self, level: int = logging.INFO) -> EditorLogHandler:
        handler = EditorLogHandler(self._send_log, level)
        logging.getLogger().addHandler(handler)
        return handler

    def _register(self) -> None:
        def plain(method: Callable[..., Any]) -> Callable[..., Any]:
            # pygls tags handlers with attributes, which bound methods do not accept.
            if asyncio.iscoroutinefunction(method):
                async def handler(params: Any = None) -> Any:
                    return await method(params)
            else:
                def handler(params: Any = None) -> Any:
                    return method(params)
            return handler

        self.feature(types.INITIALIZE)(plain(self.on_initialize))
        self.feature(types.INITIALIZED)(plain(self.on_initialized))
        self.feature(types.SHUTDOWN)(plain(self.on_shutdown))
        self.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)(plain(self.on_configuration))
        self.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION,
                     types.InlineCompletionOptions())(plain(self.on_inline_completion))
        self.feature(types.TEXT_DOCUMENT_COMPLETION,
                     types.CompletionOptions(resolve_provider=False))(plain(self.on_completion))
        self.feature("seam/status")(plain(self.on_status))

    # ----- lifecycle -----------------------------------------------------------------------

    def on_initialize(self, params: types.InitializeParams) -> None:
        self._loop = asyncio.get_running_loop()
        encoding = ServerCapabilitiesBuilder.choose_position_encoding(params.capabilities)
        self.documents.encoding = encoding
        section = section_of(params.initialization_options)
        if section is not None:
            self._apply_settings(section)
        log.info("initialized: encoding %s, settings %s", encoding, self._settings_json())

    async def on_initialized(self, params: types.InitializedParams) -> None:
        await self._pull_configuration()
        self._start_load()

    def on_shutdown(self, params: Any = None) -> None:
        self.decoder.shutdown()

    def _start_load(self) -> None:
        self._load_started = True
        s = self.settings
        self._begin_progress(s.model)
        self.host.load(s.model, device=s.device, dtype=s.dtype,
                       trust_remote_code=s.trust_remote_code)

    def _client_supports(self, path: str) -> bool:
        node: Any = self.client_capabilities
        for part in path.split("."):
            node = getattr(node, part, None)
            if node is None:
                return False
        return bool(node)

    def _begin_progress(self, model: str) -> None:
        # A reload supersedes the previous load: close its progress so no bar hangs forever.
        self._end_progress(HostState("loading", model, f"superseded by {model}"))
        if not self._client_supports("window.work_done_progress"):
            self._progress_token = None
            return
        token = f"seam-load-{uuid.uuid4().hex[:8]}"
        self._progress_token = token

        def begin(*_: Any) -> None:
            if self._progress_token != token:
                return
            self.work_done_progress.begin(token, types.WorkDoneProgressBegin(
                title="Seam", message=f"loading {model}", percentage=0, cancellable=False))
            state = self.host.state
            if state.state in ("ready", "error"):  # loading finished before the client answered
                self._end_progress(state)

        try:
            self.work_done_progress.create(token, callback=begin)
        except Exception:
            log.exception("could not create a progress token")
            self._progress_token = None

    def _load_progress(self, fraction: float, message: str) -> None:
        token = self._progress_token
        if token is None:
            return
        pct = max(0, min(100, int(round(fraction * 100))))

        def report() -> None:
            if token in self.work_done_progress.tokens:
                self.work_done_progress.report(
                    token, types.WorkDoneProgressReport(message=message, percentage=pct))

        self.call_in_loop(report)

    def _end_progress(self, state: HostState) -> None:
        token = self._progress_token
        if token is None or token not in self.work_done_progress.tokens:
            return
        self._progress_token = None
        self.work_done_progress.end(token, types.WorkDoneProgressEnd(message=state.message))

    def _state_changed(self, state: HostState) -> None:
        def notify() -> None:
            self.protocol.notify("seam/status", state.as_json())
            if state.state in ("ready", "error"):
                self._end_progress(state)
            if state.state == "error":
                self.window_show_message(types.ShowMessageParams(
                    type=types.MessageType.Error, message=state.message))

        self.call_in_loop(notify)

    # ----- settings ------------------------------------------------------------------------

    def _settings_json(self) -> dict[str, Any]:
        s = self.settings
        return {"model": s.model, "device": s.device, "dtype": s.dtype,
                "maxTokens": s.max_tokens or "auto", "timeBudgetMs": s.time_budget_ms or "auto",
                "scope": s.scope or "auto", "topK": s.top_k, "constrained": s.constrained,
                "languages": list(s.languages)}

    def _apply_settings(self, section: dict[str, Any]) -> None:
        old = self.settings
        ignored = sorted(k for k in section if k in self.pinned)
        if ignored:
            log.info("settings %s are fixed by the command line; ignoring the editor's", ignored)
        new, problems = merge(old, {k: v for k, v in section.items() if k not in self.pinned})
        for problem in problems:
            log.warning("settings: %s", problem)
        if problems:
            self._show(types.MessageType.Warning, "Seam settings: " + "; ".join(problems))
        self.settings = new
        if new != old:
            self.suggestions = SuggestionCache(self.suggestions.capacity)
            log.info("settings now %s", self._settings_json())

    async def _pull_configuration(self) -> None:
        if not self._client_supports("workspace.configuration"):
            return
        try:
            result = await asyncio.wait_for(self.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section="seam")])),
                CONFIG_PULL_TIMEOUT_S)
        except Exception as exc:
            log.warning("workspace/configuration failed: %s", exc)
            return
        if result and isinstance(result[0], dict):
            section = section_of(result[0]) or result[0]
            self._apply_settings(section)

    async def on_configuration(self, params: types.DidChangeConfigurationParams) -> None:
        section = section_of(params.settings)
        old_key = self.settings.model_key
        if section is not None:
            self._apply_settings(section)
        else:
            await self._pull_configuration()
        if self._load_started and self.settings.model_key != old_key:
            self._start_load()

    # ----- documents -----------------------------------------------------------------------

    def on_open(self, params: types.DidOpenTextDocumentParams) -> None:
        doc = self.documents.open(params.text_document)
        log.info("opened %s (%s, %d chars)", doc.uri, doc.language_id, len(doc.text))

    def on_change(self, params: types.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        try:
            doc = self.documents.change(params)
        except PositionError as exc:
            # The client and server disagree on the text: drop it until the client reopens it.
            log.error("edit to %s names no place in the text (%s); closing it", uri, exc)
            self.documents.close(uri)
            return
        if doc is None:
            log.warning("change to a document that is not open: %s", uri)

    def on_close(self, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        self.decoder.supersede(uri)
        self.suggestions.forget(uri)
        self.documents.close(uri)

    # ----- completions ---------------------------------------------------------------------

    async def on_inline_completion(
        self, params: types.InlineCompletionParams
    ) -> types.InlineCompletionList:
        found = await self._suggest(params.text_document.uri, params.position)
        if found is None:
            return types.InlineCompletionList(items=[])
        doc, s = found
        rest_of_line = doc.text[s.cursor_offset:s.line_end]
        item = types.InlineCompletionItem(
            insert_text=s.middle + rest_of_line,
            range=types.Range(start=doc.position_at(s.cursor_offset),
                              end=doc.position_at(s.line_end)))
        return types.InlineCompletionList(items=[item])

    async def on_completion(self, params: types.CompletionParams) -> types.CompletionList:
        found = await self._suggest(params.text_document.uri, params.position)
        if found is None:
            return types.CompletionList(is_incomplete=True, items=[])
        doc, s = found
        here = doc.position_at(s.cursor_offset)
        label = s.middle.strip().splitlines()[0] if s.middle.strip() else s.middle
        item = types.CompletionItem(
            label=label[:80] or s.middle,
            kind=types.CompletionItemKind.Snippet,
            detail="Seam",
            documentation=types.MarkupContent(kind=types.MarkupKind.Markdown,
                                              value=f"```python\n{s.middle}\n```"),
            insert_text_format=types.InsertTextFormat.PlainText,
            text_edit=types.TextEdit(range=types.Range(start=here, end=here),
                                     new_text=s.middle),
            sort_text="0",
        )
        return types.CompletionList(is_incomplete=True, items=[item])

    def on_status(self, params: Any = None) -> dict[str, Any]:
        out = self.host.state.as_json()
        out["settings"] = self._settings_json()
        out["recent"] = list(self.recent)
        out["decodes"] = list(self.decoder.finished)
        out["running"] = self.decoder.running()
        out["documents"] = len(self.documents)
        return out

    async def _suggest(self, uri: str, position: types.Position
                       ) -> tuple[Document, Suggestion] | None:
        """The middle for ``uri`` at ``position``, or ``None`` (reason logged)."""
        t0 = time.perf_counter()
        doc = self.documents.get(uri)
        if doc is None:
            log.warning("completion for a document that is not open: %s", uri)
            return None
        if doc.language_id not in self.settings.languages:
            log.info("no completion: language %r is not in seam.languages %s",
                     doc.language_id, list(self.settings.languages))
            return None
        try:
            cur = doc.cursor(position)
        except PositionError as exc:
            log.warning("no completion for %s: %s", uri, exc)
            return None
        text = doc.text
        left, right = text[:cur.offset], text[cur.offset:]
        cached = self.suggestions.lookup(uri, left, right)
        if cached is not None:
            self.decoder.supersede(uri)
            self._record(uri, t0, source="typed-through", tokens=0, stop="cache")
            return doc, Suggestion(cached, cur.offset, cur.line_end)
        engine = self.host.engine
        if engine is None:
            state = self.host.state
            log.info("no completion yet: model is %s (%s)", state.state, state.message)
            return None
        policy = policy_for(self.settings, text[cur.line_start:cur.offset],
                            text[cur.offset:cur.line_end],
                            device_type=_device_type(engine))
        from fim.api import CompletionRequest

        request = CompletionRequest(left, right, mode=policy.mode, max_tokens=policy.max_tokens,
                                    top_k=policy.top_k, scope=policy.scope, temperature=0.0,
                                    time_budget_ms=policy.time_budget_ms,
                                    context_tokens=policy.context_tokens)
        try:
            outcome = await self.decoder.run(uri, engine, request,
                                             share_key=(text, cur.offset, policy))
        except asyncio.CancelledError:
            self._record(uri, t0, source="model", stop="cancelled-by-client")
            raise
        except Exception as exc:
            log.exception("decode failed for %s", uri)
            self._record(uri, t0, source="model", stop="error", error=repr(exc))
            return None
        resume_ms = (time.perf_counter() - outcome.finished_at) * 1000.0
        res = outcome.result
        if res is None:
            self._record(uri, t0, source="model", stop="superseded", queue_ms=outcome.queue_ms)
            return None
        middle = getattr(res, "middle", None)
        self._record(uri, t0, source="model", queue_ms=outcome.queue_ms,
                     setup_ms=getattr(res, "setup_ms", 0.0),
                     model_ms=getattr(res, "model_ms", 0.0),
                     constraint_ms=getattr(res, "constraint_ms", 0.0),
                     tokens=getattr(res, "tokens", 0), stop=getattr(res, "stop", "?"),
                     resume_ms=resume_ms,
                     mode=getattr(res, "mode", policy.mode), scope=policy.scope)
        if not middle or getattr(res, "stop", None) == "cancelled":
            return None
        if self.documents.get(uri) is not doc or doc.text is not text:
            # The text changed while decoding; a newer request will follow the edit.
            self.suggestions.put(uri, left, right, middle)
            log.info("document %s changed during decode; answer dropped", uri)
            return None
        self.suggestions.put(uri, left, right, middle)
        return doc, Suggestion(middle, cur.offset, cur.line_end)

    def _record(self, uri: str, t0: float, **fields: Any) -> None:
        total = (time.perf_counter() - t0) * 1000.0
        entry: dict[str, Any] = {"uri": uri, "total_ms": round(total, 3)}
        for key, value in fields.items():
            entry[key] = round(value, 3) if isinstance(value, float) else value
        model_ms = float(fields.get("model_ms", 0.0) or 0.0)
        entry["overhead_ms"] = round(total - model_ms, 3)
        self.recent.append(entry)
        log.info("completion %s", entry)
