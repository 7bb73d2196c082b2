"""``seam serve`` transport: address parsing, TCP on loopback, and a stdout that is all protocol."""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lsp_server.cli import DEFAULT_HOST, parse_tcp

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(300)


def test_parse_tcp() -> None:
    assert parse_tcp("8765") == (DEFAULT_HOST, 8765)
    assert parse_tcp("0.0.0.0:1") == ("0.0.0.0", 1)
    assert parse_tcp("[::1]:9") == ("::1", 9)
    assert parse_tcp(":5") == (DEFAULT_HOST, 5)
    for bad in ("x", "1:2:z", "70000"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_tcp(bad)


def frame(payload: dict) -> bytes:
    body = json.dumps(payload).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def read_frames(data: bytes) -> list[dict]:
    """Split a byte stream into LSP messages; fail on anything that is not a frame."""
    out = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        assert sep, f"stray bytes on stdout: {data[:200]!r}"
        length = None
        for line in head.split(b"\r\n"):
            name, _, value = line.partition(b":")
            assert name.strip().lower() in (b"content-length", b"content-type"), line
            if name.strip().lower() == b"content-length":
                length = int(value)
        assert length is not None
        out.append(json.loads(rest[:length]))
        data = rest[length:]
    return out


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(REPO) + os.pathsep + e.get("PYTHONPATH", "")
    return e


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"processId": None, "rootUri": None, "capabilities": {},
                   "initializationOptions": {"seam": {"model": "random:santacoder"}}}}


def test_stdout_carries_only_protocol(tmp_path) -> None:
    # A full session, model load included: whatever libraries print must not reach stdout.
    messages = [INIT, {"jsonrpc": "2.0", "method": "initialized", "params": {}},
                {"jsonrpc": "2.0", "id": 2, "method": "seam/status", "params": {}},
                {"jsonrpc": "2.0", "id": 3, "method": "shutdown", "params": None},
                {"jsonrpc": "2.0", "method": "exit", "params": None}]
    proc = subprocess.Popen(
        [sys.executable, "-m", "lsp_server.cli", "serve", "--log-file", str(tmp_path / "l")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env())
    try:
        proc.stdin.write(b"".join(frame(m) for m in messages[:2]))
        proc.stdin.flush()
        time.sleep(3)  # let the model load start printing, if it prints at all
        proc.stdin.write(b"".join(frame(m) for m in messages[2:]))
        proc.stdin.close()
        out = proc.stdout.read()
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0  # exits cleanly once `exit` follows `shutdown`
    frames = read_frames(out)
    ids = {f.get("id") for f in frames if "result" in f or "error" in f}
    assert {1, 2, 3} <= ids
    init = next(f for f in frames if f.get("id") == 1)
    assert "inlineCompletionProvider" in init["result"]["capabilities"]


def listening_addresses(port: int) -> list[str]:
    """IPv4 addresses with a socket listening on ``port``, from /proc/net/tcp (Linux)."""
    table = Path("/proc/net/tcp")
    if not table.exists():
        pytest.skip("needs /proc/net/tcp")
    found = []
    for row in table.read_text().splitlines()[1:]:
        local, state = row.split()[1], row.split()[3]
        ip_hex, port_hex = local.split(":")
        if int(port_hex, 16) == port and state == "0A":  # 0A: LISTEN
            found.append(socket.inet_ntoa(bytes.fromhex(ip_hex)[::-1]))
    return found


def test_tcp_listens_on_loopback(tmp_path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = "a-test-token-of-enough-length"
    proc = subprocess.Popen(
        [sys.executable, "-m", "lsp_server.cli", "serve", "--tcp", str(port),
         "--log-file", str(tmp_path / "l")],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**env(), "SEAM_TCP_TOKEN": token})
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                conn = socket.create_connection(("127.0.0.1", port), timeout=5)
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "server not up"
                time.sleep(0.2)
        with conn:
            init = json.loads(json.dumps(INIT))
            init["params"]["initializationOptions"]["seamToken"] = token
            conn.sendall(frame(init))
            data = b""
            conn.settimeout(60)
            while b'"id": 1' not in data and b'"id":1' not in data:
                chunk = conn.recv(65536)
                assert chunk, "connection closed"
                data += chunk
            head, _, rest = data.partition(b"\r\n\r\n")
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length"))
            while len(rest) < length:
                rest += conn.recv(65536)
            reply = json.loads(rest[:length])
            assert reply["result"]["serverInfo"]["name"] == "seam"
        # Only loopback: the listening socket is bound to 127.0.0.1, not to every interface.
        assert listening_addresses(port) == ["127.0.0.1"]
    finally:
        proc.terminate()
        proc.wait(30)
