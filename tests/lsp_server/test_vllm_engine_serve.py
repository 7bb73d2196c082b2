"""``seam serve`` with ``engine: "vllm"`` against a real HTTP peer on 127.0.0.1 that speaks
vLLM's API (``tests/support/vllm_peer.py``): the engine answers the completion service's
calls, and a server that is down, answers garbage or never answers gives a clear status in
the editor (``seam/status``, ``window/showMessage``), never a hang; the server recovers when
the peer is back, by itself (the reconnect timer) or at the next request."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import time
from collections.abc import AsyncIterator, Callable

import pytest
from lsprotocol import types

from fim.api import CompletionRequest
from fim.options import Mode, Scope, StopReason
from fim.vllm.client import STOP_LOGPROBS, VllmEngine, VllmError
from fim.vllm.rows import SeamArgs
from lsp_server.model_host import LoadState, ModelHost, reconnect_delays
from lsp_server.remote_engines import API_KEY_ENV
from tests.support.seam_lsp_client import inline, items_of, lsp_session, open_doc, status
from tests.support.vllm_peer import Behaviour, VllmPeer

URI = "file:///work/example.py"
SOURCE = "def add(a, b):\n    return \n"
OTHER = "file:///work/other.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----- the engine answers what the completion service asks --------------------------------

def test_the_engine_answers_the_services_calls(peer):
    engine = VllmEngine.connect(peer.url)
    req = CompletionRequest("def add(a, b):\n    return ", "\n", mode=Mode.CONSTRAINED,
                            scope=Scope.STATEMENT, max_tokens=16)
    prompt = engine.prompt_for(req)
    assert prompt.text.startswith("<fim-prefix>") and prompt.text.endswith("<fim-middle>")
    # No tokenizer for this peer's model: counted by the estimate, sent as text.
    assert not engine.exact_tokens and prompt.text is not None
    assert engine.uncached(req, prompt) == len(prompt.ids) > 0  # nothing ran yet
    assert engine.window == 2048 and engine.step_model.reused == 0
    assert engine.backend.engine == "vllm" and peer.url in engine.backend.description
    assert engine.warm(req, prompt=prompt)
    res = engine.complete(req, prompt=prompt)
    assert (res.middle, res.stop, res.parses) == ("a + b", StopReason.EOS, True)
    warm, done = peer.log.completions
    # The warm-up fills vLLM's prefix cache with the same prompt, and marked as a warm-up it
    # has the server build the constraint's language without constraining it.
    assert warm["prompt"] == done["prompt"] == prompt.text
    assert warm["max_tokens"] == 1 and warm["vllm_xargs"] == dict(done["vllm_xargs"],
                                                                  seam_warm=1)
    # The right-context stop is asked for (on by default) with the model's raw top token.
    assert done["vllm_xargs"] == SeamArgs(req.left, req.right, req.scope, right_stop=True,
                                          right_wraps=True).to_extra_args()
    assert done["logprobs"] == STOP_LOGPROBS


def test_the_prompt_starts_at_the_requests_anchor_where_it_fits(peer):
    engine = VllmEngine.connect(peer.url)
    left = "import os\n\n" + "x = 1\n" * 10 + "y = "
    anchored = engine.prompt_for(CompletionRequest(left, "\n", left_start=11))
    assert anchored.text == "<fim-prefix>" + left[11:] + "<fim-suffix>\n<fim-middle>"
    assert anchored.left_chars_dropped == 11
    # A start further back than the window holds: cut to the window as before.
    long_left = "z = 0\n" * 2000 + "y = "
    cut = engine.prompt_for(CompletionRequest(long_left, "\n", left_start=0))
    assert 0 < cut.left_chars_dropped < len(long_left)


def test_a_stream_that_is_not_vllms_is_an_error_not_an_empty_answer(peer):
    engine = VllmEngine.connect(peer.url)
    peer.behaviour = Behaviour.GARBAGE
    with pytest.raises(VllmError, match="without finishing"):
        engine.complete(CompletionRequest("x = ", "\n", max_tokens=4))


def test_a_silent_server_ends_at_the_time_budget(peer):
    engine = VllmEngine.connect(peer.url)
    peer.behaviour = Behaviour.SILENT
    res = engine.complete(CompletionRequest("x = ", "\n", max_tokens=4, time_budget_ms=300))
    assert res.stop is StopReason.TIME and res.middle is None


# ----- the model host: connect, fail, reconnect ---------------------------------------------

def test_the_host_reconnects_once_the_server_is_back_and_takes_the_key_from_the_env(
        monkeypatch):
    monkeypatch.setenv(API_KEY_ENV, "sk-from-env")
    port = _free_port()
    host = ModelHost(reconnect_first_s=3600.0)  # the timer stays out of this test's way
    host.load("bundled", engine="vllm", server=f"http://127.0.0.1:{port}").join(60)
    assert host.state.state is LoadState.ERROR and host.engine is None
    assert host.retry().join(60) is None and host.state.state is LoadState.ERROR  # still down
    peer = VllmPeer(port).start()
    try:
        host.retry().join(60)
        assert host.state.state is LoadState.READY and host.engine is not None
        assert host.retry() is None  # nothing to retry while ready
        res = host.engine.complete(CompletionRequest("x = ", "\n", max_tokens=8))
        assert res.middle == "a + b" and set(peer.log.auth) == {"Bearer sk-from-env"}
        peer.behaviour = Behaviour.GARBAGE
        with pytest.raises(VllmError) as failed:
            host.engine.complete(CompletionRequest("x = ", "\n", max_tokens=8))
        host.report_failure(failed.value)
        assert host.state.state is LoadState.ERROR and "without finishing" in host.state.message
        host.report_failure(ValueError("not the server's fault"))  # no change
        assert host.state.state is LoadState.ERROR
    finally:
        host.close()
        peer.stop()


def _until(done: Callable[[], bool], timeout: float = 60.0) -> None:
    """Wait (sleeping) until ``done()``; ``TimeoutError`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError("the condition did not come true")
        time.sleep(0.05)


def test_the_reconnect_timer_waits_longer_each_time_up_to_the_longest_wait():
    assert list(itertools.islice(reconnect_delays(1.0, 8.0), 6)) == [1, 2, 4, 8, 8, 8]


def test_the_host_comes_back_by_itself_when_the_server_does():
    # No request, no retry(): only the timer can bring the host back.
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    host = ModelHost(reconnect_first_s=0.05, reconnect_max_s=0.2)
    peer = None
    try:
        host.load("bundled", engine="vllm", server=url).join(60)
        assert host.state.state is LoadState.ERROR and host.reconnecting
        peer = VllmPeer(port).start()
        _until(lambda: host.state.state is LoadState.READY)
        _until(lambda: not host.reconnecting)  # ready: the timer ends
        # A proxy in front of a vLLM that is gone answers HTML with a 502.
        peer.behaviour = Behaviour.DOWN_HTML
        with pytest.raises(VllmError, match="HTTP 502") as failed:
            host.engine.complete(CompletionRequest("x = ", "\n", max_tokens=8))
        host.report_failure(failed.value)
        assert host.state.state is LoadState.ERROR and url in host.state.message
        assert host.reconnecting
        peer.behaviour = Behaviour.VLLM
        _until(lambda: host.state.state is LoadState.READY)
        assert host.engine.complete(CompletionRequest("x = ", "\n")).middle == "a + b"
        # Shut down: the timer stops, and stays stopped.
        peer.behaviour = Behaviour.DOWN_HTML
        with pytest.raises(VllmError) as failed:
            host.engine.complete(CompletionRequest("x = ", "\n", max_tokens=8))
        host.report_failure(failed.value)
        assert host.reconnecting
        host.close(wait=60)
        assert not host.reconnecting and host.state.state is LoadState.ERROR
    finally:
        host.close(wait=60)
        if peer is not None:
            peer.stop()


def test_a_slow_server_is_an_error_naming_it_and_the_time_until_it_answers_again():
    peer = VllmPeer().start()
    host = ModelHost(slow_after_s=0.5, reconnect_first_s=0.05, reconnect_max_s=0.2)
    try:
        host.load("bundled", engine="vllm", server=peer.url).join(60)
        assert host.state.state is LoadState.READY
        # A request out of time on a server that answers a one-token question: the prompt
        # was long, the server is not slow.
        host.report_slow().join(60)
        assert host.state.state is LoadState.READY and not host.reconnecting
        peer.behaviour = Behaviour.SILENT
        res = host.engine.complete(CompletionRequest("x = ", "\n", max_tokens=4,
                                                     time_budget_ms=300))
        assert res.stop is StopReason.TIME and res.tokens == 0
        host.report_slow().join(60)
        st = host.state
        assert st.state is LoadState.ERROR and host.engine is None
        assert peer.url in st.message and "within 0.5 s" in st.message
        peer.behaviour = Behaviour.VLLM
        _until(lambda: host.state.state is LoadState.READY)
        assert host.engine.complete(CompletionRequest("x = ", "\n")).middle == "a + b"
    finally:
        host.close(wait=60)
        peer.stop()


# ----- through an LSP session: down, up, garbage, back --------------------------------------

async def _state(lc, wanted: str, ask: str | None, timeout: float = 60.0) -> dict:
    """Poll ``seam/status`` until the state is ``wanted``; with ``ask`` (a document's URI),
    ask for a completion there each round (a request that misses the suggestion cache is
    what makes the server try the vLLM server again)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        st = await status(lc)
        if st["state"] == wanted:
            return st
        if loop.time() > deadline:
            raise TimeoutError(st["state"], st["message"], st["decodes"][-3:])
        if ask:
            await inline(lc, ask, 1, 11)
        await asyncio.sleep(0.1)


def _errors(lc) -> list[str]:
    return [m.message for m in lc.messages if m.type == types.MessageType.Error]


@contextlib.asynccontextmanager
async def _serving(tmp_path, peer: VllmPeer, **seam: object) -> AsyncIterator:
    """``seam serve`` on ``peer`` with ``seam``'s settings besides the engine's, ready, with
    ``URI`` open: the LSP client."""
    settings = {"seam": {"engine": "vllm", "vllmServer": peer.url, **seam}}
    async with lsp_session(tmp_path, settings) as lc:
        await _state(lc, "ready", ask=None)
        open_doc(lc, URI, SOURCE)
        yield lc


@pytest.mark.asyncio
@pytest.mark.timeout(180)
async def test_serve_reports_a_server_down_then_recovers_and_completes(tmp_path):
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    settings = {"seam": {"engine": "vllm", "vllmServer": url, "vllmApiKey": "sk-team",
                         "timeBudgetMs": 5000}}
    async with lsp_session(tmp_path, settings) as lc:
        st = await _state(lc, "error", ask=None)
        assert url in st["message"] and "vllmServer" in st["message"]
        assert st["settings"]["vllmApiKey"] == "<set>"
        assert any(url in m for m in _errors(lc))
        open_doc(lc, URI, SOURCE)
        assert items_of(await inline(lc, URI, 1, 11)) == []  # down: nothing, at once
        peer = VllmPeer(port).start()
        try:
            st = await _state(lc, "ready", ask=URI)
            assert st["runtime"]["engine"] == "vllm"
            got = items_of(await inline(lc, URI, 1, 11))
            assert [i.insert_text for i in got] == ["a + b"]
            constrained = [b for b in peer.log.completions if "vllm_xargs" in b]
            assert constrained and constrained[-1]["prompt"].startswith("<fim-prefix>")
            assert set(peer.log.auth) == {"Bearer sk-team"}
            shown = len(_errors(lc))
            peer.behaviour = Behaviour.GARBAGE
            open_doc(lc, OTHER, "def sub(a, b):\n    return \n")
            assert items_of(await inline(lc, OTHER, 1, 11)) == []
            st = await _state(lc, "error", ask=None)
            assert "without finishing" in st["message"] or "no JSON" in st["message"]
            assert len(_errors(lc)) > shown
            peer.behaviour = Behaviour.VLLM
            # Back: the next request that is not in the suggestion cache reconnects.
            await _state(lc, "ready", ask=OTHER)
            got = items_of(await inline(lc, OTHER, 1, 11))
            assert [i.insert_text for i in got] == ["a + b"]
        finally:
            peer.stop()


@pytest.mark.asyncio
@pytest.mark.timeout(180)
async def test_serve_shows_a_slow_server_as_an_error_and_recovers_by_itself(tmp_path, peer):
    async with _serving(tmp_path, peer, timeBudgetMs=500, vllmSlowAfterMs=1500) as lc:
        peer.behaviour = Behaviour.SILENT
        assert items_of(await inline(lc, URI, 1, 11)) == []  # out of time: nothing
        # No further request: the answer that ran out of time is enough to find out.
        st = await _state(lc, "error", ask=None)
        assert peer.url in st["message"] and "did not answer" in st["message"]
        assert "within 1.5 s" in st["message"]  # the setting reached the host
        assert any("did not answer" in m for m in _errors(lc))
        peer.behaviour = Behaviour.VLLM
        await _state(lc, "ready", ask=None)  # the reconnect timer, no request
        got = items_of(await inline(lc, URI, 1, 11))
        assert [i.insert_text for i in got] == ["a + b"]


def _cursor(lc, uri: str, line: int, character: int) -> None:
    lc.protocol.notify("seam/cursor", {"textDocument": {"uri": uri},
                                       "position": {"line": line, "character": character}})


@pytest.mark.asyncio
@pytest.mark.timeout(180)
async def test_a_prefetch_out_of_time_reports_a_server_that_became_slow(tmp_path, peer):
    """The answer is shown; the prefetch past it is the first request the server leaves
    unanswered.  With no further request from the editor, the prefetch's running out of time
    makes the host ask its one-token question, and the editor hears the server is slow."""
    peer.stall_on = "return a + b"  # the prompt after accepting "a + b"
    async with _serving(tmp_path, peer, timeBudgetMs=2000, vllmSlowAfterMs=1000) as lc:
        got = items_of(await inline(lc, URI, 1, 11))
        assert [i.insert_text for i in got] == ["a + b"]
        st = await _state(lc, "error", ask=None, timeout=30)
        assert peer.url in st["message"] and "within 1 s" in st["message"]
        asked = [b for b in peer.log.completions if "return a + b" in str(b["prompt"])]
        assert asked and "vllm_xargs" in asked[0]  # the prefetch (a constrained decode)


@pytest.mark.asyncio
@pytest.mark.timeout(180)
async def test_a_warm_up_that_fails_reports_the_server_without_a_request(tmp_path, peer):
    """Only the cursor moves (``seam/cursor``): the warm-up there fails on a server that went
    away behind its proxy, and the editor hears of it before it asks for anything."""
    async with _serving(tmp_path, peer, timeBudgetMs=2000) as lc:
        warmed = len(peer.log.completions)
        _cursor(lc, URI, 1, 11)
        for _ in range(600):  # the warm-up there: a one-token request, answered
            if len(peer.log.completions) > warmed:
                break
            await asyncio.sleep(0.05)
        # (Not only the last request before the cursor moved: the warm-up came.)
        assert len(peer.log.completions) > warmed
        assert peer.log.completions[-1]["max_tokens"] == 1
        peer.behaviour = Behaviour.DOWN_HTML
        open_doc(lc, OTHER, "def sub(a, b):\n    return \n")
        _cursor(lc, OTHER, 1, 11)
        st = await _state(lc, "error", ask=None, timeout=30)
        assert peer.url in st["message"] and "HTTP 502" in st["message"]
        assert any("HTTP 502" in m for m in _errors(lc))
