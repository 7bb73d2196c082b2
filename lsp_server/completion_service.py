"""The completion service: from a cursor in an open document to the middle shown there.

It exists apart from the pygls class (``server.SeamServer``, which keeps the protocol's
handlers and delegates here) so that what makes a completion can be read without the
protocol, and the protocol without it. It knows nothing of the server: what must run on the
event loop (where pygls writes to the client, and where the suggestion cache and the prompt
anchors are touched) it hands to the ``post`` callback it was given.

A request goes in steps (:meth:`CompletionService.suggest`), one path for every answer: the
place asked about, the suggestion cache, the plan (``request_plan``: made once per place and
reused), the decode on the worker (``jobs`` runs ``engine_work.Decode``, which decides there
whether the project context is cached yet and runs the engine), and the answer. What the
worker does besides, giving way to any request, is ``background``'s: the cursor's place warmed
and widened (:meth:`cursor`, or for a plain client where its last edit ended or the start of
the document it opened: ``edit_rests``), the suggestion after a shown one prefetched
(:meth:`_prefetch_past`, the one place that decides when), a project context that was not in
the model's cache warmed after the request that went without it.

Several suggestions per place (the ``suggestions`` setting, ``fim.alternatives``): an
automatic request is answered with the greedy middle at once, and the ranked alternatives for
that place are decoded as background work (``background.Rank``), so that the next request
there (typing through, the editor asking again) gets them all, best first; a request the user
made explicitly where one suggestion is shown already (``invoked``: VS Code asks again so when
it has one item and the user wants the next) adopts or runs that search and waits for it.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections import deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from lsprotocol import types

from fim.editor_policy import CursorKind
from fim.engine_interface import CompletionEngine
from fim.options import StopReason
from fim.request import CompletionResult
from lsp_server import background
from lsp_server import text as model_text
from lsp_server.background import Background, Place, Post, check_slow, ranked_key, ranked_middles
from lsp_server.documents import Cursor, Document, DocumentStore, PositionError, served
from lsp_server.edit_rests import EditRests
from lsp_server.engine_work import Decode
from lsp_server.jobs import JobScheduler, Outcome
from lsp_server.messages import CompletionRecord, CompletionSource, CursorMessage
from lsp_server.model_host import ModelHost
from lsp_server.project.recent_edits import EditRing
from lsp_server.project.sources import ContextCollector
from lsp_server.project.workspace import Workspace
from lsp_server.request_plan import OpenDocuments, Planned, RequestPlanner, Widening
from lsp_server.settings import Settings
from lsp_server.suggestions import Cached, SuggestionCache

log = logging.getLogger(__name__)

#: Completions remembered for ``seam/status``.
RECENT_TIMINGS = 256


@dataclass(frozen=True)
class Suggestion:
    """A middle to insert at an offset of a document, and the place's other suggestions
    (best first after ``middle``)."""

    middle: str
    cursor_offset: int
    line_end: int
    alternatives: tuple[str, ...] = ()


def _decoded(outcome: Outcome) -> bool:
    """The decode ran to an end (an empty middle included), neither superseded nor
    cancelled: its prompt is in the model's cache, the start of a widening."""
    return outcome.result is not None and outcome.result.stop != StopReason.CANCELLED


def _ended_at_once(outcome: Outcome) -> bool:
    """Greedy decoding ended with nothing to show (only blanks, if anything) because the
    model chose to end there or to write the code below again (the right-context stop cut
    it all): not out of time or tokens (a search would take as long again), not cancelled."""
    res = outcome.result
    return (outcome.partial is None and res is not None and not (res.middle or "").strip()
            and res.stop in (StopReason.EOS, StopReason.RIGHT_CONTEXT))


@dataclass(frozen=True)
class _Ask:
    """A completion request being answered: where, the text it was asked on, and when."""

    doc: Document
    text: str  # the document's text when asked (an edit meanwhile drops the answer)
    cursor: Cursor
    place: Place  # the text split at the cursor, where its suggestions are kept
    t0: float  # perf_counter when the request arrived

    @property
    def uri(self) -> str:
        return self.place.uri


