"""``seam serve --tcp``: a token to get in, one client at a time, no client ends another's."""

from __future__ import annotations

import os
import re
import select
import socket
import stat
import subprocess
import sys
import time

import pytest

from tests.support.raw_client import REPO, SeamSocket, no_traceback

pytestmark = pytest.mark.timeout(300)

TOKEN = "token-for-the-tcp-tests-0123456789"


class TcpServer:
    """``seam serve --tcp 127.0.0.1:0`` in a subprocess; the port is read from its stderr."""

    def __init__(self, tmp_path, *args: str, token: str | None = TOKEN) -> None:
        env = dict(os.environ, PYTHONPATH=str(REPO), XDG_STATE_HOME=str(tmp_path / "state"))
        env.pop("SEAM_TCP_TOKEN", None)
        if token is not None:
            env["SEAM_TCP_TOKEN"] = token
        self.log_file = tmp_path / "server.log"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lsp_server.cli", "serve", "--tcp", "127.0.0.1:0",
             "--log-file", str(self.log_file), *args],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env=env, text=True)
        line = ""
        ready, _, _ = select.select([self.proc.stderr], [], [], 120)
        if ready:
            line = self.proc.stderr.readline()
        m = re.search(r"listening on 127\.0\.0\.1:(\d+); clients must send "
                      r'initializationOptions\.seamToken = "([^"]+)"', line)
        if m is None:
            self.stop()
            raise AssertionError(f"seam serve --tcp did not say where it listens: {line!r}")
        self.port, self.token = int(m.group(1)), m.group(2)

    def connect(self) -> SeamSocket:
        return SeamSocket(self.port)

    def session(self, token: str | None = None) -> SeamSocket:
        client = self.connect()
        client.initialize({"seamToken": token or self.token,
                           "seam": {"model": "random:santacoder"}})
        return client

    def stop(self) -> str:
        self.proc.terminate()
        try:
            _, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return err


@pytest.fixture
def tcp(tmp_path):
    server = TcpServer(tmp_path)
    yield server
    err = server.stop()
    no_traceback(err, server.log_file.read_text() if server.log_file.exists() else "")
    if server.log_file.exists():
        assert server.token not in server.log_file.read_text()


@pytest.mark.parametrize("options", [None, {}, {"seamToken": "wrong-token-of-some-length"},
                                     {"seamToken": 12345}, {"seam": {"token": TOKEN}}])
def test_a_client_without_the_token_is_refused(tcp, options) -> None:
    with tcp.connect() as intruder:
        # Before initialize nothing is served, with or without a token.
        assert intruder.call("seam/status", {})["error"]["code"] == -32002
        reply = intruder.call("initialize", {"processId": None, "rootUri": None,
                                             "capabilities": {},
                                             "initializationOptions": options})
        assert reply["error"]["code"] == -32600
        assert "seamToken" in reply["error"]["message"]
        intruder.wait_for(lambda _: intruder.closed, what="the connection to close")
    with tcp.session() as client:  # the server is still there for the rightful client
        assert client.alive()


def test_one_client_at_a_time_and_leaving_ends_only_your_own_session(tcp) -> None:
    with tcp.session() as first:
        first.open("file:///a.py", "x = 1\n")
        with tcp.connect() as second:
            reply = second.call("initialize", {
                "processId": None, "rootUri": None, "capabilities": {},
                "initializationOptions": {"seamToken": tcp.token}})
            assert reply["error"]["code"] == -32600
            assert "one client at a time" in reply["error"]["message"]
            second.wait_for(lambda _: second.closed, what="the second connection to close")
        # The second client's arrival and departure changed nothing for the first.
        st = first.status()
        assert st["documents"] == 1
        before = len(first.received)
        assert first.alive()
        # Nothing meant for another client reached the first.
        assert all(m.get("id") is not None for m in first.received[before:]
                   if "method" not in m)
    # The first left without exit: the server listens again, with a fresh session.
    with tcp.session() as third:
        assert third.status()["documents"] == 0


def test_exit_ends_the_session_not_the_server(tcp) -> None:
    with tcp.session() as client:
        assert client.call("shutdown")["result"] is None
        client.notify("exit")
        client.wait_for(lambda _: client.closed, what="the session to end")
    assert tcp.proc.poll() is None
    with tcp.session() as client:
        assert client.alive()


def test_idle_connections_cannot_lock_the_rightful_client_out(tcp) -> None:
    idle = [socket.create_connection(("127.0.0.1", tcp.port)) for _ in range(20)]
    try:
        time.sleep(0.5)
        with tcp.session() as client:
            assert client.alive()
    finally:
        for s in idle:
            s.close()


def test_garbage_from_a_stranger_leaves_the_server_up(tcp) -> None:
    with socket.create_connection(("127.0.0.1", tcp.port)) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + os.urandom(4096))
        s.sendall(b"Content-Length: 999999999999\r\n\r\n{")
    with tcp.session() as client:
        assert client.alive()


def test_token_file_and_generated_token(tmp_path) -> None:
    token_file = tmp_path / "token"
    server = TcpServer(tmp_path, "--token-file", str(token_file), token=None)
    try:
        assert len(server.token) >= 24 and server.token != TOKEN
        assert token_file.read_text().strip() == server.token
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        with server.session() as client:
            assert client.alive()
    finally:
        server.stop()


def test_busy_port_is_one_line_and_exit_2(tmp_path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "lsp_server.cli", "serve", "--tcp", str(port),
             "--log-file", ""], env=dict(os.environ, PYTHONPATH=str(REPO)),
            capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert f"cannot serve on 127.0.0.1:{port}" in proc.stderr and "in use" in proc.stderr
