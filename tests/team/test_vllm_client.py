"""The ``vllm`` engine's client side without vLLM: a server that is down, answers garbage or
never answers gives a clear ``VllmError`` (never a hang), and the streamed answer becomes a
middle the way the in-process engine makes one."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from fim.api import CompletionRequest
from fim.options import StopReason
from fim.vllm.answers import finish
from fim.vllm.client import VllmEngine, VllmError
from fim.vllm.stream import Streamed


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Garbage(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - the http.server protocol
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"<html>not a model list</html>")

    def log_message(self, *args):
        pass


@pytest.fixture
def garbage_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Garbage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_server_that_is_down_is_named():
    with pytest.raises(VllmError, match=r"at http://127\.0\.0\.1:\d+ cannot be reached"):
        VllmEngine.connect(f"http://127.0.0.1:{_closed_port()}")


def test_garbage_is_refused(garbage_server):
    with pytest.raises(VllmError, match="no JSON"):
        VllmEngine.connect(garbage_server)


@pytest.mark.timeout(30)
def test_a_silent_server_times_out():
    with socket.socket() as listener:  # accepts connections, never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with pytest.raises(VllmError, match=r"did not finish its answer within 0\.5 s"):
            VllmEngine.connect(f"http://127.0.0.1:{port}", timeout=0.5)


@pytest.mark.parametrize("url", ["", "ftp://x", "127.0.0.1:8000"])
def test_bad_urls(url):
    with pytest.raises(VllmError):
        VllmEngine.connect(url)


def test_finish_keeps_cuts_or_gives_up():
    req = CompletionRequest("x = (1 +", ")\n")
    assert finish(req, Streamed(" 2", "stop")) == (" 2", StopReason.EOS, True)
    # Out of tokens: cut back to the longest prefix with which the file parses.
    assert finish(req, Streamed(" 2 + (", "length")) == (" 2 ", StopReason.BEST_COMPLETE,
                                                            True)
    assert finish(req, Streamed("", None, StopReason.CANCELLED))[1] is StopReason.CANCELLED
    assert finish(req, Streamed(" (", "length")) == (None, StopReason.NO_CANDIDATE, False)
    line = CompletionRequest("x = [1,", "]\n", line_stop=True)
    assert finish(line, Streamed(" 2\n, 3", "stop")) == (" 2", StopReason.LINE_END, True)
