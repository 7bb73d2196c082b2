"""Running decodes off the event loop, one at a time, and cancelling them.

Decoding is CPU-bound, so it runs in a single worker thread (two decodes at once would only
share the same cores and both be late). Each request gets a cancel flag that ``fim`` polls once
per model step: the flag is raised by ``$/cancelRequest`` (the asyncio task awaiting the decode
is cancelled) and by a newer request on the same document, which makes the older answer moot.
A job whose flag is already raised when the worker reaches it is skipped without touching the
model.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


@dataclass
class Job:
    """One decode: its document, its cancel flag and when it was queued."""

    uri: str
    share_key: Any = None
    cancel: threading.Event = field(default_factory=threading.Event)
    queued_at: float = field(default_factory=time.perf_counter)
    started_at: float | None = None
    cancelled_at: float | None = None
    future: Any = None  # the asyncio future of the executor call
    waiters: int = 0

    def request_cancel(self) -> None:
        if self.cancelled_at is None:
            self.cancelled_at = time.perf_counter()
        self.cancel.set()


@dataclass(frozen=True)
class Outcome:
    """What a job produced: the engine's result (``None`` if skipped) and the queue wait."""

    result: Any
    queue_ms: float
    skipped: bool
    finished_at: float = 0.0  # perf_counter when the worker was done


class Decoder:
    """A one-thread executor for ``engine.complete`` with per-document supersession."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="seam-decode")
        self._inflight: dict[str, Job] = {}
        self._closed = False
        #: What the worker did with recent jobs, including those whose requester went away:
        #: {"uri", "stop", "tokens", "decode_ms", and "after_cancel_ms": from the raising of the
        #: cancel flag to the end of the decode, when it was raised while decoding}.
        self.finished: deque[dict[str, Any]] = deque(maxlen=256)

    def supersede(self, uri: str) -> None:
        """Raise the cancel flag of the running or queued job on ``uri``, if any."""
        job = self._inflight.get(uri)
        if job is not None:
            job.request_cancel()

    async def run(self, uri: str, engine: Any, request: Any, share_key: Any = None) -> Outcome:
        """Decode ``request`` with ``engine``; a newer call on the same ``uri`` cancels this one,
        unless it has an equal, non-``None`` ``share_key``: then both await one decode.

        Raises ``asyncio.CancelledError`` when the awaiting task is cancelled, after raising the
        job's flag (if no other request waits on it) so the worker stops within one model step.
        """
        if self._closed:
            raise RuntimeError("decoder is shut down")
        job = self._inflight.get(uri)
        if (job is None or share_key is None or job.share_key != share_key
                or job.cancel.is_set()):
            self.supersede(uri)
            job = Job(uri, share_key)
            self._inflight[uri] = job
            loop = asyncio.get_running_loop()
            job.future = loop.run_in_executor(self._executor, self._work, job, engine, request)
            # Retrieve a failure even when every waiter has gone, so it is not reported as
            # "never retrieved"; the waiters that remain see it through the shield.
            job.future.add_done_callback(lambda f: f.cancelled() or f.exception())
        job.waiters += 1
        try:
            return await asyncio.shield(job.future)
        except asyncio.CancelledError:
            if job.waiters == 1:
                job.request_cancel()
            raise
        finally:
            job.waiters -= 1
            if job.waiters == 0 and self._inflight.get(uri) is job:
                del self._inflight[uri]

    def _work(self, job: Job, engine: Any, request: Any) -> Outcome:
        job.started_at = time.perf_counter()
        queue_ms = (job.started_at - job.queued_at) * 1000.0
        if job.cancel.is_set():
            self.finished.append({"uri": job.uri, "stop": "skipped", "tokens": 0})
            return Outcome(None, queue_ms, True, time.perf_counter())
        try:
            result = engine.complete(request, cancel=job.cancel.is_set)
        except Exception as exc:
            self.finished.append({"uri": job.uri, "stop": "error", "error": repr(exc)})
            raise
        done = time.perf_counter()
        entry = {"uri": job.uri, "stop": getattr(result, "stop", None),
                 "tokens": getattr(result, "tokens", None),
                 "decode_ms": round((done - job.started_at) * 1000.0, 3)}
        if job.cancelled_at is not None and job.cancelled_at <= done:
            entry["after_cancel_ms"] = round((done - job.cancelled_at) * 1000.0, 3)
        self.finished.append(entry)
        return Outcome(result, queue_ms, False, time.perf_counter())

    def running(self) -> list[str]:
        """URIs whose job the worker is decoding right now."""
        return [uri for uri, job in self._inflight.items()
                if job.started_at is not None and job.future is not None
                and not job.future.done()]

    def cancel_all(self) -> None:
        for job in list(self._inflight.values()):
            job.request_cancel()

    def shutdown(self) -> None:
        self._closed = True
        self.cancel_all()
        self._executor.shutdown(wait=False, cancel_futures=True)
