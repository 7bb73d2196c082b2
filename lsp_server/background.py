"""The server's background work: what the worker does for the user while no one waits on it.

It exists apart from the completion service (which answers requests) so that each kind of work
is a named class with its own tests, and the rules of when it is queued sit in one place:

* :class:`WarmUp`: the prompt where the cursor rests, run into the model's cache (a request
  there waits for it instead of stopping it: ``jobs``' ``prepares``);
* :class:`Widen`: after the warm-up, the project context that was not cached yet on that
  prompt, then the prompt started higher in the document (``prompt_anchors``), adopted once
  cached, then the document's window from there on below the cursor, held in the cache (the
  document's *base*: a first request anywhere within it runs only its right text);
* :class:`Prefetch`: the suggestion after the shown one is accepted (llama.vim's speculative
  FIM), which a request there adopts or finds in the suggestion cache;
* :class:`Rank`: the shown place's ranked alternatives (``fim.alternatives``), decoded when the
  worker is idle (the greedy path is in the model's cache: only the branches run);
* :class:`ContextWarmUp`: a request's project context that it went without (not cached yet),
  run into the cache after it.

Each runs on the worker through ``engine_work`` (the one module that calls the engine), deciding
there what to run against the model's cache as it is then; what it finds reaches the suggestion
cache through the ``keep`` callback, posted to the event loop.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from fim.engine_interface import CompletionEngine, EnginePrompt
from fim.options import StopReason
from fim.request import CompletionRequest, CompletionResult
from lsp_server import engine_work
from lsp_server import text as model_text
from lsp_server.engine_work import Runnable
from lsp_server.jobs import JobScheduler, Priority
from lsp_server.model_host import ModelHost
from lsp_server.request_plan import Planned

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Runs a function on the event loop thread (never raises; a closed loop drops it).
Post = Callable[[Callable[[], None]], None]
#: How often a worker waiting on the event loop looks at its cancel flag (a request that
#: stops the work waits that long at most for the worker), and how long it waits at all (a
#: loop that closed drops what is posted to it) (s).
LOOP_POLL_S = 0.005
LOOP_WAIT_S = 10.0


def on_loop(post: Post, fn: Callable[[], T], cancel: threading.Event) -> T | None:
    """``fn()`` run on the event loop, for work on the worker that needs what only the loop
    may touch (the planner); the worker waits meanwhile, so the two never share the cores.
    ``None`` when ``cancel`` is raised first, or the loop did not run it within
    ``LOOP_WAIT_S``; what ``fn`` raises is raised here."""
    box: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        if box.set_running_or_notify_cancel():
            try:
                box.set_result(fn())
            except BaseException as exc:  # handed to the waiting worker, which raises it
                box.set_exception(exc)

    post(run)
    deadline = time.monotonic() + LOOP_WAIT_S
    while not cancel.is_set() and time.monotonic() < deadline:
        try:
            return box.result(timeout=LOOP_POLL_S)
        except concurrent.futures.TimeoutError:
            continue
    if not box.cancel():  # it started meanwhile: its result is still this call's
        return box.result()
    return None


@dataclass(frozen=True)
class Place:
    """Where suggestions are kept: a document's text split at a cursor, and the document's
    line break (the middles are shown in it)."""

    uri: str
    left: str
    right: str
    line_break: str


#: Puts a place's suggestions, best first, into the suggestion cache (on the event loop);
#: ``ranked``: they are the place's ranked alternatives (else its one answer).
Keep = Callable[[Place, tuple[str, ...], bool], None]


def ranked_key(planned: Planned, wanted: int) -> tuple:
    """The share key of the ranked search at a place: a request for it adopts it."""
    return ("ranked", wanted, planned.share_key)


def ranked_middles(res: CompletionResult, line_break: str) -> tuple[str, ...]:
    """A ranked result's distinct middles in the document's line breaks, best first, empty
    ones left out."""
    return tuple(dict.fromkeys(model_text.for_document(a.middle, line_break)
                               for a in res.alternatives if a.middle))


def check_slow(host: ModelHost, res: CompletionResult) -> None:
    """A decode (the user's request or a prefetch) with not one token in its time budget:
    a long prompt, or a vLLM server too slow to use; the host finds out which in the
    background (``ModelHost.report_slow``) and tells the editor."""
    if res.stop == StopReason.TIME and not res.tokens:
        host.report_slow()


def warm(engine: CompletionEngine, host: ModelHost, request: CompletionRequest,
         cancel: threading.Event, *, prompt: EnginePrompt | None = None,
         keep_cached: bool = False, hold: bool = False) -> bool:
    """``engine_work.warm``; a warm-up that neither finished nor was cancelled has the host
    check the server (``ModelHost.report_slow``: a vLLM client's warm-up returns ``False``
    when the server failed or stopped answering; a local engine's host checks nothing), so a
    server that went away or became slow is reported while the user only moves the cursor."""
    done = engine_work.warm(engine, request, cancel, prompt=prompt, keep_cached=keep_cached,
                            hold=hold)
    if not done and not cancel.is_set():
        host.report_slow()
    return done


@dataclass(frozen=True)
class WarmUp:
    """The prompt a request at the cursor would run now, into the model's cache: without
    the project context while that is not cached (``engine_work.runnable``)."""

    engine: CompletionEngine
    host: ModelHost
    planned: Planned
    where: str  # for the log

    def __call__(self, cancel: threading.Event) -> None:
        run = engine_work.runnable(self.engine, self.planned)
        if warm(self.engine, self.host, run.request, cancel, prompt=run.prompt):
            log.info("warmed the prompt at %s%s", self.where,
                     " (the project context is not cached yet: without it)"
                     if run.deferred is not None else "")


def _nothing() -> None:
    return None


@dataclass(frozen=True)
class Wider:
    """How a place's prompt widens: the prompt started higher (``widened``; ``None``: none
    higher), what adopts it once cached (on the event loop), and the document's base to hold
    after it (``base``; ``None``: none) with what tells the planner it is held."""

    widened: Planned | None
    adopt: Callable[[], None] = _nothing
    base: CompletionRequest | None = None
    hold: Callable[[], None] = _nothing


@dataclass(frozen=True)
class Widen:
    """The work after the warm-up: the deferred project context, then ``wider``'s prompt
    started higher in the document (adopted once cached), then the document's base (held,
    and the planner told once it is).

    ``wider`` plans the widening when the work gets there, on the event loop while the
    worker waits: planning it tokenizes the whole wide window, which planned at the rest or
    after an answer shared the two cores with the warm-up's prompt or the prefetch's decode
    (docs/latency.md, "The event loop's share of the cores")."""

    engine: CompletionEngine
    host: ModelHost
    planned: Planned
    wider: Callable[[], Wider]
    post: Post
    where: str
    #: what the request at this place ran, when one did (its prompts are not built again)
    run: Runnable | None = None

    def __call__(self, cancel: threading.Event) -> None:
        run = self.run or engine_work.runnable(self.engine, self.planned)
        if run.deferred is not None:
            # The context on the narrow prompt first: requests here carry it once that short
            # run is done (seconds on a CPU), not only once the whole widened prompt is (often
            # longer than the user rests); the widened prompt then shares the context's cached
            # beginning and runs only its own left text.
            if not warm(self.engine, self.host, run.deferred, cancel,
                        prompt=run.deferred_prompt):
                return
            log.info("warmed the project context at %s", self.where)
        wider = on_loop(self.post, self.wider, cancel)
        if wider is None:
            return
        # Forked, not cropped: the narrower prompt serves requests until the widened one is
        # cached and adopted, and a request that interrupts the widening needs it.
        if wider.widened is not None:
            if not warm(self.engine, self.host, wider.widened.request, cancel,
                        keep_cached=True):
                return
            self.post(wider.adopt)
            log.info("widened the prompt at %s", self.where)
        # Held, and forked from the widened prompt at the cursor: only the lines below run.
        if wider.base is not None and warm(self.engine, self.host, wider.base, cancel,
                                           keep_cached=True, hold=True):
            self.post(wider.hold)
            log.info("held the document's window below %s", self.where)


@dataclass(frozen=True)
class Prefetch:
    """The suggestion at ``place`` (after the shown one is accepted); no middle is an
    answer too (the request there need not ask the model)."""

    engine: CompletionEngine
    host: ModelHost
    planned: Planned
    place: Place
    keep: Keep
    post: Post

    def __call__(self, cancel: threading.Event) -> CompletionResult:
        run = engine_work.runnable(self.engine, self.planned)
        try:
            res = engine_work.complete(self.engine, run, cancel)
        except Exception as exc:
            self.host.report_failure(exc)  # a vLLM server gone, found without a request
            raise
        check_slow(self.host, res)
        if res.stop not in (StopReason.CANCELLED, StopReason.TIME):
            found = model_text.for_document(res.middle or "", self.place.line_break)
            self.post(lambda: self.keep(self.place, (found,), False))
        return res


@dataclass(frozen=True)
class Rank:
    """The place's ``wanted`` best middles, greedy's first (``fim.alternatives``)."""

    engine: CompletionEngine
    planned: Planned
    wanted: int
    place: Place
    keep: Keep
    post: Post

    def __call__(self, cancel: threading.Event) -> CompletionResult:
        run = engine_work.runnable(self.engine, self.planned, self.wanted)
        res = engine_work.complete(self.engine, run, cancel)
        middles = ranked_middles(res, self.place.line_break)
        if not cancel.is_set() and middles:
            self.post(lambda: self.keep(self.place, middles, True))
        return res


@dataclass(frozen=True)
class ContextWarmUp:
    """A request's deferred project context (``run.deferred``), into the model's cache."""

    engine: CompletionEngine
    host: ModelHost
    run: Runnable

    def __call__(self, cancel: threading.Event) -> None:
        if self.run.deferred is not None:
            warm(self.engine, self.host, self.run.deferred, cancel,
                 prompt=self.run.deferred_prompt)


class Background:
    """Queues a session's background work on its worker (``jobs``), each kind at its
    priority and under its key (one per document: a newer one replaces it)."""

    def __init__(self, jobs: JobScheduler, host: ModelHost, post: Post, keep: Keep) -> None:
        self.jobs = jobs
        self.host = host
        self.post = post
        self.keep = keep

    def at_cursor(self, engine: CompletionEngine, uri: str, planned: Planned,
                  wider: Callable[[], Wider], where: str) -> None:
        """The cursor rests at ``planned``'s place: warm its prompt, then widen it (both give
        way to any request; ``wider`` plans the widening when the worker gets to it)."""
        log.debug("warm-up queued at %s", where)
        # A request at this cursor waits for this warm-up instead of stopping it: it runs
        # the same prompt, and work stopped inside a llama.cpp batch would be lost.
        self.jobs.background(uri, ("warm", uri), WarmUp(engine, self.host, planned, where),
                             share_key=planned.share_key, priority=Priority.WARM,
                             prepares=True)
        self.widen(engine, uri, planned, wider, where)

    def widen(self, engine: CompletionEngine, uri: str, planned: Planned,
              wider: Callable[[], Wider], where: str, run: Runnable | None = None) -> None:
        """Widen the prompt at ``planned``'s place when the worker is idle (its deferred
        project context first, then what ``wider`` plans): after a cursor's warm-up, and
        after an answer (``run``: what the request ran), so that a plain LSP client, which
        sends no cursor notifications, gets the wide window too."""
        self.jobs.background(uri, ("widen", uri),
                             Widen(engine, self.host, planned, wider, self.post, where, run),
                             priority=Priority.CONTEXT)

    def prefetch(self, engine: CompletionEngine, planned: Planned, place: Place) -> None:
        """Decode the suggestion at ``place``; a request that comes while it runs adopts it."""
        self.jobs.background(place.uri, ("prefetch", place.uri),
                             Prefetch(engine, self.host, planned, place, self.keep, self.post),
                             share_key=planned.share_key, priority=Priority.PREFETCH)

    def rank(self, engine: CompletionEngine, planned: Planned, wanted: int, place: Place
             ) -> None:
        """Decode the place's ranked alternatives when the worker is idle; they land in the
        suggestion cache (and survive requests in other documents: ``jobs``)."""
        self.jobs.background(place.uri, ("ranked", place.uri),
                             Rank(engine, planned, wanted, place, self.keep, self.post),
                             share_key=ranked_key(planned, wanted),
                             priority=Priority.ALTERNATIVES)

    def project_context(self, engine: CompletionEngine, uri: str, run: Runnable) -> None:
        """Run the project context a request went without into the cache when idle."""
        self.jobs.background(uri, ("context", uri), ContextWarmUp(engine, self.host, run),
                             priority=Priority.CONTEXT)
