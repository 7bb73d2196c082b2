"""The local engine that serves while the model server is unreachable (``fallback: "local"``).

With ``engine: "vllm"`` (or ``"llama-server"``, ``"openai"``) the editor's suggestions come
from a server; when it goes away, ``fallback: "local"`` lets the language server answer with
a model of its own (``seam.model``, the bundled one by default) until the server answers
again.  :class:`LocalFallback` holds that engine: loaded in a daemon thread the first time
the server is found unreachable (never on the request path, never before it is needed), kept
while the settings name the same local model (a server that goes away twice switches at
once the second time), and dropped when ``fallback`` is turned off or another model is named.
The switching itself (which engine answers, what the status says) is the model host's
(``lsp_server.model_host``); this module only loads, keeps and reports the local engine.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from fim.engines.model_specs import EngineKind
from fim.options import DEFAULT_MODEL, Dtype
from lsp_server.host_state import HostState, LoadState, Serving

if TYPE_CHECKING:
    from fim.engine_interface import CompletionEngine
    from lsp_server.remote_engines import Remote

log = logging.getLogger(__name__)


class FallbackMode(enum.StrEnum):
    """The ``fallback`` setting: what answers while the model server is unreachable."""

    NONE = "none"  # nothing: the status shows the error until the server is back
    LOCAL = "local"  # the local model (``seam.model``), loaded the first time it is needed


class LocalState(enum.StrEnum):
    """Where the local engine is."""

    IDLE = "idle"  # not needed yet
    LOADING = "loading"
    READY = "ready"
    ERROR = "error"  # it could not load; tried again only for other settings


@dataclass(frozen=True)
class LocalSpec:
    """The local model the fallback loads (the ``model``, ``device``, ``dtype`` and
    ``contextTokens`` settings, on the engine ``auto`` picks for it)."""

    model: str = DEFAULT_MODEL
    device: str = "auto"
    dtype: Dtype | str = Dtype.AUTO
    trust_remote_code: bool = False
    window: int | None = None


#: Loads a spec's engine, warmed up, or raises (the model host's ``_open_local``).
Loader = Callable[[LocalSpec], "CompletionEngine"]


class LocalFallback:
    """The fallback's local engine: :meth:`need` loads it in the background (once per
    spec); :attr:`engine` is it once ready; ``on_change`` is called (outside this object's
    lock, from the loader thread) when a load ends.  :meth:`configure`, :meth:`drop` and
    :meth:`need` report nothing: their caller (the host, holding its own lock) publishes."""

    def __init__(self, load: Loader, on_change: Callable[[], None]) -> None:
        self._lock = threading.Lock()
        self._load = load
        self._on_change = on_change
        self._spec = LocalSpec()
        self._state = LocalState.IDLE
        self._engine: CompletionEngine | None = None
        self._error = ""
        #: bumped by every change of spec or :meth:`drop`: a load that finishes after one
        #: is dropped
        self._generation = 0
        self._thread: threading.Thread | None = None

    @property
    def spec(self) -> LocalSpec:
        return self._spec

    @property
    def state(self) -> LocalState:
        return self._state

    @property
    def error(self) -> str:
        """Why the last load failed ("" when it did not)."""
        return self._error

    @property
    def engine(self) -> CompletionEngine | None:
        """The local engine, or ``None`` while it is not ready."""
        return self._engine if self._state is LocalState.READY else None

    def configure(self, spec: LocalSpec) -> None:
        """The local model to serve with from now on; another one than the loaded (or
        loading) one drops it, and it loads again when next needed."""
        with self._lock:
            if spec == self._spec:
                return
            self._spec = spec
            self._reset()

    def drop(self) -> None:
        """Free the local engine (``fallback`` turned off, or a local engine configured)."""
        with self._lock:
            self._reset()

    def _reset(self) -> None:
        """Back to idle (with the lock held); a load under way is dropped when it ends."""
        self._generation += 1
        self._state, self._engine, self._error = LocalState.IDLE, None, ""

    def need(self) -> threading.Thread | None:
        """Start loading the local engine in the background unless it is loaded, loading,
        or failed for this spec; the loader thread, or ``None``."""
        with self._lock:
            if self._state is not LocalState.IDLE:
                return None
            self._state = LocalState.LOADING
            generation, spec = self._generation, self._spec
            self._thread = threading.Thread(target=self._run, args=(generation, spec),
                                            name="seam-fallback-load", daemon=True)
            self._thread.start()
            return self._thread

    def _run(self, generation: int, spec: LocalSpec) -> None:
        log.info("loading the local fallback model %s", spec.model)
        engine: CompletionEngine | None = None
        error = ""
        try:
            engine = self._load(spec)
        except BaseException as exc:  # noqa: BLE001 - any failure leaves the server up
            error = f"{type(exc).__name__}: {exc}"
            log.error("the local fallback model %s failed to load: %s", spec.model, error)
        with self._lock:
            if generation != self._generation:
                log.info("dropping the superseded fallback model %s", spec.model)
                return
            if engine is not None:
                self._state, self._engine = LocalState.READY, engine
                log.info("the local fallback model %s is ready", spec.model)
            else:
                self._state, self._error = LocalState.ERROR, error
        self._on_change()

    def wait(self, timeout: float | None = None) -> LocalState:
        """Block until the loader thread (if any) finished (for tests)."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return self._state


#: What the status adds to a server's error when ``fallback`` is ``"none"``.
FALLBACK_HINT = (' With `seam.fallback` set to "local", the local model would complete '
                 "meanwhile.")


def seen_through(state: HostState, remote: Remote | None, mode: FallbackMode,
                 local: LocalFallback, down_since: float | None) -> HostState:
    """The state the editor sees: ``state`` (the server's) through the fallback, where the
    server is down: the local model loading or serving in its place, or failed too; with
    no fallback, the error says what would help.  ``down_since``: when the server became
    unreachable (``time.time()``), shown as the hour and minute."""
    if remote is None or state.state is not LoadState.ERROR:
        return state
    if mode is FallbackMode.NONE:
        return replace(state, message=state.message + FALLBACK_HINT)
    since = time.strftime("%H:%M", time.localtime(down_since or time.time()))
    kind = "team server" if remote.kind is EngineKind.VLLM else "model server"
    down, name = f"{kind} at {remote.name} unreachable since {since}", local.spec.model
    if local.state is LocalState.READY:
        return HostState(LoadState.FALLBACK, name, f"{down} — local model {name} serving",
                         Serving.LOCAL)
    if local.state is LocalState.ERROR:
        return replace(state, message=f"{state.message} The local fallback model {name} "
                       f"could not load either ({local.error}).")
    return HostState(LoadState.FALLBACK, name,
                     f"{down} — loading the local model {name} to serve meanwhile")
