"""A raw JSON-RPC client for ``seam serve``, written from the LSP base protocol, not pygls.

The server under test must be judged by an independent implementation: this one writes any
bytes it is told to (broken frames included) and reads the server's output strictly: every
message must be ``Content-Length: N\\r\\n`` (plus an optional ``Content-Type``), a blank line
and N bytes of JSON. Anything else on the server's stdout is recorded as a violation.

``SeamProcess`` runs ``python -m lsp_server.cli serve`` from this checkout (``PYTHONPATH`` set
to the repository), on stdio; ``SeamSocket`` is the same client over a TCP connection.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 60.0
_MISSING = object()


def frame(payload: Any, *, length_delta: int = 0, header: bytes | None = None) -> bytes:
    """One LSP message; ``length_delta`` falsifies its Content-Length, ``header`` replaces
    the header line (``%d`` is filled with the length)."""
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    n = len(body) + length_delta
    head = (header % n) if header is not None else b"Content-Length: %d\r\n" % n
    return head + b"\r\n" + body


class StrictReader:
    """Splits the server's output into messages, recording anything that is not a frame."""

    def __init__(self) -> None:
        self.buf = b""
        self.violations: list[str] = []

    def feed(self, data: bytes) -> list[dict]:
        self.buf += data
        out = []
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > 4096 and b"\r\n\r\n" not in self.buf[:4096]:
                    self.violations.append(f"no header end in {self.buf[:80]!r}")
                    self.buf = b""
                return out
            length = None
            for line in self.buf[:end].split(b"\r\n"):
                name, sep, value = line.partition(b": ")
                if sep and name == b"Content-Length" and value.isdigit():
                    length = int(value)
                elif not (sep and name == b"Content-Type"):
                    self.violations.append(f"bad header line {line[:80]!r}")
            if length is None:
                self.violations.append("a header without Content-Length")
                self.buf = self.buf[end + 4:]
                continue
            if len(self.buf) < end + 4 + length:
                return out
            body = self.buf[end + 4:end + 4 + length]
            self.buf = self.buf[end + 4 + length:]
            try:
                out.append(json.loads(body))
            except ValueError:
                self.violations.append(f"content that is not JSON: {body[:80]!r}")


