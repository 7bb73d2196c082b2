"""The completion service: from a cursor in an open document to the middle shown there.

It exists apart from the pygls class (``server.SeamServer``, which keeps the protocol's
handlers and delegates here) so that what makes a completion can be read without the
protocol, and the protocol without it. It knows nothing of the server: what must run on the
event loop (where pygls writes to the client, and where the suggestion cache and the prompt
anchors are touched) it hands to the ``post`` callback it was given.

A request goes in steps (:meth:`CompletionService.suggest`): the place asked about, the
suggestion cache, the plan (``request_plan``: policy, prompt anchor, project context), the
prompt to run (built once, and handed to the engine so that it is not built again), the
decode on the worker (``jobs``), and the answer. Around it, on the same worker and giving way
to any request: the prompt where the cursor rests is warmed and widened (:meth:`cursor`), the
suggestion after a shown one is prefetched (:meth:`_prefetch_past`, the one place that
decides when), and a project context that was not in the model's cache is warmed after the
request that went without it.

Several suggestions per place (the ``suggestions`` setting, ``fim.alternatives``): an
automatic request is answered with the greedy middle at once, and the ranked alternatives for
that place are decoded as background work (:meth:`_rank_later`), so that the next request there
(typing through, the editor asking again) gets them all, best first; a request the user made
explicitly where one suggestion is shown already (``invoked``: VS Code asks again so when it
has one item and the user wants the next) adopts or runs that search and waits for it.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from fim.alternatives import Ranking
from fim.options import StopReason
from lsp_server import text as model_text
from lsp_server.documents import Cursor, Document, DocumentStore, PositionError
from lsp_server.jobs import JobScheduler, Outcome, Priority
from lsp_server.messages import CompletionRecord, CompletionSource, CursorMessage
from lsp_server.model_host import ModelHost
from lsp_server.project.recent_edits import EditRing
from lsp_server.project.sources import ContextCollector, OpenDocument
from lsp_server.project.workspace import Workspace
from lsp_server.request_plan import Planned, RequestPlanner, context_budget, device_type
from lsp_server.settings import Settings, context_sources
from lsp_server.suggestions import SuggestionCache

if TYPE_CHECKING:  # types only: fim.api is imported when a model loads
    from fim.api import CompletionRequest, CompletionResult, Engine
    from fim.editor_policy import EditorPolicy
    from fim.templates import Prompt
    from lsp_server.prompt_anchors import AnchorPlanner

log = logging.getLogger(__name__)

#: Completions remembered for ``seam/status``.
RECENT_TIMINGS = 256
#: Extra prompt tokens a request may run to include the project context; when the context
#: would cost more (it is not in the model's cache yet), the request goes without it and the
#: context is run into the cache in the background, so it never delays a suggestion.
CONTEXT_SLACK_TOKENS = 16

#: Runs a function on the event loop thread (never raises; a closed loop drops it).
Post = Callable[[Callable[[], None]], None]


@dataclass(frozen=True)
class Suggestion:
    """A middle to insert at an offset of a document, and the place's other suggestions
    (best first after ``middle``)."""

    middle: str
    cursor_offset: int
    line_end: int
    alternatives: tuple[str, ...] = ()


@dataclass(frozen=True)
class Runnable:
    """The request to run now, and its prompt when it was built to decide that (handed on to
    the engine, which builds it only when it is ``None``); with the planned request and its
    prompt when its project context was deferred (not cached yet: warmed after)."""

    request: CompletionRequest
    prompt: Prompt | None = None
    deferred: CompletionRequest | None = None
    deferred_prompt: Prompt | None = None


@dataclass(frozen=True)
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


class CompletionService:
    """One session's completions: its documents, caches, worker and planning.

    ``settings`` is replaced by the server when the editor changes them (then
    :meth:`reset_suggestions`); ``host`` is the model host, shared between the sessions of a
    TCP server; ``post`` runs a function on the event loop (see the module docstring).
    """

    def __init__(self, settings: Settings, host: ModelHost, post: Post) -> None:
        self.settings = settings
        self.host = host
        self._post = post
        self.documents = DocumentStore()
        self.suggestions = SuggestionCache()
        self.jobs = JobScheduler()
        self.recent: deque[CompletionRecord] = deque(maxlen=RECENT_TIMINGS)
        self.folders = Workspace()
        self.context = ContextCollector(self.folders, EditRing())
        self.requests = RequestPlanner(self.context)

    # ----- the session's state ---------------------------------------------------------------

    def reset_suggestions(self) -> None:
        """Forget every cached suggestion (the settings that made them changed)."""
        self.suggestions = SuggestionCache(self.suggestions.capacity)

    def folder_removed(self) -> None:
        """A workspace folder left: nothing made with its code may be shown or run any more.
        The sources drop what they hold of it themselves (``Workspace.subscribe``); here go the
        suggestions decoded with it in the prompt and the queued background work (warm-ups,
        prefetches) planned with it."""
        self.reset_suggestions()
        self.jobs.cancel_all()

    def close(self, uri: str) -> None:
        """The document was closed: stop its decode and forget what was kept for it."""
        self.jobs.supersede(uri)
        self.suggestions.forget(uri)
        self.requests.forget(uri)
        self.documents.close(uri)

    def shutdown(self) -> None:
        self.jobs.shutdown()

    def remember_edit(self, doc: Document, old_text: str,
                      changes: Sequence[types.TextDocumentContentChangeEvent]) -> None:
        """An edit changed ``doc`` from ``old_text``: put the edited lines into the ring of
        recent edits (project context)."""
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
            self.context.ring.record_text_change(
                doc.uri, model_text.for_model(old_text), new_text)

    # ----- planning --------------------------------------------------------------------------

    def _anchors_of(self, engine: Engine, policy: EditorPolicy) -> AnchorPlanner | None:
        """The per-document prompt starts, for this engine and the context in force."""
        sources = context_sources(self.settings, device_type(engine))
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

    @staticmethod
    def _runnable(engine: Engine, planned: Planned) -> Runnable:
        """What to run for ``planned``: without its project context when that context is
        not in the model's cache yet (it would cost more than ``CONTEXT_SLACK_TOKENS``).

        Each prompt built to decide it is built once and kept for the engine; the one
        without context only when the one with it is not cached (a cached one runs whatever
        the other costs), and none for a request without context (the worker builds it).
        """
        request = planned.request
        if not request.context_budget:
            return Runnable(request)
        prompt = engine.prompt_for(request)
        uncached = engine.uncached(request, prompt)
        if uncached > CONTEXT_SLACK_TOKENS:
            bare = planned.without_context()
            bare_prompt = engine.prompt_for(bare)
            if uncached > engine.uncached(bare, bare_prompt) + CONTEXT_SLACK_TOKENS:
                return Runnable(bare, bare_prompt, request, prompt)
        return Runnable(request, prompt)

    # ----- the cursor rests: warm and widen --------------------------------------------------

    def cursor(self, message: CursorMessage) -> None:
        """The cursor moved or rests: warm the prompt there while the worker is idle, then
        widen the document's context (both give way to any request)."""
        uri = message.uri
        doc = self.documents.get(uri)
        engine = self.host.engine
        if doc is None or engine is None or doc.language_id not in self.settings.languages:
            if engine is None:
                self.host.retry()  # a vLLM server that failed: back by the time one asks?
            return
        position = types.Position(line=message.line, character=message.character)
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
        run = self._runnable(engine, planned)
        where = f"{uri}:{position.line + 1}:{position.character + 1}"
        widen = self._widening(engine, uri, text, cur.offset, planned.policy, run, where)

        def warm(cancel: threading.Event) -> None:
            if self._warm(engine, run.request, cancel, prompt=run.prompt):
                log.info("warmed the prompt at %s%s", where,
                         " (the project context is not cached yet: without it)"
                         if run.deferred is not None else "")

        # A request at this cursor waits for this warm-up instead of stopping it: it runs
        # the same prompt, and work stopped inside a llama.cpp batch would be lost.
        self.jobs.background(uri, ("warm", uri), warm, share_key=planned.share_key,
                             priority=Priority.WARM, prepares=True)
        if widen is not None:
            self.jobs.background(uri, ("widen", uri), widen, priority=Priority.CONTEXT)

    def _widening(self, engine: Engine, uri: str, text: str, offset: int,
                  policy: EditorPolicy, run: Runnable, where: str
                  ) -> Callable[[threading.Event], None] | None:
        """The work after the warm-up: the deferred project context, then the prompt
        started higher in the document (``prompt_anchors``); ``None`` when there is none."""
        anchors = self._anchors_of(engine, policy)
        left = run.request.left
        wider = anchors.wider(uri, left, len(left)) if anchors else None
        # The widened prompt starts higher, which can change what the project context
        # leaves out: plan it as the request that will be made there.
        widened = (self._plan(engine, uri, text, offset, left_start=wider).request
                   if wider is not None else None)
        if widened is None and run.deferred is None:
            return None

        def widen(cancel: threading.Event) -> None:
            if run.deferred is not None:
                # The context on the narrow prompt first: requests here carry it once that
                # short run is done (seconds on a CPU), not only once the whole widened prompt
                # is (often longer than the user rests); the widened prompt then shares the
                # context's cached beginning and runs only its own left context.
                if not self._warm(engine, run.deferred, cancel, prompt=run.deferred_prompt):
                    return
                log.info("warmed the project context at %s", where)
            # Forked, not cropped: the narrower prompt serves requests until the widened one
            # is cached and adopted, and a request that interrupts the widening needs it.
            if widened is not None and anchors is not None and \
                    self._warm(engine, widened, cancel, keep_cached=True):
                self._post(lambda: anchors.adopt(uri, left, wider))
                log.info("widened the prompt at %s", where)

        return widen

    # ----- background work after an answer ---------------------------------------------------

    def _prefetch_past(self, engine: Engine, ask: _Ask, policy: EditorPolicy, middle: str, *,
                       decoded: bool) -> None:
        """The prefetch rule, in one place: the suggestion the user gets after accepting the
        one shown is decoded in the background (llama.vim's speculative FIM), past the whole
        ``middle`` (in the document's line breaks), while the document is still open.

        An early answer showed only the first line of a decode that went on: its prefetch
        waits for that decode's end (``decoded``), whatever the user typed meanwhile (typing
        through the suggestion leads to the same text). Any other answer is prefetched past
        when it is shown (``decoded`` false), which is only when the text did not change.
        """
        if decoded != policy.early or self.documents.get(ask.uri) is not ask.doc:
            return
        self._prefetch(engine, ask.uri, ask.text, ask.cursor.offset, middle)

    def _prefetch(self, engine: Engine, uri: str, text: str, offset: int, middle: str) -> None:
        """Decode the suggestion after ``middle`` is inserted at ``offset``; it lands in the
        suggestion cache, or a request that comes while it runs adopts it."""
        after = text[:offset] + middle + text[offset:]
        cursor = offset + len(middle)
        planned = self._plan(engine, uri, after, cursor)
        # The prompt the request after accepting would run (without an uncached project
        # context), so that this prefetch is what it adopts or finds in the cache.
        run = self._runnable(engine, planned)
        left_doc, right_doc = after[:cursor], after[cursor:]
        line_break = model_text.line_break_of(text)

        def prefetch(cancel: threading.Event) -> CompletionResult:
            try:
                res = engine.complete(run.request, cancel=cancel.is_set, prompt=run.prompt)
            except Exception as exc:
                self.host.report_failure(exc)  # a vLLM server gone, found without a request
                raise
            self._check_slow(res)
            if res.stop not in (StopReason.CANCELLED, StopReason.TIME):
                # No middle is an answer too: the request there need not ask the model.
                found = model_text.for_document(res.middle or "", line_break)
                self._post(lambda: self.suggestions.put(uri, left_doc, right_doc, found))
            return res

        self.jobs.background(uri, ("prefetch", uri), prefetch, share_key=planned.share_key,
                             priority=Priority.PREFETCH)

    def _wanted(self, engine: Engine | None) -> int:
        """How many suggestions a place offers: the setting, for constrained requests on an
        engine that ranks alternatives (``fim.alternatives``; not a vLLM server); else 1."""
        if (engine is None or not self.settings.constrained
                or not engine.features.ranks_alternatives):
            return 1
        return self.settings.suggestions

    @staticmethod
    def _ranked_key(planned: Planned, wanted: int) -> tuple:
        """The share key of the ranked search at a place: a request for it adopts it."""
        return ("ranked", wanted, planned.share_key)

    def _rank_later(self, engine: Engine, ask: _Ask, planned: Planned, run: Runnable,
                    wanted: int) -> None:
        """Decode the place's ranked alternatives when the worker is idle (the greedy path is
        in the model's cache: only the branches run); they land in the suggestion cache."""
        request = replace(run.request, alternatives=wanted, ranking=Ranking.GREEDY_FIRST)
        uri, left, right, line_break = ask.uri, ask.left, ask.right, ask.line_break

        def rank(cancel: threading.Event) -> CompletionResult:
            res = engine.complete(request, cancel=cancel.is_set, prompt=run.prompt)
            if not cancel.is_set() and res.alternatives:
                self._post(lambda: self._keep_ranked(uri, left, right, line_break, res))
            return res

        self.jobs.background(uri, ("ranked", uri), rank,
                             share_key=self._ranked_key(planned, wanted),
                             priority=Priority.ALTERNATIVES)

    def _keep_ranked(self, uri: str, left: str, right: str, line_break: str,
                     res: CompletionResult) -> tuple[str, ...]:
        """Put a ranked result's middles (in the document's line breaks, empty ones left
        out) into the suggestion cache for its place; the middles, best first."""
        middles = tuple(dict.fromkeys(
            model_text.for_document(a.middle, line_break) for a in res.alternatives
            if a.middle))
        if middles:
            self.suggestions.put(uri, left, right, middles[0], middles[1:])
        return middles

    def _warm_later(self, engine: Engine, uri: str, run: Runnable) -> None:
        """Run the deferred request's prompt (with its project context) into the model's
        cache when the worker is idle."""
        def warm(cancel: threading.Event) -> None:
            self._warm(engine, run.deferred, cancel, prompt=run.deferred_prompt)

        self.jobs.background(uri, ("context", uri), warm, priority=Priority.CONTEXT)

    # ----- a request -------------------------------------------------------------------------

    async def suggest(self, uri: str, position: types.Position, invoked: bool = False
                      ) -> tuple[Document, Suggestion] | None:
        """The middle for ``uri`` at ``position``, or ``None`` (reason logged), in steps: the
        place asked about, the suggestion cache, the model's decode, the answer.

        ``invoked``: the user asked explicitly (not as they type); where one suggestion is
        shown already, the answer waits for the place's ranked alternatives (see the module
        docstring)."""
        t0 = time.perf_counter()
        place = self._place(uri, position)
        if place is None:
            return None
        doc, cur = place
        text = doc.text
        self.context.visit(uri, cur.line)
        left, right = text[:cur.offset], text[cur.offset:]
        cached = self.suggestions.lookup_all(uri, left, right)
        # Asked explicitly where one suggestion is shown: the user wants the next one.
        wants_more = (invoked and self._wanted(self.host.engine) > 1 and cached is not None
                      and not cached.ranked and bool(cached.middles[0]))
        if cached is not None and not wants_more:
            # Typing through a shown suggestion (or asking where a prefetch answered): no
            # model work, and the background work that filled the cache goes on.
            self._record(uri, t0, CompletionSource.TYPED_THROUGH, "cache", tokens=0)
            first, *others = cached.middles
            return (doc, Suggestion(first, cur.offset, cur.line_end,
                                    tuple(m for m in others if m))) if first else None
        engine = self.host.engine
        if engine is None:
            state = self.host.state
            log.info("no completion yet: model is %s (%s)", state.state, state.message)
            self.host.retry()  # a vLLM server that failed: try it again
            return None
        ask = _Ask(uri, doc, text, cur, left, right, model_text.line_break_of(text), t0)
        planned = self._plan(engine, uri, text, cur.offset)
        run = self._runnable(engine, planned)
        wanted = self._wanted(engine)
        ranked = wants_more and wanted > 1
        share_key = planned.share_key
        if ranked:  # the ranked search now (adopting the one running in the background)
            run = replace(run, request=replace(run.request, alternatives=wanted,
                                               ranking=Ranking.GREEDY_FIRST))
            share_key = self._ranked_key(planned, wanted)
        outcome = await self._decode(engine, ask, planned, run, share_key=share_key,
                                     early=planned.policy.early and not ranked)
        if outcome is None:
            return None
        resume_ms = (time.perf_counter() - outcome.finished_at) * 1000.0
        if run.deferred is not None:
            self._warm_later(engine, uri, run)
        middle = self._middle_of(engine, ask, planned, outcome, resume_ms,
                                 deferred=run.deferred is not None)
        if middle is None:
            return None
        if ranked and outcome.result is not None and outcome.result.alternatives:
            middles = self._keep_ranked(uri, left, right, ask.line_break, outcome.result)
            if self.documents.get(uri) is not doc or doc.text is not text:
                log.info("document %s changed during decode; answer dropped", uri)
                return None
            self._prefetch_past(engine, ask, planned.policy, middles[0], decoded=False)
            return doc, Suggestion(middles[0], cur.offset, cur.line_end, middles[1:])
        answer = self._answer(engine, ask, planned.policy, middle)
        if answer is not None and wanted > 1:
            self._rank_later(engine, ask, planned, run, wanted)
        return answer

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

    async def _decode(self, engine: Engine, ask: _Ask, planned: Planned, run: Runnable, *,
                      share_key: Any, early: bool) -> Outcome | None:
        """Run the request on the worker (``None`` when it failed, logged). Partial middles
        and the final one go into the suggestion cache as they come, so the rest of an early
        answer serves the user's next keystrokes."""
        uri, left, right, policy = ask.uri, ask.left, ask.right, planned.policy

        def store(middle: str) -> None:  # partial middles and final results, on the loop
            if middle:
                self.suggestions.put(uri, left, right,
                                     model_text.for_document(middle, ask.line_break))

        def final(res: CompletionResult) -> None:
            if res.middle and res.stop != StopReason.CANCELLED:
                store(res.middle)
                self._prefetch_past(engine, ask, policy,
                                    model_text.for_document(res.middle, ask.line_break),
                                    decoded=True)

        try:
            return await self.jobs.run(uri, engine, run.request, share_key=share_key,
                                       early=early, on_partial=store, on_final=final,
                                       prompt=run.prompt)
        except asyncio.CancelledError:
            self._record(uri, ask.t0, CompletionSource.MODEL, "cancelled-by-client")
            raise
        except Exception as exc:
            log.error("decode failed for %s: %s", uri, type(exc).__name__, exc_info=exc)
            self.host.report_failure(exc)  # a vLLM server gone: the editor hears of it
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
                     prompt_tokens=res.prompt_tokens, cached_tokens=engine.cached_tokens,
                     context_tokens=res.project_tokens, **context)
        self._check_slow(res)
        if not res.middle or res.stop == StopReason.CANCELLED:
            if res.stop not in (StopReason.CANCELLED, StopReason.TIME):
                self.suggestions.put(uri, ask.left, ask.right, "")  # asked again: no model work
            return None
        return res.middle

    def _check_slow(self, res: CompletionResult) -> None:
        """A decode (the user's request or a prefetch) with not one token in its time budget:
        a long prompt, or a vLLM server too slow to use; the host finds out which in the
        background (``ModelHost.report_slow``) and tells the editor."""
        if res.stop == StopReason.TIME and not res.tokens:
            self.host.report_slow()

    def _warm(self, engine: Engine, request: CompletionRequest, cancel: threading.Event,
              **options: Any) -> bool:
        """``engine.warm``, on the worker; a warm-up that neither finished nor was cancelled
        has the host check the server (``ModelHost.report_slow``: a vLLM client's warm-up
        returns ``False`` when the server failed or stopped answering, and does not probe it
        itself; a local engine's host checks nothing), so a server that went away or became
        slow is reported while the user only moves the cursor."""
        done = engine.warm(request, cancel.is_set, **options)
        if not done and not cancel.is_set():
            self.host.report_slow()
        return done

    def _answer(self, engine: Engine, ask: _Ask, policy: EditorPolicy, middle: str
                ) -> tuple[Document, Suggestion] | None:
        """Cache the middle and return it, unless the document changed meanwhile; prefetch
        past it (``_prefetch_past``)."""
        middle = model_text.for_document(middle, ask.line_break)
        self.suggestions.put(ask.uri, ask.left, ask.right, middle)
        if self.documents.get(ask.uri) is not ask.doc or ask.doc.text is not ask.text:
            # The text changed while decoding; a newer request will follow the edit.
            log.info("document %s changed during decode; answer dropped", ask.uri)
            return None
        self._prefetch_past(engine, ask, policy, middle, decoded=False)
        return ask.doc, Suggestion(middle, ask.cursor.offset, ask.cursor.line_end)

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

