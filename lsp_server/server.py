"""The Seam language server: document sync, settings, model lifecycle and completions.

Requests never wait for the model to load and never fail on odd input: a document that is not
open, not in an enabled language, a position outside the text or inside a UTF-16 surrogate pair
all answer an empty list (and say why in the log). Only the model's own output is slow; every
decode runs on :class:`~lsp_server.jobs.Decoder`'s worker thread. What reaches this module
has passed the framing layer (``framing``, ``transport``) and the message and lifecycle gate
(``protocol``); settings are validated on arrival (``settings``), each refusal shown to the user
once; the model never sees lone surrogates or ``\r`` line breaks (``text``); and no setting can
make a model run its own code unless the server was started with ``--trust-remote-code``.

Custom messages, for editor status bars and benchmarks:

* notification ``seam/status`` (server -> client): ``{"state", "model", "message"}`` whenever
  the model's state changes (``loading`` / ``ready`` / ``error``);
* request ``seam/status`` (client -> server): the same, plus ``settings``, ``runtime`` (the
  engine and how it runs) and ``recent``: the timing breakdown of the last completions
  (``total_ms``, ``queue_ms``, ``setup_ms``, ``model_ms``, ``constraint_ms``, ``overhead_ms`` =
  total minus model time, ``resume_ms`` = from the worker's finish to the handler running
  again, ``tokens``, ``stop``, ``source`` = ``model``, ``early`` (answered with the first line
  while the rest is decoded), ``typed-through`` or ``prefetched`` (from the suggestion cache)),
  and for model answers the project context: ``context_files`` (the paths it held),
  ``context_sources`` (tokens per source), ``context_tokens`` (in the prompt) and
  ``context_deferred`` (not in the model's cache yet: answered without it, warmed after)
  and ``decodes``: what the worker did with recent jobs (``stop``, ``tokens``, ``background``,
  and ``after_cancel_ms`` when it was cancelled), and ``running``: the documents being
  decoded now;
* notification ``seam/cursor`` (client -> server): ``{"textDocument": {"uri"}, "position"}``
  when the cursor moves or rests.  The server uses idle time to get the prompt there into the
  model's cache (and to widen its context), so that the request that follows only decodes.

Project context (``project_context``, planned in ``request_plan``): the definitions of the
names a document imports from the workspace folders the client announced
(``workspaceFolders``/``rootUri``, ``workspace/didChangeWorkspaceFolders``; nothing outside
them is read, see ``workspace``), the other open documents and the recently edited regions
go before the file in the prompt, steadiest first, so that the model's cache keeps them.

How requests stay fast on a CPU: prompts keep a stable start per document
(``context_plan``), so the model's cache holds most of every prompt; the cursor's resting
place is warmed before it is asked about; a shown suggestion is followed, in the background,
by the next one as if it were accepted; a mid-line suggestion ends with its line; and an
empty-line request is answered with its first line while the rest of the block is written
into the suggestion cache (``decoding``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

from lsprotocol import types
from pygls.capabilities import ServerCapabilitiesBuilder
from pygls.lsp.server import LanguageServer

from fim.api import CompletionRequest, CompletionResult, Engine
from fim.editor_policy import EditorPolicy
from fim.options import StopReason
from lsp_server import text as model_text
from lsp_server.documents import Cursor, Document, DocumentStore, PositionError
from lsp_server.jobs import JobScheduler, Outcome, Priority
from lsp_server.logs import EditorLogHandler
from lsp_server.messages import (
    CompletionRecord,
    CompletionSource,
    CursorMessage,
    MessageError,
    RuntimeInfo,
    StatusReply,
)
from lsp_server.model_host import HostState, LoadState, ModelHost
from lsp_server.project.recent_edits import EditRing
from lsp_server.project.sources import ContextCollector, OpenDocument
from lsp_server.project.workspace import Workspace
from lsp_server.prompt_anchors import AnchorPlanner
from lsp_server.request_plan import Planned, RequestPlanner, context_budget
from lsp_server.request_plan import device_type as _device_type
from lsp_server.settings import (
    Settings,
    SettingsShapeError,
    check_budget,
    context_sources,
    merge,
    section_of,
)
from lsp_server.suggestions import SuggestionCache
from lsp_server.wire.framing import DEFAULT_MAX_CONTENT_BYTES, FrameError, FrameErrorKind
from lsp_server.wire.jsonrpc import ErrorCode
from lsp_server.wire.protocol import SeamProtocol

log = logging.getLogger(__name__)

SERVER_NAME = "seam"
SERVER_VERSION = "0.1.0"
RECENT_TIMINGS = 256
CONFIG_PULL_TIMEOUT_S = 5.0
#: How many distinct settings problems are remembered as already shown.
MAX_REMEMBERED_PROBLEMS = 256
REMOTE_CODE_REFUSED = (
    "Seam ignored seam.trustRemoteCode: a model's own code runs only when the server itself "
    "was started with `seam serve --trust-remote-code` (in VS Code: set seam.trustRemoteCode "
    "in your user settings, which passes that flag)."
)


#: Extra prompt tokens a request may run to include the project context; when the context
#: would cost more (it is not in the model's cache yet), the request goes without it and the
#: context is run into the cache in the background, so it never delays a suggestion.
CONTEXT_SLACK_TOKENS = 16


@dataclasses.dataclass
class Suggestion:
    """A middle to insert at an offset of a document."""

    middle: str
    cursor_offset: int
    line_end: int


@dataclasses.dataclass(frozen=True)
class _Ask:
    """A completion request being answered: where, the text it was asked on, and when."""

    uri: str
    doc: Document
    text: str  # the document's text when asked (an edit meanwhile drops the answer)
    cursor: Cursor
    left: str
    right: str
    line_break: str  # the document's own, for the middle shown in it
    t0: float  # perf_counter when the request arrived


class SeamServer(LanguageServer):
    """One client's session. Serve it with ``transport.serve_stdio`` or ``transport.TcpServer``.

    ``host`` is the model host to use: a TCP server hands the same one to every session, so the
    model stays loaded between clients. ``allow_remote_code`` is ``seam serve
    --trust-remote-code``: without it, no setting can make a model run its own code.
    """

    def __init__(self, settings: Settings | None = None,
                 pinned: set[str] | None = None, *, host: ModelHost | None = None,
                 allow_remote_code: bool = False,
                 max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES) -> None:
        """``pinned``: settings keys given on the command line, which the editor cannot change."""
        super().__init__(SERVER_NAME, SERVER_VERSION, protocol_cls=SeamProtocol,
                         text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.protocol: SeamProtocol
        self.allow_remote_code = allow_remote_code
        base = settings or Settings()
        self.settings = dataclasses.replace(base, trust_remote_code=allow_remote_code)
        self.pinned = frozenset(pinned or ()) | {"trustRemoteCode"}
        self.max_content_bytes = max_content_bytes
        self.documents = DocumentStore()
        self.suggestions = SuggestionCache()
        self.decoder = JobScheduler()
        self.host = host or ModelHost()
        self.host.set_listeners(self._state_changed, self._load_progress)
        self.recent: deque[CompletionRecord] = deque(maxlen=RECENT_TIMINGS)
        self.folders = Workspace()
        self.context = ContextCollector(self.folders, EditRing())
        self.requests = RequestPlanner(self.context)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._progress_token: str | None = None
        self._load_started = False  # settings that arrive before `initialized` load nothing
        self._shown_problems: set[str] = set()
        self._log_handler: EditorLogHandler | None = None
        self.exit_code: int | None = None  # set by the transport when the session is over
        self._register()

    # ----- plumbing ------------------------------------------------------------------------

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """The event loop this session runs on (where messages to the client are sent)."""
        self._loop = loop

    def end_session(self) -> None:
        """The client is gone: stop decoding for it and stop talking to it."""
        self.decoder.shutdown()
        if self._log_handler is not None:
            logging.getLogger().removeHandler(self._log_handler)
            self._log_handler = None
        self.host.set_listeners(None, None, owner=self)
        self._loop = None

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
        self._log_handler = handler
        return handler

    def report_server_error(self, error: Exception, source: Any) -> None:
        """pygls shows every failure outside a request as an "Error in server" pop-up. A
        malformed notification is the client's slip, not the user's business: log one line."""
        log.warning("%s: %s", getattr(source, "__name__", source), type(error).__name__)

    def on_framing_error(self, error: FrameError, code: ErrorCode) -> None:
        """Answer damage in the byte stream (see ``framing``), and keep serving."""
        log.warning("framing: %s (%s)", error.detail, error.kind.value)
        self.protocol.send_error(error.request_id, code, error.detail)
        if error.kind is FrameErrorKind.TOO_LARGE and error.request_id is None:
            self._show_once(types.MessageType.Warning, "too-large",
                            f"Seam skipped a message from the editor: {error.detail}. A "
                            "document that large gets no completions (raise the limit with "
                            "seam serve --max-message-mb).")

    def _show_once(self, kind: types.MessageType, key: str, text: str) -> None:
        if key in self._shown_problems:
            return
        if len(self._shown_problems) >= MAX_REMEMBERED_PROBLEMS:
            self._shown_problems.clear()
        self._shown_problems.add(key)
        self._show(kind, text)

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
        self.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)(
            plain(self.on_workspace_folders))
        self.feature("seam/status")(plain(self.on_status))
        self.feature("seam/cursor")(plain(self.on_cursor))

    # ----- lifecycle -----------------------------------------------------------------------

    def on_initialize(self, params: types.InitializeParams) -> None:
        self._loop = asyncio.get_running_loop()
        encoding = ServerCapabilitiesBuilder.choose_position_encoding(params.capabilities)
        self.documents.encoding = encoding
        self.folders.announce(params.workspace_folders, params.root_uri, params.root_path)
        self._receive_settings(params.initialization_options)
        log.info("initialized: encoding %s, settings %s, workspace %s", encoding,
                 self._settings_json(), [str(f.root) for f in self.folders.folders])

    def on_workspace_folders(self, params: types.DidChangeWorkspaceFoldersParams) -> None:
        for folder in params.event.removed or []:
            self.folders.remove(folder.uri)
        for folder in params.event.added or []:
            if self.folders.add(folder.uri, folder.name) is None:
                log.warning("workspace folder %s is not a local directory; ignored", folder.uri)

    async def on_initialized(self, params: types.InitializedParams) -> None:
        await self._pull_configuration()
        self._start_load()

    def on_shutdown(self, params: Any = None) -> None:
        self.decoder.shutdown()

    def _start_load(self) -> None:
        self._load_started = True
        s = self.settings
        state = self.host.state
        if self.host.key == s.model_key and state.state in (LoadState.LOADING, LoadState.READY):
            # A new session of a TCP server with the model its predecessor loaded.
            if state.state is LoadState.LOADING:
                self._begin_progress(s.model)
            self._state_changed(state)
            return
        self._begin_progress(s.model)
        self.host.load(s.model, device=s.device, dtype=s.dtype,
                       trust_remote_code=s.trust_remote_code, engine=s.engine,
                       window=s.context_tokens)

    def _client_supports(self, path: str) -> bool:
        node: Any = self.client_capabilities
        for part in path.split("."):
            node = getattr(node, part, None)
            if node is None:
                return False
        return bool(node)

    def _begin_progress(self, model: str) -> None:
        # A reload supersedes the previous load: close its progress so no bar hangs forever.
        self._end_progress(HostState(LoadState.LOADING, model, f"superseded by {model}"))
        if not self._client_supports("window.work_done_progress"):
            self._progress_token = None
            return
        token = f"seam-load-{uuid.uuid4().hex[:8]}"
        self._progress_token = token

        def begin(*_: Any) -> None:
            if self._progress_token != token:
                return
            if self.host.state.state in (LoadState.READY, LoadState.ERROR):
                # The load finished before the client answered: seam/status (and, for an
                # error, showMessage) already said how. A begin now would make clients show
                # "loading" and then read the end as success, hiding an error.
                self._progress_token = None
                return
            self.work_done_progress.begin(token, types.WorkDoneProgressBegin(
                title="Seam", message=f"loading {model}", percentage=0, cancellable=False))

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
            if state.state in (LoadState.READY, LoadState.ERROR):
                self._end_progress(state)
            if state.state is LoadState.READY:
                self._check_budget()
            if state.state is LoadState.ERROR:
                self.window_show_message(types.ShowMessageParams(
                    type=types.MessageType.Error, message=state.message))

        self.call_in_loop(notify)

    # ----- settings ------------------------------------------------------------------------

    def _settings_json(self) -> dict[str, Any]:
        s = self.settings
        return {"model": s.model, "device": s.device, "dtype": s.dtype,
                "maxTokens": s.max_tokens or "auto", "timeBudgetMs": s.time_budget_ms or "auto",
                "contextTokens": s.context_tokens or "auto",
                "scope": s.scope or "auto", "topK": s.top_k, "constrained": s.constrained,
                "languages": list(s.languages), "trustRemoteCode": s.trust_remote_code,
                "engine": s.engine, "contextBudgetTokens": s.context_budget or "auto",
                "contextDefinitions": s.context_definitions,
                "contextOpenFiles": s.context_open_files,
                "contextRecentEdits": s.context_recent_edits,
                "contextSimilarCode": s.context_similar_code}

    def _receive_settings(self, payload: Any) -> bool:
        """Apply settings from any source; ``False`` when the payload held none."""
        try:
            section = section_of(payload)
        except SettingsShapeError as exc:
            self._report_problems([str(exc)])
            return True
        if section is None:
            return False
        self._apply_settings(section)
        return True

    def _apply_settings(self, section: dict[str, Any]) -> None:
        old = self.settings
        messages: list[str] = []
        if section.get("trustRemoteCode") is True and not self.allow_remote_code:
            messages.append(REMOTE_CODE_REFUSED)
        ignored = sorted(k for k in section if k in self.pinned and k != "trustRemoteCode")
        if ignored:
            log.info("settings %s are fixed by the command line; ignoring the editor's", ignored)
        new, problems = merge(old, {k: v for k, v in section.items() if k not in self.pinned})
        new, budget = check_budget(new, old, *self._model_facts())
        messages.extend(p.message() for p in problems + budget)
        self._report_problems(messages)
        self.settings = new
        if new != old:
            self.suggestions = SuggestionCache(self.suggestions.capacity)
            log.info("settings now %s", self._settings_json())

    def _model_facts(self) -> tuple[str | None, int | None]:
        """Where the loaded model runs and its window; ``(None, None)`` before it loads."""
        engine = self.host.engine
        if engine is None:
            return ("cpu" if self.settings.device == "cpu" else None), None
        return _device_type(engine), engine.window

    def _check_budget(self) -> None:
        """Re-check the token budget once the model (and its window) is known."""
        new, problems = check_budget(self.settings, Settings(), *self._model_facts())
        if problems:
            self._report_problems([p.message() for p in problems])
            self.settings = new

    def _report_problems(self, messages: list[str]) -> None:
        """Log every refused setting; show each distinct one to the user once per session."""
        for message in messages:
            log.warning("settings: %s", message)
        fresh = [m for m in messages if m not in self._shown_problems]
        if not fresh:
            return
        if len(self._shown_problems) + len(fresh) > MAX_REMEMBERED_PROBLEMS:
            self._shown_problems.clear()
        self._shown_problems.update(fresh)
        self._show(types.MessageType.Warning, "Seam settings: " + " ".join(
            m if m.endswith(".") else m + "." for m in fresh))

    async def _pull_configuration(self) -> None:
        if not self._client_supports("workspace.configuration"):
            return
        try:
            result = await asyncio.wait_for(self.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section="seam")])),
                CONFIG_PULL_TIMEOUT_S)
        except Exception as exc:
            log.warning("workspace/configuration failed: %s", type(exc).__name__)
            return
        if isinstance(result, (list, tuple)) and result and isinstance(result[0], dict):
            # The client answers with the section's contents (not wrapped in "seam").
            payload = result[0]
            if "seam" not in payload:
                payload = {"seam": payload}
            self._receive_settings(payload)

    async def on_configuration(self, params: types.DidChangeConfigurationParams) -> None:
        old_key = self.settings.model_key
        if not self._receive_settings(params.settings):
            await self._pull_configuration()
        if self._load_started and self.settings.model_key != old_key:
            self._start_load()

    # ----- documents -----------------------------------------------------------------------

    def on_open(self, params: types.DidOpenTextDocumentParams) -> None:
        doc = self.documents.open(params.text_document)
        log.info("opened %s (%s, %d chars)", doc.uri, doc.language_id, len(doc.text))

    def on_change(self, params: types.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        before = self.documents.get(uri)
        old_text = before.text if before is not None else None
        try:
            doc = self.documents.change(params)
        except PositionError as exc:
            # The client and server disagree on the text: drop it until the client reopens it.
            log.error("edit to %s names no place in the text (%s); closing it", uri, exc)
            self.documents.close(uri)
            return
        if doc is None:
            log.warning("change to a document that is not open: %s", uri)
        elif old_text is not None:
            self._remember_edit(doc, old_text, params.content_changes)

    def _remember_edit(self, doc: Document, old_text: str, changes: Any) -> None:
        """Put the edited lines into the ring of recent edits (project context)."""
        if doc.language_id not in self.settings.languages:
            return
        new_text = model_text.for_model(doc.text)
        if len(changes) == 1 and isinstance(changes[0], types.TextDocumentContentChangePartial):
            change = changes[0]
            first = change.range.start.line
            old_end = max(first, change.range.end.line) + 1
            new_end = first + len(model_text.for_model(change.text).split("\n"))
            self.context.ring.record(doc.uri, new_text, first, old_end, new_end)
        else:
            self.context.ring.record_text_change(doc.uri, model_text.for_model(old_text),
                                                 new_text)

    def on_close(self, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        self.decoder.supersede(uri)
        self.suggestions.forget(uri)
        self.requests.forget(uri)
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
        engine = self.host.engine
        runtime = None if engine is None else RuntimeInfo(
            str(engine.backend.engine), engine.backend.device, engine.backend.description,
            engine.window)
        return StatusReply(self.host.state, self._settings_json(), tuple(self.recent),
                           tuple(self.decoder.finished), tuple(self.decoder.running()),
                           self.decoder.idle(), len(self.documents), runtime).to_json()

    # ----- planning requests -----------------------------------------------------------------

    def _planner_of(self, engine: Engine, policy: EditorPolicy) -> AnchorPlanner | None:
        """The per-document prompt starts, for this engine and the context in force."""
        sources = context_sources(self.settings, _device_type(engine))
        return self.requests.anchors(engine, policy, context_budget(policy, sources))

    def _open_documents(self) -> list[OpenDocument]:
        """The open documents of completed languages, in the order they were opened."""
        languages = self.settings.languages
        return [OpenDocument(d.uri, model_text.for_model(d.text), d.language_id)
                for d in self.documents.all() if d.language_id in languages]

    def _plan(self, engine: Engine, uri: str, text: str, offset: int,
              left_start: int | None = None) -> Planned:
        """The request a completion at ``offset`` of ``text`` makes (``request_plan``)."""
        return self.requests.plan(engine, self.settings, uri, text, offset,
                                  self._open_documents(), left_start=left_start)

    def on_cursor(self, params: Any) -> None:
        """The cursor moved or rests: warm the prompt there while the worker is idle, then
        widen the document's context (both give way to any request)."""
        try:
            message = CursorMessage.from_json(params)
        except MessageError as exc:
            log.warning("dropped a seam/cursor: %s", exc)
            return
        uri = message.uri
        position = types.Position(line=message.line, character=message.character)
        doc = self.documents.get(uri)
        engine = self.host.engine
        if doc is None or engine is None or doc.language_id not in self.settings.languages:
            return
        try:
            cur = doc.cursor(position)
        except PositionError:
            return
        text = doc.text
        self.context.visit(uri, cur.line)
        if self.suggestions.lookup(uri, text[:cur.offset], text[cur.offset:]) is not None:
            return  # answered from the suggestion cache already
        planned = self._plan(engine, uri, text, cur.offset)
        # Warm the prompt the request here would run now: without the project context
        # while that is not cached (see `_runnable`); the context comes after.
        request, deferred = self._runnable(engine, planned)
        planner = self._planner_of(engine, planned.policy)
        wider = planner.wider(uri, request.left, len(request.left)) if planner else None
        # The widened prompt starts higher, which can change what the project context
        # leaves out: plan it as the request that will be made there.
        widened = (self._plan(engine, uri, text, cur.offset, left_start=wider).request
                   if wider is not None else None)

        def warm(cancel: threading.Event) -> None:
            if engine.warm(request, cancel.is_set):
                log.info("warmed the prompt at %s:%d:%d%s", uri, position.line + 1,
                         position.character + 1,
                         " (the project context is not cached yet: without it)"
                         if deferred is not None else "")

        # A request at this cursor waits for this warm-up instead of stopping it: it runs
        # the same prompt, and work stopped inside a llama.cpp batch would be lost.
        self.decoder.background(uri, ("warm", uri), warm, share_key=planned.share_key,
                                priority=Priority.WARM, prepares=True)
        if widened is None and deferred is None:
            return

        def widen(cancel: threading.Event) -> None:
            if deferred is not None:
                # The context on the narrow prompt first: requests here carry it once that
                # short run is done (seconds on a CPU), not only once the whole widened prompt
                # is (often longer than the user rests); the widened prompt then shares the
                # context's cached beginning and runs only its own left context.
                if not engine.warm(deferred, cancel.is_set):
                    return
                log.info("warmed the project context at %s:%d:%d", uri, position.line + 1,
                         position.character + 1)
            # Forked, not cropped: the narrower prompt serves requests until the widened one
            # is cached and adopted, and a request that interrupts the widening needs it.
            if widened is not None and planner is not None and \
                    engine.warm(widened, cancel.is_set, keep_cached=True):
                self.call_in_loop(lambda: planner.adopt(uri, request.left, wider))
                log.info("widened the prompt at %s:%d:%d", uri, position.line + 1,
                         position.character + 1)

        self.decoder.background(uri, ("widen", uri), widen, priority=Priority.CONTEXT)

    def _runnable(self, engine: Engine, planned: Planned
                  ) -> tuple[CompletionRequest, CompletionRequest | None]:
        """``(request, deferred)``: the request to run now, and the planned one with its
        project context when that context is not in the model's cache yet (it would cost
        more than ``CONTEXT_SLACK_TOKENS``): then the request goes without it and the
        context is run into the cache in the background, so it never delays a suggestion."""
        request = planned.request
        if request.context_budget and engine.uncached(request) > \
                engine.uncached(planned.without_context()) + CONTEXT_SLACK_TOKENS:
            return planned.without_context(), request
        return request, None

    def _prefetch(self, engine: Engine, uri: str, text: str, offset: int, middle: str) -> None:
        """Decode, in the background, the suggestion the user gets after accepting ``middle``
        (llama.vim's speculative FIM); it lands in the suggestion cache, or a request that
        comes while it runs adopts it."""
        after = text[:offset] + middle + text[offset:]
        cursor = offset + len(middle)
        planned = self._plan(engine, uri, after, cursor)
        # The prompt the request after accepting would run (without an uncached project
        # context), so that this prefetch is what it adopts or finds in the cache.
        request, _ = self._runnable(engine, planned)
        share_key = planned.share_key
        left_doc, right_doc = after[:cursor], after[cursor:]

        def prefetch(cancel: threading.Event) -> CompletionResult:
            res = engine.complete(request, cancel=cancel.is_set)
            if res.stop not in (StopReason.CANCELLED, StopReason.TIME):
                # No middle is an answer too: the request there need not ask the model.
                found = model_text.for_document(res.middle or "", model_text.line_break_of(text))
                self.call_in_loop(lambda: self.suggestions.put(uri, left_doc, right_doc, found))
            return res

        self.decoder.background(uri, ("prefetch", uri), prefetch, share_key=share_key,
                                priority=Priority.PREFETCH)

    async def _suggest(self, uri: str, position: types.Position
                       ) -> tuple[Document, Suggestion] | None:
        """The middle for ``uri`` at ``position``, or ``None`` (reason logged), in steps: the
        place asked about, the suggestion cache, the model's decode, the answer."""
        t0 = time.perf_counter()
        place = self._place(uri, position)
        if place is None:
            return None
        doc, cur = place
        text = doc.text
        self.context.visit(uri, cur.line)
        left, right = text[:cur.offset], text[cur.offset:]
        cached = self.suggestions.lookup(uri, left, right)
        if cached is not None:
            # Typing through a shown suggestion (or asking where a prefetch answered): no
            # model work, and the background work that filled the cache goes on.
            self._record(uri, t0, CompletionSource.TYPED_THROUGH, "cache", tokens=0)
            return (doc, Suggestion(cached, cur.offset, cur.line_end)) if cached else None
        engine = self.host.engine
        if engine is None:
            state = self.host.state
            log.info("no completion yet: model is %s (%s)", state.state, state.message)
            return None
        ask = _Ask(uri, doc, text, cur, left, right, model_text.line_break_of(text), t0)
        planned = self._plan(engine, uri, text, cur.offset)
        request, deferred = self._runnable(engine, planned)
        outcome = await self._decode(engine, ask, planned, request)
        if outcome is None:
            return None
        resume_ms = (time.perf_counter() - outcome.finished_at) * 1000.0
        if deferred is not None:
            self._warm_later(engine, uri, deferred)
        middle = self._middle_of(engine, ask, planned, outcome, resume_ms,
                                 deferred=deferred is not None)
        if middle is None:
            return None
        return self._answer(engine, ask, planned.policy, middle)

    def _place(self, uri: str, position: types.Position) -> tuple[Document, Cursor] | None:
        """The open document and the cursor in it, or ``None`` when there is nothing to
        complete there (the reason logged)."""
        doc = self.documents.get(uri)
        if doc is None:
            log.warning("completion for a document that is not open: %s", uri)
            return None
        if doc.language_id not in self.settings.languages:
            log.info("no completion: language %r is not in seam.languages %s",
                     doc.language_id, list(self.settings.languages))
            return None
        try:
            return doc, doc.cursor(position)
        except PositionError as exc:
            log.warning("no completion for %s: %s", uri, exc)
            return None

    async def _decode(self, engine: Engine, ask: _Ask, planned: Planned,
                      request: CompletionRequest) -> Outcome | None:
        """Run ``request`` on the worker (``None`` when it failed, logged). Partial middles
        and the final one go into the suggestion cache as they come, so the rest of an early
        answer serves the user's next keystrokes; an early answer's final middle is then
        prefetched past."""
        uri, left, right, policy = ask.uri, ask.left, ask.right, planned.policy

        def store(middle: str) -> None:  # partial middles and final results, on the loop
            if middle:
                self.suggestions.put(uri, left, right,
                                     model_text.for_document(middle, ask.line_break))

        def final(res: CompletionResult) -> None:
            if res.middle and res.stop != StopReason.CANCELLED:
                store(res.middle)
                if policy.early and self.documents.get(uri) is ask.doc:
                    self._prefetch(engine, uri, left + right, len(left),
                                   model_text.for_document(res.middle, ask.line_break))

        try:
            return await self.decoder.run(uri, engine, request, share_key=planned.share_key,
                                          early=policy.early, on_partial=store,
                                          on_final=final)
        except asyncio.CancelledError:
            self._record(uri, ask.t0, CompletionSource.MODEL, "cancelled-by-client")
            raise
        except Exception as exc:
            log.error("decode failed for %s: %s", uri, type(exc).__name__, exc_info=exc)
            self._record(uri, ask.t0, CompletionSource.MODEL, "error",
                         error=type(exc).__name__)
            return None

    def _middle_of(self, engine: Engine, ask: _Ask, planned: Planned, outcome: Outcome,
                   resume_ms: float, *, deferred: bool) -> str | None:
        """The middle a decode answered with (the model's text, line breaks not yet the
        document's), with its timings recorded; ``None`` when there is none to show."""
        uri, t0, policy = ask.uri, ask.t0, planned.policy
        # What the project context held (the planned one, also when it was deferred).
        context = {"context_files": tuple(f.path for f in planned.request.context_files),
                   "context_sources": dict(planned.context.tokens),
                   "context_deferred": deferred}
        if outcome.partial is not None:
            self._record(uri, t0, CompletionSource.EARLY, "line", queue_ms=outcome.queue_ms,
                         resume_ms=resume_ms, scope=policy.scope, **context)
            return outcome.partial
        res = outcome.result
        if res is None:
            self._record(uri, t0, CompletionSource.MODEL, "superseded",
                         queue_ms=outcome.queue_ms)
            return None
        self._record(uri, t0, CompletionSource.MODEL, res.stop, queue_ms=outcome.queue_ms,
                     setup_ms=res.setup_ms, model_ms=res.model_ms,
                     constraint_ms=res.constraint_ms, tokens=res.tokens,
                     resume_ms=resume_ms, mode=res.mode, scope=policy.scope,
                     prompt_tokens=res.prompt_tokens, cached_tokens=engine.step_model.reused,
                     context_tokens=res.context_tokens, **context)
        if not res.middle or res.stop == StopReason.CANCELLED:
            if res.stop not in (StopReason.CANCELLED, StopReason.TIME):
                self.suggestions.put(uri, ask.left, ask.right, "")  # asked again: no model work
            return None
        return res.middle

    def _answer(self, engine: Engine, ask: _Ask, policy: EditorPolicy, middle: str
                ) -> tuple[Document, Suggestion] | None:
        """Cache the middle and return it, unless the document changed meanwhile; prefetch
        the suggestion after it (an early answer's was prefetched when its decode ended)."""
        middle = model_text.for_document(middle, ask.line_break)
        self.suggestions.put(ask.uri, ask.left, ask.right, middle)
        if self.documents.get(ask.uri) is not ask.doc or ask.doc.text is not ask.text:
            # The text changed while decoding; a newer request will follow the edit.
            log.info("document %s changed during decode; answer dropped", ask.uri)
            return None
        if not policy.early:
            self._prefetch(engine, ask.uri, ask.text, ask.cursor.offset, middle)
        return ask.doc, Suggestion(middle, ask.cursor.offset, ask.cursor.line_end)

    def _warm_later(self, engine: Engine, uri: str, request: CompletionRequest) -> None:
        """Run ``request``'s prompt (with its project context) into the model's cache when
        the worker is idle."""
        def warm(cancel: threading.Event) -> None:
            engine.warm(request, cancel.is_set)

        self.decoder.background(uri, ("context", uri), warm, priority=Priority.CONTEXT)

    def _record(self, uri: str, t0: float, source: CompletionSource, stop: str,
                **fields: Any) -> None:
        """Remember how a request was answered (``seam/status``'s ``recent``) and log it;
        ``fields`` are :class:`CompletionRecord`'s optional ones."""
        total = (time.perf_counter() - t0) * 1000.0
        for key, value in fields.items():
            if isinstance(value, enum.Enum):  # the record holds the plain names
                fields[key] = value.value
        record = CompletionRecord(uri, source, str(stop), total,
                                  total - (fields.get("model_ms") or 0.0), **fields)
        self.recent.append(record)
        log.info("completion %s", record.to_json())
