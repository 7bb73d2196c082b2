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
    cancel: threading.Event = field(default_factory=threading.Event)
    queued_at: float = field(default_factory=time.perf_counter)
    started_at: float | None = None
    cancelled_at: float | None = None

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
        #: {"uri", "stop", "tokens", "decode_ms", "cancelled_ms"} (ms since the flag was raised).
        self.finished: deque[dict[str, Any]] = deque(maxlen=256)

    def supersede(self, uri: str) -> None:
        """Raise the cancel flag of the running or queued job on ``uri``, if any."""
        job = self._inflight.get(uri)
        if job is not None:
            job.request_cancel()

    async def run(self, uri: str, engine: Any, request: Any) -> Outcome:
        """Decode ``request`` with ``engine``; a newer call on the same ``uri`` cancels this one.

        Raises ``asyncio.CancelledError`` when the awaiting task is cancelled, after raising the
        job's flag so the worker stops within one model step.
        """
        if self._closed:
            raise RuntimeError("decoder is shut down")
        self.supersede(uri)
        job = Job(uri)
        self._inflight[uri] = job
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._executor, self._work, job, engine, request)
        try:
            return await future
        except asyncio.CancelledError:
            job.request_cancel()
            raise
        finally:
            if self._inflight.get(uri) is job:
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
        if job.cancelled_at is not None:
            entry["after_cancel_ms"] = round((done - job.cancelled_at) * 1000.0, 3)
        self.finished.append(entry)
        return Outcome(result, queue_ms, False, time.perf_counter())

    def cancel_all(self) -> None:
        for job in list(self._inflight.values()):
            job.request_cancel()

    def shutdown(self) -> None:
        self._closed = True
        self.cancel_all()
        self._executor.shutdown(wait=False, cancel_futures=True)
