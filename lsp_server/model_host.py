"""Loading the model once, in the background, and knowing whether it is ready.

The language server must answer from its first second, while loading a model takes from a
fraction of a second (``random:...`` test models) to about a minute (the bundled GGUF on first
use). :class:`ModelHost` runs ``fim.api.Engine.load`` in a daemon thread and exposes the state
(``loading`` / ``ready`` / ``error``); requests consult it and answer empty while it is not
ready. A newer load (the user changed ``seam.model``) supersedes an older one: the older
engine, when it finally arrives, is dropped.

With ``engine: "vllm"`` the host loads no weights: it connects to the team's vLLM server
(``fim.vllm.client.VllmEngine.connect`` asks it for its model) and asks it a one-token
question with a deadline (``VllmEngine.check``).  A server that is down or answers garbage, at
the start or later (:meth:`ModelHost.report_failure`), or that is slow (a request ran out of
time without a token, and the one-token question does too: :meth:`ModelHost.report_slow`),
puts the host in ``error`` with a message naming the server (and the time, when slow); a
prefetch or warm-up that runs out of time or fails in the background asks the same question,
so a server that became slow or went away is reported before the next request.  From
then on a reconnect timer tries again, at growing intervals (:func:`reconnect_delays`), and
so does the next completion request (:meth:`ModelHost.retry`), one attempt at a time; the host
is ``ready`` again as soon as the server answers in time.  The timer waits on an event, so
:meth:`ModelHost.close` (the session's shutdown) ends it at once.

With ``fallback: "local"`` (:meth:`ModelHost.set_fallback`), a server that is down does not
leave the editor without suggestions: the first time it is found unreachable the local model
starts loading in the background (``lsp_server.fallback``), the state reads ``fallback`` (the
message says which server is down since when, and whether the local model loads or serves:
``serving: "local"``), and :attr:`ModelHost.engine` is the local engine until the server
answers again; then ``ready`` and the server's engine, the local one kept for the next time.
While the local model serves, requests ask the server again at most every ``RETRY_GAP_S``.

Before reporting ``ready`` the host runs one tiny constrained completion, so that one-time
costs (the first forward pass, the constraint's tables) are paid while loading instead of on
the user's first completion; the grammar tables are built in a thread beside the load
(``benchmarks/bench_ready.py`` reports the phases). The first request on a new file still
pays its prompt, which the cursor warm-up and the prompt anchors (``lsp_server.prompt_anchors``)
hide where they can.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fim.engines.model_specs import EngineKind
from fim.options import Dtype
from lsp_server.fallback import FallbackMode, LocalFallback, LocalSpec, seen_through
from lsp_server.host_state import (
    RECONNECT_FIRST_S,
    RECONNECT_MAX_S,
    HostState,
    LoadState,
    Serving,
    reconnect_delays,
)
from lsp_server.remote_engines import Remote, hint_for, remote_for
from lsp_server.warm_up import build_language, warm_up

if TYPE_CHECKING:  # fim.api is imported when a load starts (it brings numpy and more)
    from fim.engine_interface import CompletionEngine
    from fim.engines.cpu_load import ThreadGovernor
    from lsp_server.remote_engines import RemoteServer

log = logging.getLogger(__name__)

#: Token sequences the model keeps cached: a few documents (or regions of one) at a time.
SLOTS = 4
#: A vLLM server that does not answer a one-token question within this is reported slow
#: (the default; the ``vllmSlowAfterMs`` setting changes it, :meth:`ModelHost.set_slow_after`).
SLOW_AFTER_S = 10.0
#: While the local fallback serves, a completion request asks the server again at most this
#: often (the reconnect timer's own tries go on): typing must not hammer a server that is down.
RETRY_GAP_S = 10.0

ProgressFn = Callable[[float, str], None]
StateFn = Callable[["HostState"], None]


@dataclass(frozen=True)
class _Opened:
    """An engine the host opened, with the typed handles it keeps beside it."""

    engine: CompletionEngine
    #: the engine again when it is a model server's client (what the one-token check asks)
    server: RemoteServer | None = None
    #: the in-process engine's CPU thread governor (``None``: no CPU threads of its own)
    governor: ThreadGovernor | None = None


class ModelHost:
    """Owns the current engine (a ``fim.engine_interface.CompletionEngine``: the in-process
    ``fim.api.Engine`` or a vLLM server's client) and its background loading."""

    def __init__(self, on_state: StateFn | None = None,
                 on_progress: ProgressFn | None = None, *, slow_after_s: float = SLOW_AFTER_S,
                 reconnect_first_s: float = RECONNECT_FIRST_S,
                 reconnect_max_s: float = RECONNECT_MAX_S) -> None:
        self._lock = threading.Lock()
        self._generation = 0
        self._engine: CompletionEngine | None = None
        #: the engine again when it is a model server's client (what the one-token check asks)
        self._server: RemoteServer | None = None
        #: the in-process engine's CPU thread governor (``None``: no CPU threads of its own)
        self._governor: ThreadGovernor | None = None
        self._key: tuple | None = None
        self._state = HostState(LoadState.IDLE)
        self._on_state = on_state
        self._on_progress = on_progress
        self._threads: list[threading.Thread] = []
        #: ``(server, api_key)`` while the engine is a vLLM server's (it can reconnect)
        self._remote: Remote | None = None
        self._retrying: threading.Thread | None = None
        self.slow_after_s = slow_after_s
        self._delays = (reconnect_first_s, reconnect_max_s)
        #: held by the one attempt to reach the vLLM server running (timer, request, check)
        self._attempting = threading.Lock()
        self._timer: threading.Thread | None = None
        self._timer_stop = threading.Event()
        #: the ``threads`` setting: a pinned llama.cpp thread count, ``None`` for "auto"
        self._thread_count: int | None = None
        #: ``fallback``: the local engine that serves while the server is unreachable
        self._fallback = FallbackMode.NONE
        self._local = LocalFallback(self._open_local, self._local_changed)
        self._local_governor: ThreadGovernor | None = None
        self._down_since: float | None = None  # (wall clock) the server became unreachable
        self._last_attempt = -math.inf  # (monotonic) the last attempt to reach it began
        #: what the editor was last told (``state``): ``_state`` seen through the fallback
        self._published = self._state

    def set_threads(self, threads: int | None) -> None:
        """Pin llama.cpp's thread count (``None``: choose it from the CPU load), for the
        loaded engine from its next request on and for every engine loaded later; engines
        without CPU threads of their own ignore it."""
        self._thread_count = threads
        self._apply_threads(self._governor)
        self._apply_threads(self._local_governor)

    def set_slow_after(self, seconds: float) -> None:
        """How long the vLLM server may take to answer the one-token question before it is
        reported slow, from the next check on (no reconnect: the server is the same)."""
        self.slow_after_s = float(seconds)

    def _apply_threads(self, governor: ThreadGovernor | None) -> None:
        if governor is not None:
            governor.pin(self._thread_count)

    def _take(self, engine: CompletionEngine | None, server: RemoteServer | None = None,
              governor: ThreadGovernor | None = None) -> None:
        """The engine requests use from now on (``None``: none), with its typed handles
        (called with the lock held)."""
        self._engine, self._server, self._governor = engine, server, governor

    def set_listeners(self, on_state: StateFn | None, on_progress: ProgressFn | None,
                      owner: object | None = None) -> None:
        """Report to new listeners (a new session of a TCP server takes over the host).

        With ``owner``, the listeners are cleared only if they are still ``owner``'s: a session
        that ends must not silence the one that followed it.
        """
        if owner is not None and getattr(self._on_state, "__self__", None) is not owner:
            return
        self._on_state = on_state
        self._on_progress = on_progress

    @property
    def state(self) -> HostState:
        """What the editor is told (with ``fallback: "local"``, a server that is down reads
        ``fallback`` while the local model loads or serves)."""
        return self._published

    @property
    def engine(self) -> CompletionEngine | None:
        """The engine that answers now: the loaded one, the local fallback's while the
        server is unreachable, or ``None`` while none is ready."""
        if self._state.state is LoadState.READY:
            return self._engine
        if self._remote is not None and self._state.state is LoadState.ERROR \
                and self._fallback is FallbackMode.LOCAL:
            return self._local.engine
        return None

    @property
    def key(self) -> tuple | None:
        return self._key

    def _set_state(self, state: HostState) -> None:
        """The loaded engine's (or server's) state (called with the lock held)."""
        self._state = state
        down = self._remote is not None and state.state is LoadState.ERROR
        if not down:
            self._down_since = None
        elif self._down_since is None:
            self._down_since = time.time()
        if down and self._fallback is FallbackMode.LOCAL:
            self._local.need()  # in the background; it reports when ready
        self._publish()

    def _publish(self) -> None:
        """Tell the listener what the editor should see, when it changed (lock held)."""
        state = seen_through(self._state, self._remote, self._fallback, self._local,
                             self._down_since)
        if state == self._published:
            return
        self._published = state
        if state.state is LoadState.FALLBACK:
            log.warning("fallback: %s", state.message)  # (the doctor reads it back)
        listener = self._on_state
        if listener is not None:
            try:
                listener(state)
            except Exception:  # a broken listener must not kill the loader
                log.exception("state listener failed")

    def set_fallback(self, mode: FallbackMode | str, spec: LocalSpec | None = None) -> None:
        """The ``fallback`` setting and the local model it loads, live: turned on while the
        server is down, the local model starts loading; turned off, it is dropped."""
        with self._lock:
            self._fallback = FallbackMode(mode)
            if self._fallback is FallbackMode.NONE:
                self._local.drop()
            else:
                self._local.configure(spec or LocalSpec())
                if self._remote is not None and self._state.state is LoadState.ERROR:
                    self._local.need()
            self._publish()

    def _local_changed(self) -> None:
        """The local fallback engine finished loading (or failed)."""
        with self._lock:
            self._publish()

    @property
    def fallback(self) -> LocalFallback:
        """The local fallback engine (for tests and the doctor)."""
        return self._local

    def load(self, model: str, device: str = "auto", dtype: Dtype | str = Dtype.AUTO,
             trust_remote_code: bool = False, engine: EngineKind | str = EngineKind.AUTO,
             window: int | None = None, server: str = "", api_key: str = "",
             server_model: str = "", template: str = "") -> threading.Thread:
        """Start loading ``model`` with ``engine`` in the background; the loader thread.
        ``window``: the prompt-plus-middle context (``None``: the engine's default, 2,048 on
        llama.cpp). ``server``, ``api_key``: the server of ``engine="vllm"``,
        ``"llama-server"`` or ``"openai"`` (then ``model``, ``device``, ``dtype`` only name
        it), with ``server_model`` ("": the first listed) and ``template`` ("": detected)."""
        runtime, key = engine, (model, device, dtype, trust_remote_code, engine, window, server,
                                api_key, server_model, template)
        # The key from the environment when no setting gives it (as for `seam complete`).
        remote = remote_for(EngineKind.parse(engine), server, api_key, server_model, template)
        model = remote.name if remote is not None else model
        with self._lock:
            self._generation += 1
            generation, self._key, self._remote = self._generation, key, remote
            self._take(None)
            if remote is None:
                self._local.drop()  # the local engine is the main one: no fallback beside it
            self._set_state(HostState(LoadState.LOADING, model, f"loading {model}"))

        def progress(fraction: float, message: str) -> None:
            listener = self._on_progress
            if generation == self._generation and listener is not None:
                try:
                    listener(float(fraction), str(message))
                except Exception:
                    log.exception("progress listener failed")

        def run() -> None:
            log.info("loading model %s (engine=%s, device=%s, dtype=%s)", model, runtime,
                     device, dtype)
            # The constraint's grammar tables do not depend on the model: build them while
            # llama.cpp reads the weights (its C code runs without the GIL).
            tables = threading.Thread(target=build_language, name="seam-grammar", daemon=True)
            tables.start()
            try:
                if remote is not None:
                    opened = self._connect(remote)
                else:
                    from fim.api import Engine

                    local = Engine.load(model, device=device, dtype=dtype,
                                        trust_remote_code=trust_remote_code,
                                        progress=progress, engine=runtime, slots=SLOTS,
                                        window=window)
                    opened = _Opened(local, governor=local.backend.threads)
                log.info("model runtime: %s", opened.engine.runtime.description)
            except BaseException as exc:  # any failure must leave the server up
                with self._lock:
                    if generation != self._generation:
                        return
                    hint = hint_for(exc, model)
                    # A server that cannot be reached is one line, not a traceback: the
                    # message says all there is (the reconnect timer tries again).
                    log.error("model load failed: %s", hint,
                              exc_info=None if isinstance(exc, ConnectionError) else exc)
                    self._set_state(HostState(LoadState.ERROR, model, hint))
                    if remote is not None:
                        self._start_timer()
                return
            tables.join()
            self._apply_threads(opened.governor)
            warm_up(opened.engine, lambda: generation != self._generation, progress,
                    self._warm_budget(remote))
            with self._lock:
                if generation != self._generation:
                    log.info("dropping superseded model %s", model)
                    return
                self._take(opened.engine, opened.server, opened.governor)
                log.info("model %s ready", model)
                self._set_state(HostState(LoadState.READY, model, f"{model} ready",
                                          Serving.LOCAL if remote is None else Serving.SERVER))

        thread = threading.Thread(target=run, name=f"seam-load-{generation}", daemon=True)
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()
        return thread

    def _connect(self, remote: Remote) -> _Opened:
        """The server's engine (the vLLM client, or a ``fim.servers`` engine), once it answered
        the one-token question in time (a server too busy to answer is slow: an error)."""
        server = remote.open()
        server.check(self.slow_after_s)
        return _Opened(server, server=server)

    def _warm_budget(self, remote: Remote | None) -> float | None:
        """The warm-up's time in ms: a server just seen answering in time gets as long again
        (a local engine: no limit)."""
        return self.slow_after_s * 1e3 if remote is not None else None

    def _open_local(self, spec: LocalSpec) -> CompletionEngine:
        """The local fallback's engine for ``spec``, loaded and warmed up (in the fallback's
        thread; it raises what the load raises)."""
        from fim.api import Engine

        local = Engine.load(spec.model, device=spec.device, dtype=spec.dtype,
                            trust_remote_code=spec.trust_remote_code, engine=EngineKind.AUTO,
                            slots=SLOTS, window=spec.window)
        self._local_governor = local.backend.threads
        self._apply_threads(self._local_governor)
        warm_up(local, lambda: False, lambda fraction, message: None, None)
        return local

    def report_failure(self, exc: BaseException) -> None:
        """A request failed with ``exc``: when it is the vLLM server's connection failing,
        the host is in ``error`` (with what to check) until the server answers again (the
        reconnect timer, or :meth:`retry`)."""
        with self._lock:
            if self._remote is None or not isinstance(exc, ConnectionError) \
                    or self._state.state is not LoadState.READY:
                return
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        """Into ``error`` because the vLLM server failed with ``exc``, and keep trying
        (called with the lock held, while ready)."""
        self._take(None)
        self._set_state(HostState(LoadState.ERROR, self._state.model,
                                  hint_for(exc, self._state.model or "")))
        self._start_timer()

    def report_slow(self) -> threading.Thread | None:
        """A request to the vLLM server ran out of time before its first token (the user's,
        or a prefetch), or a warm-up neither finished nor was cancelled: ask the server a
        one-token question in the background (one check at a time, never on the caller's
        thread); when that fails or runs out of :attr:`slow_after_s` too, the server is down
        or slow, not the prompt long, and the host goes into ``error`` saying so.  The
        thread, or ``None`` (no check needed: not a vLLM server, or not ready)."""
        with self._lock:
            server, generation = self._server, self._generation
            if self._remote is None or server is None or \
                    self._state.state is not LoadState.READY:
                return None

        def run() -> None:
            if not self._attempting.acquire(blocking=False):
                return  # an attempt to reach the server runs already
            try:
                seconds = server.check(self.slow_after_s)
            except Exception as exc:  # noqa: BLE001 - slow, down or garbage: all are errors
                with self._lock:
                    if generation == self._generation and self._server is server:
                        log.warning("model server %s: %s", self._remote.name, exc)
                        self._fail(exc)
                return
            finally:
                self._attempting.release()
            log.info("a request ran out of time (or a warm-up failed), but the vLLM server "
                     "answers a one-token request in %.2f s: it is not slow", seconds)

        thread = threading.Thread(target=run, name="seam-vllm-check", daemon=True)
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()
        return thread

    def retry(self) -> threading.Thread | None:
        """Connect to the vLLM server again after a failure, in the background (one attempt
        at a time); the thread, or ``None`` when there is nothing to retry.  The state
        changes (and is reported) only when the attempt succeeds or fails differently."""
        with self._lock:
            if self._remote is None or self._state.state is not LoadState.ERROR or (
                    self._retrying is not None and self._retrying.is_alive()):
                return None
            if self.engine is not None and \
                    time.monotonic() - self._last_attempt < RETRY_GAP_S:
                return None  # the local fallback serves: the timer probes, typing does not
            generation = self._generation
            self._retrying = threading.Thread(target=self._attempt, args=(generation,),
                                              name="seam-reconnect", daemon=True)
            self._threads = [t for t in self._threads if t.is_alive()] + [self._retrying]
            self._retrying.start()
            return self._retrying

    def _attempt(self, generation: int) -> None:
        """One attempt to reach the vLLM server: connect and ask the one-token question in
        time; ``ready`` when both work, else ``error`` with what failed (reported when it
        changed).  Skipped while another attempt runs."""
        if not self._attempting.acquire(blocking=False):
            return
        self._last_attempt = time.monotonic()
        try:
            with self._lock:
                remote = self._remote
                if remote is None or generation != self._generation or \
                        self._state.state is not LoadState.ERROR:
                    return
            opened: _Opened | None
            try:
                opened = self._connect(remote)
                state = HostState(LoadState.READY, remote.name, f"{remote.name} ready",
                                  Serving.SERVER)
            except Exception as exc:  # any failure leaves the host in error, not dead
                opened, state = None, HostState(LoadState.ERROR, remote.name,
                                                hint_for(exc, remote.name))
            with self._lock:
                if generation != self._generation or state == self._state:
                    return
                if opened is None:
                    self._take(None)
                else:
                    self._take(opened.engine, opened.server, opened.governor)
                log.info("model server %s: %s", remote.name, state.state)
                self._set_state(state)
        finally:
            self._attempting.release()

    # ----- the reconnect timer -------------------------------------------------------------

    @property
    def reconnecting(self) -> bool:
        """Whether the reconnect timer runs."""
        timer = self._timer
        return timer is not None and timer.is_alive()

    def _start_timer(self) -> None:
        """(Re)start the reconnect timer from its first wait (called with the lock held): a
        server that was back and failed again is tried soon, not after the longest wait."""
        self._timer_stop.set()  # a running timer ends at its next wake
        stop = self._timer_stop = threading.Event()
        self._timer = threading.Thread(target=self._reconnect_loop,
                                       args=(self._generation, stop),
                                       name="seam-reconnect-timer", daemon=True)
        self._timer.start()

    def _reconnect_loop(self, generation: int, stop: threading.Event) -> None:
        """Attempt to reach the server after each of :func:`reconnect_delays` until it is
        ready, the host loads something else, or :meth:`close` stops the timer."""
        for delay in reconnect_delays(*self._delays):
            if stop.wait(delay):
                return
            with self._lock:
                if generation != self._generation or self._state.state is not LoadState.ERROR:
                    return
            self._attempt(generation)

    def close(self, wait: float = 0.0) -> None:
        """Stop the reconnect timer (the session shuts down): it ends at once, or after the
        attempt it is making; ``wait``: seconds to wait for that.  A later failure starts
        it again."""
        self._timer_stop.set()
        timer = self._timer
        if wait > 0 and timer is not None and timer is not threading.current_thread():
            timer.join(wait)

    def wait(self, timeout: float | None = None) -> HostState:
        """Block until every loader thread finished (for tests and the benchmark)."""
        for thread in list(self._threads):
            thread.join(timeout)
        return self._state