class CompletionService:
    """One session's completions: its documents, suggestion cache, worker and planner.

    ``settings`` is replaced by the server when the editor changes them (then
    :meth:`reset_suggestions`); ``host`` is the model host, shared between the sessions of a
    TCP server; ``post`` runs a function on the event loop (see the module docstring).
    """

    def __init__(self, settings: Settings, host: ModelHost, post: Post) -> None:
        self.settings = settings
        self.host = host
        self.documents = DocumentStore()
        self.suggestions = SuggestionCache()
        self.jobs = JobScheduler()
        self.recent: deque[CompletionRecord] = deque(maxlen=RECENT_TIMINGS)
        self.folders = Workspace()
        self.project = ContextCollector(self.folders, EditRing())
        self.planner = RequestPlanner(self.project)
        self.background = Background(self.jobs, host, post, self._keep)
        self.edit_rests = EditRests(self._rest)

    # ----- the session's state ---------------------------------------------------------------

    def reset_suggestions(self) -> None:
        """Forget every cached suggestion (the settings that made them changed)."""
        self.suggestions = SuggestionCache(self.suggestions.capacity)

    def folders_changed(self, removed: bool) -> None:
        """A workspace folder came or left: no kept plan is reused. One that left: nothing
        made with its code may be shown or run any more. The sources drop what they hold of
        it themselves (``Workspace.subscribe``); here go the suggestions decoded with it in
        the prompt and the queued background work (warm-ups, prefetches) planned with it."""
        self.planner.reset()
        if removed:
            self.reset_suggestions()
            self.jobs.cancel_all()

    def folder_removed(self) -> None:
        self.folders_changed(removed=True)

    def opened(self, doc: Document) -> None:
        """A document was opened (other places' open files changed; a plain client rests here)."""
        self.planner.changed(doc.uri)
        self.edit_rests.opened(doc)

    def close(self, uri: str) -> None:
        """The document was closed: stop its decode and forget what was kept for it."""
        self.jobs.supersede(uri)
        self.edit_rests.closed(uri)
        self.suggestions.forget(uri)
        self.planner.forget(uri)
        self.documents.close(uri)

    def shutdown(self) -> None:
        self.jobs.shutdown()

    def remember_edit(self, doc: Document, old_text: str,
                      changes: Sequence[types.TextDocumentContentChangeEvent]) -> None:
        """An edit changed ``doc`` from ``old_text``: the planner records it (its plans of
        other documents are made again; the edited lines go into the ring of recent edits),
        and a plain client's cursor may rest at its end (``edit_rests``)."""
        if not served(self.settings.languages, doc.language_id):
            self.planner.changed(doc.uri)
            return
        change = changes[0] if len(changes) == 1 else None
        if isinstance(change, types.TextDocumentContentChangePartial):
            first = change.range.start.line
            self.planner.edited(self.project.ring, doc.uri, old_text, doc.text, first,
                                max(first, change.range.end.line) + 1, change.text)
        else:
            self.planner.edited(self.project.ring, doc.uri, old_text, doc.text)
        self.edit_rests.edited(doc, changes)

    def _keep(self, place: Place, middles: tuple[str, ...], ranked: bool) -> None:
        """Put a place's suggestions into the suggestion cache (``background.Keep``)."""
        self.suggestions.put(place.uri, place.left, place.right, middles[0],
                             middles[1:] if ranked else None)

    def _plan(self, engine: CompletionEngine, uri: str, text: str, offset: int,
              left_start: int | None = None, *, stops_work: bool = False) -> Planned:
        """The request a completion at ``offset`` of ``text`` makes (``request_plan``: kept per
        place). ``stops_work``: a rest's or a request's, which stop the worker's background
        work anyway: a new plan stops it first (``JobScheduler.clear_for_planning``)."""
        doc = self.documents.get(uri)
        language = doc.language.id if doc is not None else "python"
        if stops_work and not self.planner.is_kept(engine, self.settings, uri, text, offset,
                                                    language):
            self.jobs.clear_for_planning()
        return self.planner.plan(engine, self.settings, uri, text, offset,
                                 OpenDocuments(self.documents, self.settings.languages),
                                 left_start=left_start, language=language)

    # ----- the cursor rests: warm and widen --------------------------------------------------

    def cursor(self, message: CursorMessage) -> None:
        """The client says the cursor moved or rests (``seam/cursor``; from then on its edits
        are not taken for rests: ``edit_rests``)."""
        self.edit_rests.cursor_sent()
        self._rest(message)

    def _rest(self, message: CursorMessage) -> None:
        """The cursor rests at ``message``'s place: warm the prompt there while the worker is
        idle, then widen the document's prompt (``background.Background.at_cursor``)."""
        uri = message.uri
        doc = self.documents.get(uri)
        engine = self.host.engine
        if doc is None or engine is None or not served(self.settings.languages,
                                                       doc.language_id):
            if engine is None:
                self.host.retry()  # a vLLM server that failed: back by the time one asks?
            return
        position = types.Position(line=message.line, character=message.character)
        try:
            cur = doc.cursor(position)
        except PositionError:
            return
        text = doc.text
        self.project.visit(uri, cur.line)
        if self.suggestions.lookup(uri, text[:cur.offset], text[cur.offset:]) is not None:
            return  # answered from the suggestion cache already
        planned = self._plan(engine, uri, text, cur.offset, stops_work=True)
        self.background.at_cursor(engine, uri, planned,
                                  lambda: self._widening(engine, uri, text, cur.offset, planned),
                                  f"{uri}:{position.line + 1}:{position.character + 1}")

    def _widening(self, engine: CompletionEngine, uri: str, text: str, offset: int,
                  planned: Planned) -> background.Wider:
        """The widened prompt at ``planned``'s place (``None``: none wider), what adopts
        it once it is cached, and the document's base to hold after it."""
        widening = self.planner.wider(engine, self.settings, uri, planned)
        if widening is None:  # wide already (or as wide as it gets): hold what it holds
            base = self.planner.base(engine, uri, planned)
            return background.Wider(None, base=base and base.request,
                                    hold=lambda: base and self.planner.hold(uri, base))
        # Higher, the project context may leave out other things: plan the request made there.
        widened = self._plan(engine, uri, text, offset, left_start=widening.start)
        left = planned.request.left
        base = self.planner.base(engine, uri, widened, widening)
        return background.Wider(widened, lambda: self._adopt(uri, left, widening),
                                base and base.request,
                                lambda: base and self.planner.hold(uri, base))

    def _adopt(self, uri: str, left: str, widening: Widening | None) -> None:
        if widening is not None:
            self.planner.adopt(uri, left, widening)
            # Where the narrow window found nothing, asking again reads the wide one.
            self.suggestions.forget_empty(uri)

    # ----- a request -------------------------------------------------------------------------

    def _wanted(self, engine: CompletionEngine | None) -> int:
        """How many suggestions a place offers: the setting, for constrained requests on an
        engine that ranks alternatives (``fim.alternatives``; not a vLLM server); else 1."""
        if (engine is None or not self.settings.constrained
                or not engine.features.ranks_alternatives):
            return 1
        return self.settings.suggestions

    def _wants_more(self, cached: Cached | None, invoked: bool) -> bool:
        """Asked explicitly where one suggestion is shown: the user wants the next ones (the
        place's ranked alternatives), which the cache does not hold yet."""
        return (invoked and self._wanted(self.host.engine) > 1 and cached is not None
                and not cached.ranked and bool(cached.middles[0]))

    async def suggest(self, uri: str, position: types.Position, invoked: bool = False
                      ) -> tuple[Document, Suggestion] | None:
        """The middle for ``uri`` at ``position``, or ``None`` (reason logged), in steps: the
        place asked about, the suggestion cache, the model's decode, the answer.

        ``invoked``: the user asked explicitly (not as they type); where one suggestion is
        shown already, the answer waits for the place's ranked alternatives (see the module
        docstring)."""
        t0 = time.perf_counter()
        self.edit_rests.asked(uri)
        found = self._place(uri, position)
        if found is None:
            return None
        doc, cur = found
        text = doc.text
        self.project.visit(uri, cur.line)
        ask = _Ask(doc, text, cur, Place(uri, text[:cur.offset], text[cur.offset:],
                                         model_text.line_break_of(text)), t0)
        cached = self.suggestions.lookup_all(uri, ask.place.left, ask.place.right)
        wants_more = self._wants_more(cached, invoked)
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
        return await self._from_model(engine, ask, position, wants_more)

    async def _from_model(self, engine: CompletionEngine, ask: _Ask, position: types.Position,
                          wants_more: bool, *, retry: bool = True, rescue: bool = False
                          ) -> tuple[Document, Suggestion] | None:
        """The model's answer at ``ask``'s place on ``engine`` (``None``: none, reason
        logged).  When the engine fails on this request and the host then serves another one
        (``fallback: "local"`` with the local model loaded), the request is asked there once
        rather than lost.  ``rescue``: greedy decoding ended at once on this empty line, and
        the answer is the first line of the likeliest middle that writes something (below)."""
        uri, text, cur = ask.place.uri, ask.text, ask.cursor
        planned = self._plan(engine, uri, text, cur.offset, stops_work=True)
        wanted = self._wanted(engine)
        # Asked explicitly where one is shown: the ranked search now (adopting the one
        # running in the background); else the greedy middle, the ranked ones after.
        alternatives = wanted if wants_more and wanted > 1 else min(2 if rescue else 1, wanted)
        decode = Decode(engine, planned, alternatives, first_line=rescue)
        share_key = (("first line", *ranked_key(planned, alternatives)) if rescue
                     else ranked_key(planned, alternatives) if alternatives > 1
                     else planned.share_key)
        outcome = await self._decode(ask, planned, decode, share_key,
                                     early=planned.policy.early and alternatives == 1)
        if outcome is None:
            serving = self.host.engine
            if retry and serving is not None and serving is not engine:
                log.info("asking the engine that serves now (%s) instead",
                         serving.runtime.description)
                return await self._from_model(serving, ask, position, wants_more, retry=False,
                                              rescue=rescue)
            return None
        resume_ms = (time.perf_counter() - outcome.finished_at) * 1000.0
        deferred = decode.run is not None and decode.run.deferred is not None
        middle = self._middle_of(engine, ask, planned, outcome, resume_ms, deferred=deferred)
        if (middle is None and alternatives == 1 and wanted > 1 and _ended_at_once(outcome)
                and planned.policy.kind == CursorKind.EMPTY_LINE):
            # An empty line where the model would end at once shows nothing where the user
            # stopped to have something written. The ranked search puts an empty middle after
            # every one that writes something (``fim.alternatives``): answer with its best
            # such middle's first line; two middles end it after one branch where they can.
            # Nothing is queued first: work started in between would run over its prompt.
            return await self._from_model(engine, ask, position, False, retry=retry,
                                          rescue=True)
        if deferred and decode.run is not None:
            self.background.project_context(engine, uri, decode.run)
        if middle is not None or _decoded(outcome):
            # The prompt here widens when the worker is idle: a client that sends no cursor
            # notifications (a plain LSP client) learns of the place only from its requests.
            # An empty answer too: the wider window may find what this one did not.
            self.background.widen(engine, uri, planned,
                                  lambda: self._widening(engine, uri, text, cur.offset, planned),
                                  f"{uri}:{position.line + 1}:{position.character + 1}",
                                  decode.run)
        if middle is None:
            return None
        ranked = (ranked_middles(outcome.result, ask.place.line_break)
                  if alternatives > 1 and outcome.result is not None else ())
        answer = self._answer(engine, ask, planned,
                              ranked or (model_text.for_document(middle, ask.place.line_break),),
                              ranked=bool(ranked) and alternatives == wanted)
        if answer is not None and alternatives < wanted:
            self.background.rank(engine, planned, wanted, ask.place)
        return answer

    def _place(self, uri: str, position: types.Position) -> tuple[Document, Cursor] | None:
        """The open document and the cursor in it, or ``None`` when there is nothing to
        complete there (the reason logged)."""
        doc = self.documents.get(uri)
        if doc is None:
            log.warning("completion for a document that is not open: %s", uri)
            return None
        if not served(self.settings.languages, doc.language_id):
            log.info("no completion: language %r is not in seam.languages %s",
                     doc.language_id, list(self.settings.languages))
            return None
        try:
            return doc, doc.cursor(position)
        except PositionError as exc:
            log.warning("no completion for %s: %s", uri, exc)
            return None

    async def _decode(self, ask: _Ask, planned: Planned, decode: Decode,
                      share_key: Hashable, *, early: bool) -> Outcome | None:
        """Run the request on the worker (``None`` when it failed, logged). Partial middles
        and the final one go into the suggestion cache as they come, so the rest of an early
        answer serves the user's next keystrokes."""
        place = ask.place

        def store(middle: str) -> None:  # partial middles and final results, on the loop
            if middle:
                self._keep(place, (model_text.for_document(middle, place.line_break),), False)

        def final(res: CompletionResult) -> None:
            if res.middle and res.stop != StopReason.CANCELLED:
                store(res.middle)
                self._prefetch_past(decode.engine, ask, planned,
                                    model_text.for_document(res.middle, place.line_break),
                                    decoded=True)

        try:
            return await self.jobs.run(place.uri, decode, share_key=share_key, early=early,
                                       on_partial=store, on_final=final)
        except asyncio.CancelledError:
            self._record(place.uri, ask.t0, CompletionSource.MODEL, "cancelled-by-client")
            raise
        except Exception as exc:
            if isinstance(exc, (ConnectionError, TimeoutError)):
                # A model server that cannot be reached or answers with an error (VllmError
                # is a ConnectionError): expected in use, and the message says all there is.
                log.error("decode failed for %s: %s: %s", place.uri, type(exc).__name__, exc)
            else:  # a bug: its traceback is what finds it
                log.error("decode failed for %s: %s", place.uri, type(exc).__name__,
                          exc_info=exc)
            self.host.report_failure(exc)  # a vLLM server gone: the editor hears of it
            self._record(place.uri, ask.t0, CompletionSource.MODEL, "error",
                         error=type(exc).__name__)
            return None

    def _middle_of(self, engine: CompletionEngine, ask: _Ask, planned: Planned, outcome: Outcome,
                   resume_ms: float, *, deferred: bool) -> str | None:
        """The middle a decode answered with (the model's text, line breaks not yet the
        document's), with its timings recorded; ``None`` when there is none to show."""
        uri, t0, policy = ask.uri, ask.t0, planned.policy
        # What the project context held (the planned one, also when it was deferred).
        project = {"context_files": tuple(f.path for f in planned.request.context_files),
                   "context_sources": dict(planned.project.tokens),
                   "context_deferred": deferred}
        if outcome.partial is not None:
            self._record(uri, t0, CompletionSource.EARLY, "line", queue_ms=outcome.queue_ms,
                         resume_ms=resume_ms, scope=policy.scope, **project)
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
                     context_tokens=res.project_tokens, **project)
        check_slow(self.host, res)
        if not res.middle or res.stop == StopReason.CANCELLED:
            if res.stop not in (StopReason.CANCELLED, StopReason.TIME):
                self._keep(ask.place, ("",), False)  # asked again: no model work
            return None
        return res.middle

    def _answer(self, engine: CompletionEngine, ask: _Ask, planned: Planned,
                middles: tuple[str, ...], *, ranked: bool) -> tuple[Document, Suggestion] | None:
        """Cache the middles (in the document's line breaks, best first; ``ranked``: the
        place's ranked alternatives) and return them, unless the document changed meanwhile;
        prefetch past the first (``_prefetch_past``)."""
        self._keep(ask.place, middles, ranked)
        if self.documents.get(ask.uri) is not ask.doc or ask.doc.text is not ask.text:
            # The text changed while decoding; a newer request will follow the edit.
            log.info("document %s changed during decode; answer dropped", ask.uri)
            return None
        self._prefetch_past(engine, ask, planned, middles[0], decoded=False)
        return ask.doc, Suggestion(middles[0], ask.cursor.offset, ask.cursor.line_end,
                                   middles[1:])

    def _prefetch_past(self, engine: CompletionEngine, ask: _Ask, planned: Planned,
                       middle: str, *, decoded: bool) -> None:
        """The prefetch rule, in one place: the suggestion the user gets after accepting the
        one shown is decoded in the background (``background.Prefetch``), past the whole
        ``middle`` (in the document's line breaks), while the document is still open.

        An early answer showed only the first line of a decode that went on: its prefetch
        waits for that decode's end (``decoded``), whatever the user typed meanwhile (typing
        through the suggestion leads to the same text). Any other answer is prefetched past
        when it is shown (``decoded`` false), which is only when the text did not change.
        """
        if decoded != planned.policy.early or self.documents.get(ask.uri) is not ask.doc:
            return
        text, offset = ask.text, ask.cursor.offset
        after = text[:offset] + middle + text[offset:]
        cursor = offset + len(middle)
        # Planned as the request after accepting will be (and kept for it), so that this
        # prefetch is what that request adopts or finds in the cache.
        self.background.prefetch(
            engine, self._plan(engine, ask.uri, after, cursor),
            Place(ask.uri, after[:cursor], after[cursor:], ask.place.line_break))

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

