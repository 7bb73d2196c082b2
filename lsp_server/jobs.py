"""Running model work off the event loop, one job at a time: requests first, warm-up after.

Decoding is CPU-bound, so it runs in a single worker thread (two decodes at once would only
share the same cores and both be late).  Two kinds of jobs share it:

* **requests** (``run``): an editor is waiting.  Each has a cancel flag that ``fim`` polls
  between model steps (and llama.cpp inside a step): it is raised by ``$/cancelRequest`` (the
  awaiting task is cancelled) and by a newer request on the same document, which makes the
  older answer moot.  Identical requests (equal ``share_key``) await one decode.  With
  ``early=True`` the request is answered at the first line end where the file parses, and the
  decode goes on; what it adds later reaches ``on_partial``/``on_final`` callbacks, which
  the server turns into suggestion-cache entries for the user's next keystrokes.
* **background work** (``background``): prefetching the next suggestion as if the shown one were
  accepted, warming the prompt where the cursor rests, running the project context and the
  widened prompt into the cache, the shown place's other suggestions, in that order of
  :class:`Priority` (what the user is likeliest to ask next first; the newest first among
  equals).  It runs only when no request
  is waiting, one job per key (a newer one replaces it); a request drops what is queued, except
  another document's alternatives (``KEPT_ACROSS_DOCUMENTS``: queued again even when the request
  stopped them running, so a shown place keeps its suggestions); any request raises its cancel
  flag, and so does newer background work of a higher priority: llama.cpp stops within a micro-
  batch, so a request waits at most that long.  A request whose ``share_key`` equals the running
  background job's adopts that job instead (the prefetch the user is now asking for is not
  thrown away), or, when that job only *prepares* it (runs its prompt into the cache), waits for
  it: the work is the request's own, and stopping it inside a llama.cpp batch would lose the
  batch.

An ``early`` request that has been answered and decodes on (the rest of a block, for the
user's next keystrokes) is work nobody waits for: any newer request, on any document, stops
it, the way it stops background work, and so does warming the cursor's place in another
document.  That warming also drops what is queued for other documents, as a request there
does: the warm-ups and widenings of a document the cursor has left would otherwise run after
its own and leave the model's held window (one at a time) in the document the user left.
Warming the cursor's place stops the running work for any other place, too, whatever its
priority: a prefetch of the suggestion after the shown one (the user went elsewhere instead of
accepting it), an earlier rest's warm-up. Until it did, a plain client that asked at a new
place half a second after an edit found its prompt not yet begun: the prefetch from its last
answer held the worker until the request stopped it (``docs/latency.md``).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # types only: this module runs the work it is handed, never an engine
    from fim.request import CompletionResult

log = logging.getLogger(__name__)

#: Background work: given its cancel flag, it returns what a request may adopt (a
#: prefetch's result), or ``None``.
Work = Callable[[threading.Event], "CompletionResult | None"]
#: A request's decode (``engine_work.Decode``): given the cancel flag's test and where partial
#: middles go (``None``: nowhere), the result.
DecodeWork = Callable[[Callable[[], bool], "Callable[[str], None] | None"], "CompletionResult"]


class Priority(enum.IntEnum):
    """Background work, least urgent first."""

    #: the shown place's other suggestions (cycled with next/previous): least urgent, since
    #: a user who asks to cycle waits for them anyway, and they serve that one place
    ALTERNATIVES = 0
    #: the project context and the widened prompt into the cache: above the alternatives,
    #: since every later request in the region reads them (a plain client's short rests went
    #: to the alternatives, and the widened window was never reached: docs/latency.md,
    #: "Short rests")
    CONTEXT = 1
    WARM = 2  # the prompt where the cursor rests
    PREFETCH = 3  # the suggestion after the shown one is accepted


#: Background work a request in *another* document does not make moot: a shown place's
#: alternatives stay due there (the user comes back to cycle through them), so they are kept
#: in the queue, or queued again when the request stopped them running. Warm-ups and
#: prefetches follow the cursor, which the request says has moved: they are dropped.
KEPT_ACROSS_DOCUMENTS = frozenset({Priority.ALTERNATIVES})
#: Background work stopped for more urgent background work that is queued again (nothing else
#: would ask for it again; see ``JobScheduler.background``).
STILL_DUE = frozenset({Priority.CONTEXT, Priority.ALTERNATIVES})


@dataclass
class Job:
    """One unit of model work: its document, its cancel flag and when it was queued."""

    uri: str
    share_key: Hashable | None = None
    background: bool = False
    priority: Priority = Priority.CONTEXT
    #: background work that runs the prompt of the request with its ``share_key`` (a request
    #: for it waits for it rather than stopping it); else a request adopts its result
    prepares: bool = False
    cancel: threading.Event = field(default_factory=threading.Event)
    queued_at: float = field(default_factory=time.perf_counter)
    started_at: float | None = None
    cancelled_at: float | None = None
    future: asyncio.Future[Outcome] | None = None  # the asyncio future of the executor call
    waiters: int = 0
    #: resolved with the first partial middle of an ``early`` request
    first_partial: asyncio.Future | None = None

    @property
    def answered(self) -> bool:
        """An early request whose answer went out: what it decodes now nobody waits for."""
        return self.first_partial is not None and self.first_partial.done()

    def request_cancel(self) -> None:
        if self.cancelled_at is None:
            self.cancelled_at = time.perf_counter()
        self.cancel.set()


@dataclass(frozen=True)
class Outcome:
    """What a job produced: the engine's result (``None`` if skipped), the queue wait, and
    for an early answer the partial middle it was answered with."""

    result: CompletionResult | None
    queue_ms: float
    skipped: bool
    finished_at: float = 0.0  # perf_counter when the worker was done (or the partial came)
    partial: str | None = None


class DecodeOutcome(enum.StrEnum):
    """How a job ended when the engine's own ``StopReason`` does not say it."""

    SKIPPED = "skipped"  # cancelled before the worker reached it
    ERROR = "error"  # the engine raised
    DONE = "done"  # background work that ran to its end
    CANCELLED = "cancelled"  # background work stopped by its flag


