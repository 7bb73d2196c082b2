"""``seam serve`` with ``engine: "vllm"`` against a real vLLM server running Seam's processor,
through an LSP session: the editor's suggestions come from vLLM, constrained (the processor
logs each constrained row it finished), and every suggestion makes the file parse.

The LSP client here is a few lines of JSON-RPC over the server's stdio (the team environment
has the server's packages but not pytest-lsp).  Skipped, or failed, as the other vLLM tests
(``tests/support/team.py``); the vLLM server starts as in ``test_vllm_server.py``.
"""

from __future__ import annotations

import ast
import json
import os
import queue
import re
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.team import REPO, TEAM_PYTHON, need_team_python
from tests.team.test_vllm_server import CASES, Server

pytestmark = pytest.mark.slow


class StdioClient:
    """A JSON-RPC client of ``seam serve`` over its stdin and stdout."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, cwd=REPO)
        self.inbox: queue.Queue = queue.Queue()
        self.notes: list[dict] = []
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            self.inbox.put(json.loads(out.read(length)))

    def send(self, message: dict) -> None:
        raw = json.dumps(dict(message, jsonrpc="2.0")).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(raw) + raw)
        self.proc.stdin.flush()

    def notify(self, method: str, params: Any) -> None:
        self.send({"method": method, "params": params})

    def request(self, method: str, params: Any, timeout: float = 300.0) -> Any:
        self.next_id += 1
        wanted = self.next_id
        self.send({"id": wanted, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while True:
            msg = self.inbox.get(timeout=max(0.1, deadline - time.monotonic()))
            if "method" in msg and "id" in msg:  # the server asks: the client has nothing
                self.send({"id": msg["id"], "result": None})
            elif "method" in msg:
                self.notes.append(msg)
            elif msg.get("id") == wanted:
                assert "error" not in msg, msg
                return msg["result"]

    def close(self) -> None:
        try:
            self.request("shutdown", None, timeout=30)
            self.notify("exit", None)
            self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module")
def vllm(tmp_path_factory):
    need_team_python()
    from tests.support.tiny_qwen import write_tiny_qwen

    work = tmp_path_factory.mktemp("vllm-lsp")
    server = Server(write_tiny_qwen(work / "tiny-qwen"), work / "seam.log", plugin=True)
    try:
        yield server
    finally:
        server.stop()


def _ready(client: StdioClient, timeout: float = 300.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = client.request("seam/status", {})
        assert st["state"] != "error", st["message"]
        if st["state"] == "ready":
            return st
        time.sleep(0.2)
    raise TimeoutError("seam serve did not connect to vLLM")


def test_seam_serve_completes_through_vllm(vllm, tmp_path):
    url = f"http://127.0.0.1:{vllm.port}"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    client = StdioClient([str(TEAM_PYTHON), "-m", "lsp_server.cli", "serve", "--log-file",
                          str(tmp_path / "serve.log")], env)
    try:
        client.request("initialize", {
            "processId": None, "rootUri": Path(tmp_path).as_uri(), "capabilities": {},
            "initializationOptions": {"seam": {
                "engine": "vllm", "vllmServer": url, "maxTokens": 48,
                "timeBudgetMs": 120000, "contextBudgetTokens": 64}}})
        client.notify("initialized", {})
        st = _ready(client)
        assert st["runtime"]["engine"] == "vllm" and url in st["runtime"]["description"]
        rows_before = _rows_done(vllm.log)
        answered = 0
        for k, (left, right, _) in enumerate(CASES):
            uri = (tmp_path / f"case{k}.py").as_uri()
            text = left + right
            client.notify("textDocument/didOpen", {"textDocument": {
                "uri": uri, "languageId": "python", "version": 1, "text": text}})
            line = left.count("\n")
            character = len(left) - (left.rfind("\n") + 1)
            got = client.request("textDocument/inlineCompletion", {
                "textDocument": {"uri": uri}, "position": {"line": line, "character": character},
                "context": {"triggerKind": 1}})
            for item in got["items"]:
                line_end = text.find("\n", len(left))
                ast.parse(left + item["insertText"] + text[line_end:])  # it parses
                answered += 1
        # The editor's requests went through Seam's processor on the server.
        rows = _rows_done(vllm.log) - rows_before
        print(f"\nseam serve through vLLM: {answered} of {len(CASES)} cursors answered, "
              f"{rows} constrained rows on the server")
        assert rows >= len(CASES), vllm.tail()
        recent = client.request("seam/status", {})["recent"]
        assert not [r for r in recent if r["stop"] == "error"], recent
        assert answered >= len(CASES) // 2
    finally:
        client.close()


def _rows_done(log: Path) -> int:
    return len(re.findall(r"seam row done: ", log.read_text(errors="replace")))
