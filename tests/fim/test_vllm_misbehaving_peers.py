"""The ``vllm`` engine's client against servers that misbehave (issue 28, findings 1, 2 and
8): every read is bounded in bytes and in total time, the middle in the request's token
budget, and the message names the server and says truly what went wrong, in text safe to
show.  The peers are raw-socket servers on 127.0.0.1 (``benchmarks/bad_peers.py``)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from benchmarks.bad_peers import BadPeer, Misbehaviour
from fim.api import CompletionRequest
from fim.options import Mode, Scope
from fim.vllm.client import VllmEngine
from fim.vllm.http import Http, VllmError
from fim.vllm.stream import MAX_TOKEN_CHARS, Stream

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def bad(request) -> Iterator[BadPeer]:
    how, limit = request.param if isinstance(request.param, tuple) else (request.param,
                                                                         64 << 20)
    peer = BadPeer(how, limit=limit).start()
    yield peer
    peer.stop()


def _request(max_tokens: int = 16) -> CompletionRequest:
    return CompletionRequest("def add(a, b):\n    return ", "\n", mode=Mode.UNCONSTRAINED,
                             scope=Scope.STATEMENT, max_tokens=max_tokens,
                             time_budget_ms=20000)


@pytest.mark.parametrize("bad", [(Misbehaviour.ENDLESS_MODELS, 24 << 20)], indirect=True)
def test_a_model_list_that_never_ends_is_refused_at_the_byte_limit(bad):
    """Finding 1: ``GET /v1/models`` with a body that never ends (here 24 MB, so that the
    client before the fix ended too: it read all of it)."""
    with pytest.raises(VllmError) as err:
        Http(bad.url, None, 30.0).call("GET", "/v1/models")
    assert bad.url in str(err.value) and "longer than 4 MiB" in str(err.value)
    assert bad.sent < 12 << 20  # the client hung up near its limit


@pytest.mark.parametrize("bad", [(Misbehaviour.ENDLESS_LINE, 24 << 20)], indirect=True)
def test_a_stream_line_that_never_ends_is_refused_at_the_line_limit(bad):
    """Finding 1: one event line that never ends."""
    engine = VllmEngine.connect(bad.url)
    req = _request()
    with pytest.raises(VllmError) as err:
        engine.complete(req)
    assert bad.url in str(err.value) and "line longer than 1 MiB" in str(err.value)
    assert bad.sent < 12 << 20


@pytest.mark.parametrize("bad", [(Misbehaviour.OVER_BUDGET, 24 << 20)], indirect=True)
def test_a_server_that_ignores_max_tokens_gets_no_longer_middle(bad):
    """Finding 1: the middle is capped at the request's budget whatever the server sends."""
    engine = VllmEngine.connect(bad.url)
    got = engine.complete(_request(max_tokens=8))
    assert got.middle is not None and got.middle.count("x = 1") <= 9
    assert len(got.middle) <= 8 * MAX_TOKEN_CHARS and len(got.raw) <= 8 * MAX_TOKEN_CHARS
    assert bad.sent < 1 << 20  # it stopped reading at the budget


@pytest.mark.parametrize("bad", [Misbehaviour.TRICKLE_MODELS], indirect=True)
def test_a_trickling_server_is_given_up_on_at_the_total_timeout(bad):
    """Finding 2: one byte every 0.3 s never trips a per-read timeout of 2 s; the call ends at
    2 s in total (before the fix: when the peer gave up, after 120 s)."""
    t0 = time.monotonic()
    with pytest.raises(VllmError) as err:
        VllmEngine.connect(bad.url, timeout=2.0)
    assert time.monotonic() - t0 < 10.0
    assert bad.url in str(err.value) and "within 2 s" in str(err.value)


@pytest.mark.parametrize("bad", [Misbehaviour.TRICKLE_STREAM], indirect=True)
def test_a_trickling_warm_up_ends_at_its_total_time(bad, monkeypatch):
    """Findings 1 and 2: the warm-up stream has no deadline of its own; it is bounded by
    ``Stream.UNBUDGETED_READ_S`` in total (made short here)."""
    monkeypatch.setattr(Stream, "UNBUDGETED_READ_S", 2.0)
    engine = VllmEngine.connect(bad.url, timeout=1.0)
    t0 = time.monotonic()
    assert engine.warm(_request()) is False
    assert time.monotonic() - t0 < 10.0


@pytest.mark.parametrize("bad", [Misbehaviour.NOT_HTTP], indirect=True)
def test_a_peer_that_is_not_http_is_named_so_with_its_text_sanitised(bad):
    """Finding 8: an SSH banner with a NUL, an escape sequence and CRLF reaches the message
    only escaped, and the message does not say the server "does not answer": it did."""
    with pytest.raises(VllmError) as err:
        VllmEngine.connect(bad.url)
    message = str(err.value)
    assert bad.url in message and "not HTTP" in message and "does not answer" not in message
    assert "SSH-2.0-OpenSSH_9.6" in message
    assert not any(ch in message for ch in "\x00\x1b\r\n")


def test_a_server_that_is_not_there_cannot_be_reached():
    """Finding 8: nothing listening is "cannot be reached", not a claim about an answer."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(VllmError) as err:
        VllmEngine.connect(f"http://127.0.0.1:{port}")
    assert "cannot be reached" in str(err.value)


@pytest.mark.parametrize("bad", [(Misbehaviour.ENDLESS_LINE, 24 << 20)], indirect=True)
def test_a_model_servers_endless_line_is_refused_at_the_line_limit(bad):
    """Finding 1 for the engines over servers people run (``fim.servers``): their streams are
    read within the same line limit (before: ``http.client`` read the whole line)."""
    from fim.servers.engine import ServerOptions, connect
    from fim.servers.errors import ServerError

    engine = connect("openai", ServerOptions(bad.url, template="santacoder"))
    with pytest.raises(ServerError) as err:
        engine.complete(_request())
    assert "line longer than 1 MiB" in str(err.value)
    assert bad.sent < 12 << 20