@dataclass(frozen=True)
class DecodeRecord:
    """What the worker did with one job (``seam/status``'s ``decodes``). Fields a job does
    not have are ``None`` and left out of the JSON."""

    uri: str
    stop: str  # a ``fim.options.StopReason`` value or a ``DecodeOutcome`` one
    tokens: int | None = None
    decode_ms: float | None = None  # the work's wall time on the worker
    background: bool | None = None
    #: from the raising of the cancel flag to the end of the work, when raised while working
    after_cancel_ms: float | None = None
    error: str | None = None  # the exception, for ``DecodeOutcome.ERROR``

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, enum.Enum):
                value = value.value
            out[name] = round(value, 3) if isinstance(value, float) else value
        return out

    @classmethod
    def from_json(cls, data: Any) -> DecodeRecord:
        if not isinstance(data, dict):
            raise ValueError(f"a decode record must be an object, not {type(data).__name__}")
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


@dataclass
class _Pending:
    """Background work waiting for an idle worker."""

    uri: str
    share_key: Hashable | None
    work: Work
    priority: Priority
    prepares: bool


class JobScheduler:
    """A one-thread executor for model work, with per-document supersession and priorities."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="seam-decode")
        self._inflight: dict[str, Job] = {}
        self._background: Job | None = None  # the background job on the worker, if any
        #: its key and work, to queue it again when more urgent work stops it (``CONTEXT``)
        self._background_work: tuple[Hashable, _Pending] | None = None
        self._pending: OrderedDict[Hashable, _Pending] = OrderedDict()
        self._foreground = 0  # requests queued or running
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        #: What the worker did with recent jobs, including those whose requester went away.
        self.finished: deque[DecodeRecord] = deque(maxlen=256)

    # ----- requests ---------------------------------------------------------------------------

    def supersede(self, uri: str) -> None:
        """Raise the cancel flag of the running or queued request on ``uri``, if any."""
        job = self._inflight.get(uri)
        if job is not None:
            job.request_cancel()

    def _drop_pending(self, uri: str, *, own: bool = True) -> None:
        """A request on ``uri`` (or, ``own=False``, the cursor resting there): forget the
        queued background work it makes moot, other documents' but of a kind in
        ``KEPT_ACROSS_DOCUMENTS``, and (``own``) all of ``uri``'s."""
        for key, pending in list(self._pending.items()):
            if (own and pending.uri == uri) or (
                    pending.uri != uri and pending.priority not in KEPT_ACROSS_DOCUMENTS):
                del self._pending[key]

    def _yield_background(self, uri: str, share_key: Hashable | None = None) -> None:
        """Make room for a request on ``uri``: stop background work (unless it prepares this
        very request) and answered early decodes, and forget what was queued (see
        ``_drop_pending``); another document's work that stays due is queued again."""
        self._drop_pending(uri)
        bg = self._background
        if bg is not None and not (bg.prepares and share_key is not None
                                   and bg.share_key == share_key):
            bg.request_cancel()
            if bg.uri != uri and bg.priority in KEPT_ACROSS_DOCUMENTS:
                self._queue_again()
        for job in self._inflight.values():
            if job.answered:
                job.request_cancel()

    def _queue_again(self) -> None:
        """Queue the running background work again (it was stopped and is still due), unless
        newer work of its key is queued."""
        if self._background_work is not None:
            again_key, again = self._background_work
            self._pending.setdefault(again_key, again)

    async def run(self, uri: str, decode: DecodeWork,
                  share_key: Hashable | None = None, *, early: bool = False,
                  on_partial: Callable[[str], None] | None = None,
                  on_final: Callable[[CompletionResult], None] | None = None) -> Outcome:
        """Run ``decode`` on the worker; a newer call on the same ``uri`` cancels this one,
        unless it has an equal, non-``None`` ``share_key``: then both await one decode.

        ``early``: answer with the first partial middle (a line end where the file parses)
        and let the decode go on; every partial middle, the first included, goes to
        ``on_partial`` and the final result to ``on_final``, both called on the event loop.

        Raises ``asyncio.CancelledError`` when the awaiting task is cancelled, after raising the
        job's flag (if no other request waits on it) so the worker stops within one model step.
        """
        if self._closed:
            raise RuntimeError("decoder is shut down")
        loop = asyncio.get_running_loop()
        self._loop = loop
        bg = self._background
        if (bg is not None and not bg.prepares and share_key is not None
                and bg.share_key == share_key and not bg.cancel.is_set()
                and bg.future is not None and not bg.future.done()):
            job = bg  # the prefetch the user now asks for: adopt it
            self._drop_pending(uri)
        else:
            self._yield_background(uri, share_key)
            job = self._inflight.get(uri)
            if (job is None or share_key is None or job.share_key != share_key
                    or job.cancel.is_set()):
                self.supersede(uri)
                job = self._submit(uri, share_key, decode, early, on_partial, on_final, loop)
        job.waiters += 1
        try:
            if job.first_partial is not None:
                done, _ = await asyncio.wait(
                    {asyncio.shield(job.future), job.first_partial},
                    return_when=asyncio.FIRST_COMPLETED)
                if job.first_partial in done and not job.future.done():
                    started = job.started_at or job.queued_at
                    return Outcome(None, (started - job.queued_at) * 1000.0, False,
                                   time.perf_counter(), partial=job.first_partial.result())
            return await asyncio.shield(job.future)
        except asyncio.CancelledError:
            if job.waiters == 1:
                job.request_cancel()
            raise
        finally:
            job.waiters -= 1

    def _submit(self, uri: str, share_key: Hashable | None, decode: DecodeWork, early: bool,
                on_partial: Callable[[str], None] | None,
                on_final: Callable[[CompletionResult], None] | None,
                loop: asyncio.AbstractEventLoop) -> Job:
        job = Job(uri, share_key)
        self._inflight[uri] = job
        self._foreground += 1
        if early:
            job.first_partial = loop.create_future()

        def partial(middle: str) -> None:  # worker thread
            def deliver() -> None:
                if job.first_partial is not None and not job.first_partial.done():
                    job.first_partial.set_result(middle)
                if on_partial is not None:
                    on_partial(middle)
            loop.call_soon_threadsafe(deliver)

        hook = partial if (early or on_partial is not None) else None
        job.future = loop.run_in_executor(self._executor, self._work, job, decode, hook)

        def done(f: asyncio.Future[Outcome]) -> None:
            self._foreground -= 1
            if self._inflight.get(uri) is job:
                del self._inflight[uri]
            if not f.cancelled() and f.exception() is None and on_final is not None:
                outcome = f.result()
                if outcome.result is not None:
                    on_final(outcome.result)
            self._pump()

        # Retrieve a failure even when every waiter has gone, so it is not reported as
        # "never retrieved"; the waiters that remain see it through the shield.
        job.future.add_done_callback(done)
        return job

    def _work(self, job: Job, decode: DecodeWork, on_partial: Callable[[str], None] | None
              ) -> Outcome:
        job.started_at = time.perf_counter()
        queue_ms = (job.started_at - job.queued_at) * 1000.0
        if job.cancel.is_set():
            self.finished.append(DecodeRecord(job.uri, DecodeOutcome.SKIPPED, tokens=0))
            return Outcome(None, queue_ms, True, time.perf_counter())
        try:
            result = decode(job.cancel.is_set, on_partial)
        except Exception as exc:
            self.finished.append(DecodeRecord(job.uri, DecodeOutcome.ERROR, error=repr(exc)))
            raise
        self._record(job, result.stop, result.tokens)
        return Outcome(result, queue_ms, False, time.perf_counter())

    def _record(self, job: Job, stop: str, tokens: int | None) -> None:
        done = time.perf_counter()
        after_cancel = None
        if job.cancelled_at is not None and job.cancelled_at <= done:
            after_cancel = (done - job.cancelled_at) * 1000.0
        self.finished.append(DecodeRecord(
            job.uri, stop, tokens, decode_ms=(done - (job.started_at or done)) * 1000.0,
            background=job.background, after_cancel_ms=after_cancel))

    # ----- background work ----------------------------------------------------------------------

    def background(self, uri: str, key: Hashable, work: Work,
                   share_key: Hashable | None = None, priority: Priority = Priority.WARM,
                   prepares: bool = False) -> None:
        """Run ``work(cancel_flag)`` on the worker once no request is waiting.

        One job per ``key``: a newer one replaces a queued one.  The highest ``priority``
        runs first, the newest among equals (the user's current focus); running work of a
        lower priority is stopped for it.  ``prepares``: the work runs the prompt of the
        request with ``share_key`` (see the module docstring): the cursor rests there, so
        running work for any other place is stopped whatever its priority (a prefetch that
        foresaw the shown suggestion accepted, the warm-up of an earlier rest), as a request
        would stop it; a shown place's alternatives are stopped by priority and queued again.
        Must be called on the event loop.
        """
        if self._closed:
            return
        self._loop = asyncio.get_running_loop()
        self._pending.pop(key, None)
        self._pending[key] = _Pending(uri, share_key, work, priority, prepares)
        running = self._background
        if running is not None and (running.priority < priority
                                    or (prepares and running.share_key != share_key)):
            running.request_cancel()
            # Project context stopped before it ran into the cache is still wanted (a request
            # defers it until it is cached, and nothing else asks for it again), and so are a
            # shown place's alternatives: it goes back in the queue, unless a newer one
            # replaced it, and runs once the worker is free.
            if running.priority in STILL_DUE:
                self._queue_again()
        if prepares:
            # The user rests the cursor in another document: the rest of a block answered
            # in this one is no longer what they will ask for next, nor are its queued
            # warm-ups and widenings (one stopped just now for this one included).
            for job in self._inflight.values():
                if job.answered and job.uri != uri:
                    job.request_cancel()
            self._drop_pending(uri, own=False)
        self._pump()

    def clear_for_planning(self) -> None:
        """The event loop is about to plan a rest or a request at a new place, whose warm-up
        (``background`` with ``prepares``) or decode (``run``) will stop whatever background
        work runs now: stop it before the planning, not after, so that the two do not share
        the cores (a prefetch's step took four times as long beside it: docs/latency.md,
        "The event loop's share of the cores"). Work still due is queued again."""
        running = self._background
        if running is not None and not running.cancel.is_set():
            running.request_cancel()
            if running.priority in STILL_DUE:
                self._queue_again()

    def _pump(self) -> None:
        """Start the most urgent background job when the worker is idle."""
        if (self._closed or self._foreground or self._background is not None
                or not self._pending or self._loop is None):
            return
        # Highest priority; among equals the newest (dicts keep insertion order).
        key = max(reversed(self._pending), key=lambda k: self._pending[k].priority)
        pending = self._pending.pop(key)
        job = Job(pending.uri, pending.share_key, background=True, priority=pending.priority,
                  prepares=pending.prepares)
        self._background = job
        self._background_work = (key, pending)

        def work() -> Outcome:
            job.started_at = time.perf_counter()
            log.debug("background %s on %s: started", job.priority.name, job.uri)
            try:
                out = pending.work(job.cancel)
            except ConnectionError as exc:
                # A model server down or unreachable: the work has told the model host, which
                # shows it in the editor; a traceback for every prefetch and warm-up while it
                # is down would only bury the log.
                log.warning("background work on %s failed: %s", job.uri, exc)
                out = None
            except Exception:
                log.exception("background work on %s failed", job.uri)
                out = None
            self._record(job, DecodeOutcome.CANCELLED if job.cancel.is_set()
                         else DecodeOutcome.DONE, None)
            log.debug("background %s on %s: %s", job.priority.name, job.uri,
                      self.finished[-1])
            return Outcome(out, 0.0, False, time.perf_counter())

        job.future = self._loop.run_in_executor(self._executor, work)

        def done(_f: asyncio.Future[Outcome]) -> None:
            if self._background is job:
                self._background = None
                self._background_work = None
            self._pump()

        job.future.add_done_callback(done)

    # ----- state ---------------------------------------------------------------------------------

    def running(self) -> list[str]:
        """URIs whose request the worker is decoding right now."""
        return [uri for uri, job in self._inflight.items()
                if job.started_at is not None and job.future is not None
                and not job.future.done()]

    def idle(self) -> bool:
        """No request queued or running and no background work (for tests and benchmarks)."""
        return not self._foreground and self._background is None and not self._pending

    def cancel_all(self) -> None:
        self._pending.clear()
        if self._background is not None:
            self._background.request_cancel()
        for job in list(self._inflight.values()):
            job.request_cancel()

    def shutdown(self) -> None:
        self._closed = True
        self.cancel_all()
        self._executor.shutdown(wait=False, cancel_futures=True)