class _Client:
    """Request/response bookkeeping over some byte transport (see subclasses)."""

    def __init__(self) -> None:
        self.reader = StrictReader()
        self.received: list[dict] = []
        self._cond = threading.Condition()
        self._ids = itertools.count(1000)
        self.closed = False

    # transport hooks
    def send_raw(self, data: bytes) -> None:
        raise NotImplementedError

    def _on_bytes(self, data: bytes) -> None:
        messages = self.reader.feed(data)
        if messages:
            with self._cond:
                self.received.extend(messages)
                self._cond.notify_all()

    def _on_eof(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    # messages
    def send(self, payload: Any) -> None:
        self.send_raw(frame(payload))

    def request(self, method: str, params: Any = _MISSING, msg_id: Any = None) -> Any:
        msg_id = next(self._ids) if msg_id is None else msg_id
        message = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not _MISSING:
            message["params"] = params
        self.send(message)
        return msg_id

    def notify(self, method: str, params: Any = _MISSING) -> None:
        message = {"jsonrpc": "2.0", "method": method}
        if params is not _MISSING:
            message["params"] = params
        self.send(message)

    def wait_for(self, predicate: Callable[[list[dict]], Any], timeout: float = TIMEOUT_S,
                 what: str = "a message") -> Any:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = predicate(self.received)
                if found:
                    return found
                left = deadline - time.monotonic()
                if left <= 0 or self.closed:
                    raise AssertionError(
                        f"no {what} within {timeout}s (closed={self.closed}); got "
                        f"{json.dumps(self.received[-8:])[:2000]}")
                self._cond.wait(min(left, 0.5))

    def responses(self, msg_id: Any) -> list[dict]:
        with self._cond:
            return [m for m in self.received
                    if "method" not in m and m.get("id") == msg_id
                    and ("result" in m or "error" in m)]

    def response(self, msg_id: Any, timeout: float = TIMEOUT_S) -> dict:
        return self.wait_for(lambda _: (self.responses(msg_id) or [None])[0], timeout,
                             f"response to {msg_id!r}")

    def call(self, method: str, params: Any = _MISSING, timeout: float = TIMEOUT_S) -> dict:
        return self.response(self.request(method, params), timeout)

    def notifications(self, method: str) -> list[dict]:
        with self._cond:
            return [m for m in self.received if m.get("method") == method and "id" not in m]

    def shown_messages(self) -> list[str]:
        return [m["params"]["message"] for m in self.notifications("window/showMessage")]

    def initialize(self, init_options: Any = None, capabilities: dict | None = None,
                   **params: Any) -> dict:
        reply = self.call("initialize", {"processId": None, "rootUri": None,
                                         "capabilities": capabilities or {},
                                         "initializationOptions": init_options, **params})
        assert "result" in reply, reply
        return reply

    def status(self) -> dict:
        reply = self.call("seam/status", {})
        assert "result" in reply, reply
        return reply["result"]

    def alive(self) -> bool:
        """Whether the server still answers a request (it may be slow, not deaf)."""
        return "result" in self.call("seam/status", {})

    def wait_loaded(self, timeout: float = 300.0) -> dict:
        """Poll ``seam/status`` until the model load has ended (ready or error)."""
        deadline = time.monotonic() + timeout
        while True:
            st = self.status()
            if st["state"] in ("ready", "error"):
                return st
            assert time.monotonic() < deadline, f"model load did not end: {st}"
            time.sleep(0.2)

    def open(self, uri: str, text: str, language: str = "python", version: int = 1) -> None:
        self.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": language, "version": version, "text": text}})

    def inline(self, uri: str, line: int, character: int, timeout: float = TIMEOUT_S) -> dict:
        return self.call("textDocument/inlineCompletion", {
            "textDocument": {"uri": uri}, "position": {"line": line, "character": character},
            "context": {"triggerKind": 1}}, timeout)


class SeamProcess(_Client):
    """``seam serve`` on stdio, in a subprocess."""

    def __init__(self, tmp_path: Path, *args: str, env: dict[str, str] | None = None,
                 default_log: bool = False) -> None:
        """``default_log``: let the server pick its log file (under ``$XDG_STATE_HOME``, which
        is pointed into ``tmp_path``) instead of passing ``--log-file``."""
        super().__init__()
        full_env = dict(os.environ)
        full_env["PYTHONPATH"] = str(REPO) + os.pathsep + full_env.get("PYTHONPATH", "")
        full_env["HF_HUB_OFFLINE"] = "1"
        full_env["HF_HOME"] = str(tmp_path / "hf-home")
        full_env["XDG_STATE_HOME"] = str(tmp_path / "state")
        full_env.update(env or {})
        cmd = [sys.executable, "-m", "lsp_server.cli", "serve"]
        if default_log:
            self.log_file = Path(full_env["XDG_STATE_HOME"]) / "seam" / "server.log"
        else:
            self.log_file = tmp_path / "server.log"
            cmd += ["--log-file", str(self.log_file)]
        self.proc = subprocess.Popen(cmd + list(args), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=full_env, cwd=tmp_path)
        self._stderr: list[bytes] = []
        self._write_lock = threading.Lock()
        threading.Thread(target=self._pump_out, daemon=True).start()
        threading.Thread(target=self._pump_err, daemon=True).start()

    def _pump_out(self) -> None:
        out = self.proc.stdout
        while True:
            data = out.read1(65536)
            if not data:
                self._on_eof()
                return
            self._on_bytes(data)

    def _pump_err(self) -> None:
        while True:
            data = self.proc.stderr.read1(65536)
            if not data:
                return
            self._stderr.append(data)

    def send_raw(self, data: bytes) -> None:
        with self._write_lock:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    @property
    def stderr(self) -> str:
        return b"".join(self._stderr).decode("utf-8", "replace")

    def log_text(self) -> str:
        return self.log_file.read_text("utf-8", "replace") if self.log_file.exists() else ""

    def rss_kb(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def running(self) -> bool:
        return self.proc.poll() is None

    def close_stdin(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def wait(self, timeout: float = TIMEOUT_S) -> int:
        return self.proc.wait(timeout)

    def shutdown_and_exit(self) -> int:
        assert "result" in self.call("shutdown"), "shutdown not answered"
        self.notify("exit")
        return self.wait()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> SeamProcess:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.kill()


class SeamSocket(_Client):
    """The same client over a TCP connection."""

    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        super().__init__()
        self.sock = socket.create_connection((host, port), timeout=TIMEOUT_S)
        self.sock.settimeout(None)
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        while True:
            try:
                data = self.sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                self._on_eof()
                return
            self._on_bytes(data)

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def close(self) -> None:
        # shutdown() first: a close() alone does not end a connection that the reader thread
        # is still blocked on (Linux keeps the socket open until recv returns).
        for step in (lambda: self.sock.shutdown(socket.SHUT_RDWR), self.sock.close):
            try:
                step()
            except OSError:
                pass

    def __enter__(self) -> SeamSocket:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def no_traceback(*texts: str) -> None:
    for text in texts:
        assert "Traceback" not in text, text[-3000:]
