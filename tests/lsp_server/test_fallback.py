"""``fallback: "local"``: the local model serves while the model server is unreachable, and the
server again once it answers (``lsp_server.fallback``, ``lsp_server.model_host``).

The server is a real HTTP peer on 127.0.0.1 that speaks vLLM's API
(``tests/support/vllm_peer.py``), stopped and started again on the same port; the local model
is the tiny in-process ``random:santacoder``.  What is checked is which engine answers at
each moment (``HostState.serving``, the engine's runtime, the peer's scripted middle), what
the status says, that the local model loads only when needed and never on the caller's
thread, and that requests do not hammer a server that is down.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable

import pytest
from lsprotocol import types

from fim.api import CompletionRequest
from fim.engines.model_specs import EngineKind
from fim.vllm.client import VllmEngine
from lsp_server.fallback import FALLBACK_HINT, FallbackMode, LocalSpec, LocalState
from lsp_server.host_state import HostState, LoadState, Serving
from lsp_server.model_host import ModelHost
from lsp_server.server_log_state import ServerState, last_session
from lsp_server.settings import Settings, merge
from tests.support.seam_lsp_client import inline, items_of, lsp_session, open_doc, status
from tests.support.vllm_peer import VllmPeer

LOCAL = LocalSpec("random:santacoder")
URI = "file:///work/example.py"
SOURCE = "def add(a, b):\n    return \n"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _until(done: Callable[[], bool], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError("the condition did not come true")
        time.sleep(0.05)


class _States:
    """Every state the host published, in order (the listener the editor's session is)."""

    def __init__(self) -> None:
        self.seen: list[HostState] = []
        self._lock = threading.Lock()

    def __call__(self, state: HostState) -> None:
        with self._lock:
            self.seen.append(state)

    def since(self, n: int) -> list[HostState]:
        with self._lock:
            return self.seen[n:]


def _fail_request(host: ModelHost) -> None:
    """A request to the server that is gone fails, and the host hears of it (as the
    completion service tells it)."""
    engine = host.engine
    assert isinstance(engine, VllmEngine)
    with pytest.raises(ConnectionError) as failed:
        engine.complete(CompletionRequest("x = ", "\n", max_tokens=4))
    host.report_failure(failed.value)


def test_the_local_model_serves_while_the_server_is_down_and_the_server_once_back():
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    states = _States()
    host = ModelHost(on_state=states, reconnect_first_s=0.05, reconnect_max_s=0.2)
    peer = VllmPeer(port).start()
    try:
        host.set_fallback(FallbackMode.LOCAL, LOCAL)
        host.load("bundled", engine="vllm", server=url).join(60)
        st = host.state
        assert st.state is LoadState.READY and st.serving is Serving.SERVER
        # Loaded only when needed: the server answers, so no local model yet.
        assert host.fallback.state is LocalState.IDLE
        peer.stop()
        mark = len(states.seen)
        _fail_request(host)
        # At once (the load runs in the background): fallback, nothing serving yet.
        first = states.since(mark)[0]
        assert first.state is LoadState.FALLBACK and first.serving is None
        assert url in first.message and "unreachable since" in first.message
        assert "loading the local model random:santacoder" in first.message
        _until(lambda: host.state.serving is Serving.LOCAL)
        st = host.state
        assert st.state is LoadState.FALLBACK and st.model == "random:santacoder"
        assert st.message.startswith(f"team server at {url} unreachable since ")
        assert st.message.endswith("— local model random:santacoder serving")
        local = host.engine
        assert local is not None and local.runtime.engine is EngineKind.TRANSFORMERS
        assert local.complete(CompletionRequest("x = ", "\n", max_tokens=4)).stop is not None
        # Back on the same port: the reconnect timer finds it; the server serves again.
        peer = VllmPeer(port).start()
        _until(lambda: host.state.serving is Serving.SERVER)
        assert host.state.state is LoadState.READY
        assert isinstance(host.engine, VllmEngine)
        assert host.engine.complete(CompletionRequest("x = ", "\n")).middle == "a + b"
        assert host.fallback.state is LocalState.READY  # kept for the next time
        # A second outage: the local model is there, so it serves at once.
        peer.stop()
        mark = len(states.seen)
        _fail_request(host)
        first = states.since(mark)[0]
        assert first.state is LoadState.FALLBACK and first.serving is Serving.LOCAL
        assert host.engine is local
    finally:
        host.close(wait=60)
        peer.stop()


def test_requests_ask_a_down_server_again_at_most_every_retry_gap_while_the_local_model_serves():
    url = f"http://127.0.0.1:{_free_port()}"  # nobody listens there
    host = ModelHost(reconnect_first_s=3600.0)  # the timer stays out of this test's way
    try:
        host.set_fallback("local", LOCAL)
        host.load("bundled", engine="vllm", server=url).join(60)
        assert host.state.state is LoadState.FALLBACK  # down from the start
        host.fallback.wait(120)
        assert host.state.serving is Serving.LOCAL
        attempts = 0
        for _ in range(20):  # twenty keystrokes, each a completion request
            thread = host.retry()
            if thread is not None:
                attempts += 1
                thread.join(60)
        assert attempts == 1
        assert host.state.serving is Serving.LOCAL  # the attempt failed: still local
    finally:
        host.close(wait=60)


def test_without_fallback_the_error_says_it_exists_and_nothing_loads():
    url = f"http://127.0.0.1:{_free_port()}"
    host = ModelHost(reconnect_first_s=3600.0)
    try:
        host.load("bundled", engine="vllm", server=url).join(60)
        st = host.state
        assert st.state is LoadState.ERROR and st.serving is None and host.engine is None
        assert url in st.message and st.message.endswith(FALLBACK_HINT)
        assert host.fallback.state is LocalState.IDLE
        # Turned on while the server is down: the local model loads and serves.
        host.set_fallback("local", LOCAL)
        _until(lambda: host.state.serving is Serving.LOCAL)
        assert host.engine is not None
        # Turned off again: dropped; the error is back.
        host.set_fallback("none")
        st = host.state
        assert st.state is LoadState.ERROR and host.engine is None
        assert host.fallback.state is LocalState.IDLE and host.fallback.engine is None
    finally:
        host.close(wait=60)


def test_a_local_model_that_cannot_load_is_an_error_naming_both(tmp_path):
    url = f"http://127.0.0.1:{_free_port()}"
    missing = str(tmp_path / "no-such-model.gguf")
    host = ModelHost(reconnect_first_s=3600.0)
    try:
        host.set_fallback("local", LocalSpec(missing))
        host.load("bundled", engine="vllm", server=url).join(60)
        host.fallback.wait(60)
        st = host.state
        assert st.state is LoadState.ERROR and host.engine is None
        assert url in st.message and "could not load either" in st.message
        assert "no-such-model.gguf" in st.message
    finally:
        host.close(wait=60)


def test_a_local_engine_has_no_fallback_beside_it():
    host = ModelHost()
    host.set_fallback("local", LOCAL)
    host.load("random:santacoder", engine=EngineKind.TRANSFORMERS).join(240)
    st = host.state
    assert st.state is LoadState.READY and st.serving is Serving.LOCAL
    assert host.fallback.state is LocalState.IDLE


def test_the_setting_takes_none_or_local_and_names_the_local_model():
    settings, problems = merge(Settings(), {"fallback": "local", "model": "random:santacoder",
                                            "contextTokens": 512})
    assert not problems and settings.fallback is FallbackMode.LOCAL
    assert settings.local_spec == LocalSpec("random:santacoder", window=512)
    assert Settings().fallback is FallbackMode.NONE
    kept, problems = merge(settings, {"fallback": "remote"})
    assert kept.fallback is FallbackMode.LOCAL
    assert [p.key for p in problems] == ["fallback"] and '"local"' in problems[0].message()


def test_the_doctor_reads_the_fallback_and_the_way_back_from_the_log():
    def line(level: str, message: str, at: str = "10:00:00,000") -> str:
        return f"2026-11-28 {at} {level} lsp_server.model_host [seam-load-1] {message}"

    head = "2026-11-28 09:59:59,000 INFO lsp_server.cli [MainThread] seam serve starting"
    down = [head, line("ERROR", "model load failed: Seam cannot use the vLLM server"),
            line("WARNING", "fallback: team server at http://x:8000 unreachable since 10:00 "
                            "— local model bundled serving", "10:00:05,000"),
            line("INFO", "model server http://x:8000: error", "10:00:09,000")]
    state = last_session("\n".join(down))
    assert state is not None and state.state is ServerState.FALLBACK
    assert state.at == "2026-11-28 10:00:05,000"  # a failed try later does not end it
    assert state.message.endswith("local model bundled serving")
    back = [*down, line("INFO", "model server http://x:8000: ready", "10:01:00,000")]
    state = last_session("\n".join(back))
    assert state is not None and state.state is ServerState.READY


# ----- through an LSP session ---------------------------------------------------------------

@pytest.mark.asyncio
@pytest.mark.timeout(300)
async def test_serve_completes_with_the_local_model_while_the_server_is_down(tmp_path):
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    settings = {"seam": {"engine": "vllm", "vllmServer": url, "fallback": "local",
                         "model": "random:santacoder", "timeBudgetMs": 20000,
                         "maxTokens": 8, "suggestions": 1}}
    async with lsp_session(tmp_path, settings) as lc:
        st = await status(lc)
        deadline = time.monotonic() + 240
        while st.get("serving") != "local":
            assert st["state"] in ("idle", "loading", "fallback"), st  # never an error
            assert time.monotonic() < deadline, st
            await asyncio.sleep(0.1)
            st = await status(lc)
        assert st["state"] == "fallback" and url in st["message"]
        assert st["runtime"]["engine"] == "transformers"
        open_doc(lc, URI, SOURCE)
        await inline(lc, URI, 1, 11)
        st = await status(lc)
        answered = [r for r in st["recent"] if r["source"] == "model"]
        assert answered and answered[-1]["stop"] != "error"  # the local model decoded
        assert not [m for m in lc.messages if m.type == types.MessageType.Error]
        peer = VllmPeer(port).start()
        try:
            deadline = time.monotonic() + 60
            while st.get("serving") != "server":  # requests (at most every 10 s) and the timer
                assert time.monotonic() < deadline, st
                await inline(lc, URI, 1, 11)
                await asyncio.sleep(0.2)
                st = await status(lc)
            assert st["state"] == "ready" and st["runtime"]["engine"] == "vllm"
            open_doc(lc, "file:///work/other.py", "def sub(a, b):\n    return \n")
            got = items_of(await inline(lc, "file:///work/other.py", 1, 11))
            assert [i.insert_text for i in got] == ["a + b"]  # the server's answer
            # A second outage: the local model is loaded, so the request that finds the
            # server gone is asked of it at once rather than lost.
            peer.stop()
            third = "file:///work/third.py"
            open_doc(lc, third, "def mul(a, b):\n    return \n")
            await inline(lc, third, 1, 11)
            st = await status(lc)
            here = [r for r in st["recent"] if r["uri"] == third and r["source"] == "model"]
            # The request is answered, never lost: either it found the server gone and was
            # asked of the local model at once (an error record, then the answer), or the
            # background work after the last answer found it first and the host already
            # served locally (the answer alone).
            assert here and here[-1]["stop"] != "error", here
            assert [r["stop"] == "error" for r in here] in ([True, False], [False]), here
            assert st["serving"] == "local"
        finally:
            peer.stop()
