"""The Seam language server: the LSP session (lifecycle, settings, documents, model loading)
in front of the completion service.

``SeamServer`` is pygls's ``LanguageServer`` with Seam's handlers. What a completion is made
of is :class:`~lsp_server.completion_service.CompletionService` (the answer), with the planner
(``request_plan``), the background work (``background``) and the one module that calls the
engine (``engine_work``); this class creates it and delegates to it; it never imports the
server, and posts to it through ``call_in_loop``. The settings' arrival, validation and
refusals are ``session_settings``'.

Requests never wait for the model to load and never fail on odd input: a document that is not
open, not in an enabled language, a position outside the text or inside a UTF-16 surrogate pair
all answer an empty list (and say why in the log). Only the model's own output is slow; every
decode runs on :class:`~lsp_server.jobs.JobScheduler`'s worker thread. What reaches this module
has passed the framing layer (``wire.framing``, ``wire.transport``) and the message and
lifecycle gate (``wire.protocol``); settings are validated on arrival (``settings``), each
refusal shown to the user once; the model never sees lone surrogates or ``\r`` line breaks
(``text``); and no setting can make a model run its own code unless the server was started
with ``--trust-remote-code``.

Seam's own messages, for editor status bars and benchmarks (``lsp_server.messages``, shown in
docs/INTERFACES.md): the ``seam/status`` notification whenever the model's state changes, the
``seam/status`` request (the state, settings, runtime, recent completions and decodes), and the
``seam/cursor`` notification from the editor when the cursor moves or rests, so that the
prompt there is in the model's cache before the request that follows.

Project context (``project``, planned in ``request_plan``): the definitions of the names a
document imports from the workspace folders the client announced (``workspaceFolders`` /
``rootUri``, ``workspace/didChangeWorkspaceFolders``; nothing outside them is read, see
``project.workspace``), the other open documents and the recently edited regions go before
the file in the prompt, steadiest first, so that the model's cache keeps them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from lsprotocol import types
from pygls.capabilities import ServerCapabilitiesBuilder
from pygls.lsp.server import LanguageServer

from fim.languages import checked_lsp_ids
from fim.version import __version__
from lsp_server.completion_service import CompletionService
from lsp_server.documents import PositionError
from lsp_server.load_progress import LoadProgress
from lsp_server.logs import EditorLogHandler
from lsp_server.messages import (
    CURSOR,
    STATUS,
    CursorMessage,
    MessageError,
    RuntimeInfo,
    StatusReply,
)
from lsp_server.model_host import HostState, LoadState, ModelHost
from lsp_server.session_settings import SessionSettings
from lsp_server.settings import (
    Settings,
    settings_json,
)
from lsp_server.wire.framing import DEFAULT_MAX_CONTENT_BYTES, FrameError, FrameErrorKind
from lsp_server.wire.jsonrpc import ErrorCode
from lsp_server.wire.protocol import SeamProtocol

log = logging.getLogger(__name__)

SERVER_NAME = "seam"
SERVER_VERSION = __version__
CONFIG_PULL_TIMEOUT_S = 5.0



#: The session's handlers: (LSP method, the capability options it announces, the
#: ``SeamServer`` method that handles it).
HANDLERS: tuple[tuple[str, Any, str], ...] = (
    (types.INITIALIZE, None, "on_initialize"),
    (types.INITIALIZED, None, "on_initialized"),
    (types.SHUTDOWN, None, "on_shutdown"),
    (types.WORKSPACE_DID_CHANGE_CONFIGURATION, None, "on_configuration"),
    (types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS, None, "on_workspace_folders"),
    (types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions(),
     "on_inline_completion"),
    (types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(resolve_provider=False),
     "on_completion"),
    (STATUS, None, "on_status"),
    (CURSOR, None, "on_cursor"),
)


def _plain(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` as a plain function: pygls tags handlers with attributes, which bound
    methods do not accept."""
    if asyncio.iscoroutinefunction(method):
        async def handler(params: Any = None) -> Any:
            return await method(params)
    else:
        def handler(params: Any = None) -> Any:
            return method(params)
    return handler


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
        self.host = host or ModelHost()
        #: The completions; it posts to this session's event loop (``call_in_loop``).
        self.service = CompletionService(settings or Settings(), self.host, self.call_in_loop)
        #: The settings as they arrive (``session_settings``); keys the editor may never set
        #: (the settings table marks them), plus the caller's, are pinned.
        self.inbox = SessionSettings(
            self.service, self.host, frozenset(pinned or ()), allow_remote_code,
            lambda text: self._show(types.MessageType.Warning, text), self._fetch_configuration)
        self.max_content_bytes = max_content_bytes
        self.documents = self.service.documents
        self.folders = self.service.folders
        self.progress = LoadProgress(lambda: self.work_done_progress, lambda: self.host.state,
                                     self.call_in_loop)
        self.host.set_listeners(self._state_changed, self.progress.report)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._load_started = False  # settings that arrive before `initialized` load nothing
        self._log_handler: EditorLogHandler | None = None
        self.exit_code: int | None = None  # set by the transport when the session is over
        self._register()

    @property
    def settings(self) -> Settings:
        """The settings in force (the completion service plans with them)."""
        return self.service.settings

    @settings.setter
    def settings(self, value: Settings) -> None:
        self.service.settings = value

    # ----- plumbing ------------------------------------------------------------------------

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """The event loop this session runs on (where messages to the client are sent)."""
        self._loop = loop

    def end_session(self) -> None:
        """The client is gone: stop decoding for it and stop talking to it."""
        self.service.shutdown()
        if self._log_handler is not None:
            logging.getLogger().removeHandler(self._log_handler)
            self._log_handler = None
        self.host.set_listeners(None, None, owner=self)
        self.host.close()
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
            if self.inbox.shown.fresh(["too-large"]):
                self._show(types.MessageType.Warning,
                           f"Seam skipped a message from the editor: {error.detail}. A "
                           "document that large gets no completions (raise the limit with "
                           "seam serve --max-message-mb).")

    def _register(self) -> None:
        """Every handler in :data:`HANDLERS`, one way. (Document sync is the protocol's: it
        routes ``didOpen``/``didChange``/``didClose`` to ``on_open``/``on_change``/``on_close``
        instead of pygls's own document store, see ``wire.protocol``.)"""
        for method, options, name in HANDLERS:
            self.feature(method, options)(_plain(getattr(self, name)))

    # ----- lifecycle -----------------------------------------------------------------------

    def on_initialize(self, params: types.InitializeParams) -> None:
        self._loop = asyncio.get_running_loop()
        encoding = ServerCapabilitiesBuilder.choose_position_encoding(params.capabilities)
        self.documents.encoding = encoding
        self.folders.announce(params.workspace_folders, params.root_uri, params.root_path)
        self.inbox.receive(params.initialization_options)
        log.info("initialized: encoding %s, settings %s, workspace %s", encoding,
                 settings_json(self.settings), [str(f.root) for f in self.folders.folders])

    def on_workspace_folders(self, params: types.DidChangeWorkspaceFoldersParams) -> None:
        for folder in params.event.removed or []:
            self.folders.remove(folder.uri)
        for folder in params.event.added or []:
            if self.folders.add(folder.uri, folder.name) is None:
                log.warning("workspace folder %s is not a local directory; ignored", folder.uri)
        self.service.folders_changed(removed=bool(params.event.removed))

    async def on_initialized(self, params: types.InitializedParams) -> None:
        await self.inbox.pull()
        self._start_load()

    def on_shutdown(self, params: Any = None) -> None:
        self.service.shutdown()
        self.host.close()  # the vLLM reconnect timer: no one to tell any more

    def _start_load(self) -> None:
        self._load_started = True
        s = self.settings
        self.host.set_threads(s.threads)  # a TCP server's host may keep a pin from before
        self.host.set_slow_after(s.vllm_slow_after_ms / 1000)
        self.host.set_fallback(s.fallback, s.local_spec)
        state = self.host.state
        bar = self._client_supports("window.work_done_progress")
        if self.host.key == s.model_key and state.state in (LoadState.LOADING, LoadState.READY,
                                                            LoadState.FALLBACK):
            # A new session of a TCP server with the model its predecessor loaded.
            if state.state is LoadState.LOADING:
                self.progress.begin(s.model, bar)
            self._state_changed(state)
            return
        self.progress.begin(s.model, bar)
        self.host.load(s.model, device=s.device, dtype=s.dtype,
                       trust_remote_code=s.trust_remote_code, engine=s.engine,
                       window=s.context_tokens, server=s.remote_server,
                       api_key=s.remote_api_key, server_model=s.served_model,
                       template=s.fim_template)

    def _client_supports(self, path: str) -> bool:
        node: Any = self.client_capabilities
        for part in path.split("."):
            node = getattr(node, part, None)
            if node is None:
                return False
        return bool(node)

    def _state_changed(self, state: HostState) -> None:
        def notify() -> None:
            self.protocol.notify(STATUS, state.as_json())
            if state.state in (LoadState.READY, LoadState.ERROR, LoadState.FALLBACK):
                self.progress.end(state)
            if state.state is LoadState.READY:
                self.inbox.check_budget()
            if state.state is LoadState.ERROR:
                self.window_show_message(types.ShowMessageParams(
                    type=types.MessageType.Error, message=state.message))

        self.call_in_loop(notify)

    # ----- settings ------------------------------------------------------------------------

    async def _fetch_configuration(self) -> Any:
        """The client's ``seam`` section (``workspace/configuration``), or ``None``."""
        if not self._client_supports("workspace.configuration"):
            return None
        try:
            return await asyncio.wait_for(self.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section="seam")])),
                CONFIG_PULL_TIMEOUT_S)
        except Exception as exc:
            log.warning("workspace/configuration failed: %s", type(exc).__name__)
            return None

    async def on_configuration(self, params: types.DidChangeConfigurationParams) -> None:
        old_key = self.settings.model_key
        if not self.inbox.receive(params.settings):
            await self.inbox.pull()
        if self._load_started and self.settings.model_key != old_key:
            self._start_load()

    # ----- documents -----------------------------------------------------------------------

    def on_open(self, params: types.DidOpenTextDocumentParams) -> None:
        doc = self.documents.open(params.text_document)
        self.service.opened(doc)
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
            self.service.remember_edit(doc, old_text, params.content_changes)

    def on_close(self, params: types.DidCloseTextDocumentParams) -> None:
        self.service.close(params.text_document.uri)

    # ----- completions ---------------------------------------------------------------------

    async def on_inline_completion(
        self, params: types.InlineCompletionParams
    ) -> types.InlineCompletionList:
        # Asked for explicitly (VS Code asks again so for the next suggestion when it has
        # one): the answer waits for the place's ranked alternatives.
        trigger = params.context  # the LSP's name for how the request was triggered
        invoked = (trigger is not None and trigger.trigger_kind
                   == types.InlineCompletionTriggerKind.Invoked)
        found = await self.service.suggest(params.text_document.uri, params.position,
                                           invoked=invoked)
        if found is None:
            return types.InlineCompletionList(items=[])
        doc, s = found
        rest_of_line = doc.text[s.cursor_offset:s.line_end]
        where = types.Range(start=doc.position_at(s.cursor_offset),
                            end=doc.position_at(s.line_end))
        # Best first: editors show the first and cycle through the rest.
        return types.InlineCompletionList(items=[
            types.InlineCompletionItem(insert_text=middle + rest_of_line, range=where)
            for middle in (s.middle, *s.alternatives)])

    async def on_completion(self, params: types.CompletionParams) -> types.CompletionList:
        found = await self.service.suggest(params.text_document.uri, params.position)
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
            str(engine.runtime.engine), engine.runtime.device, engine.runtime.description,
            engine.window)
        jobs = self.service.jobs
        return StatusReply(self.host.state, settings_json(self.settings),
                           tuple(self.service.recent), tuple(jobs.finished),
                           tuple(jobs.running()),
                           jobs.idle() and not self.service.edit_rests.pending(),
                           len(self.documents),
                           runtime, checked_lsp_ids()).to_json()

    def on_cursor(self, params: Any) -> None:
        """The cursor moved or rests (``seam/cursor``): the service warms the prompt there."""
        try:
            message = CursorMessage.from_json(params)
        except MessageError as exc:
            log.warning("dropped a seam/cursor: %s", exc)
            return
        self.service.cursor(message)
