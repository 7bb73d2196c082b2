"""Issue 32's "done when" for the fallback: an editor with ``fallback: "local"`` keeps getting
suggestions while the team's vLLM server is stopped, and gets them from the server again once
it is back, with a real vLLM (``seam team-server``, the tiny Qwen model) and ``seam serve``
driven over stdio as an editor drives it.

Which engine answered is checked each time, not only that something answered: through the
status (``serving``, ``runtime.engine``), through vLLM's own log (the processor logs each
constrained row it finished: the server's answers add rows, the local model's do not), and by
the server being down while the local model answers.  The local model is the tiny in-process
``random:santacoder`` (``seam.model``), which ``.venv-team`` loads with transformers.
"""

from __future__ import annotations

import ast
import os
import time
from pathlib import Path

import pytest

import tests.team.test_vllm_server as vllm_server
from tests.support.team import REPO, TEAM_PYTHON, need_team_python
from tests.team.test_vllm_serve_lsp import StdioClient, _ready, _rows_done
from tests.team.test_vllm_server import CASES, Server

pytestmark = pytest.mark.slow

#: How long the language server may take to switch (the reconnect timer waits at most a
#: minute; a request asks at most every 10 s while the local model serves).
SWITCH_S = 180.0


class _Editor:
    """Completion requests at fresh places (a new document each time: the suggestion cache
    never answers), each checked to parse."""

    def __init__(self, client: StdioClient, root: Path) -> None:
        self.client, self.root, self.asked = client, root, 0

    def complete(self) -> list[str]:
        left, right, _ = CASES[self.asked % len(CASES)]
        uri = (self.root / f"place{self.asked}.py").as_uri()
        self.asked += 1
        text = left + right
        self.client.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": text}})
        line, character = left.count("\n"), len(left) - (left.rfind("\n") + 1)
        got = self.client.request("textDocument/inlineCompletion", {
            "textDocument": {"uri": uri}, "position": {"line": line, "character": character},
            "context": {"triggerKind": 1}})
        middles = [item["insertText"] for item in got["items"]]
        for middle in middles:
            line_end = text.find("\n", len(left))
            ast.parse(left + middle + text[line_end:])  # the constraint held, on either engine
        return middles

    def status(self) -> dict:
        return self.client.request("seam/status", {})

    def until_serving(self, serving: str) -> dict:
        """Ask for completions until the status says ``serving`` answers."""
        deadline = time.monotonic() + SWITCH_S
        while True:
            st = self.status()
            if st.get("serving") == serving:
                return st
            assert st["state"] != "error", st["message"]  # the fallback is never an error
            assert time.monotonic() < deadline, (serving, st["state"], st["message"])
            self.complete()
            time.sleep(0.5)


def _served_rows(editor: _Editor, server: Server) -> None:
    """Ask, and wait until the server's log shows a constrained row finished since: the
    plugin logs a row when vLLM takes it out of its batch, which may come only with the next
    request's step, so another request is asked every few polls (a read of the log right
    after the answer once found none, in CI)."""
    rows = _rows_done(server.log)
    editor.complete()
    deadline = time.monotonic() + SWITCH_S
    polls = 0
    while _rows_done(server.log) <= rows:
        assert time.monotonic() < deadline, server.tail()
        polls += 1
        if polls % 8 == 0:
            editor.complete()
        time.sleep(0.25)


def _restart(port: int, model: Path, log: Path, monkeypatch: pytest.MonkeyPatch) -> Server:
    """The team's server started again where it was (the same URL, as after a restart)."""
    monkeypatch.setattr(vllm_server, "_free_port", lambda: port)
    return Server(model, log, plugin=True)


def test_the_editor_keeps_suggestions_while_vllm_is_stopped_and_is_back_on_it_after(
        tmp_path, monkeypatch):
    need_team_python()
    from tests.support.tiny_qwen import write_tiny_qwen

    model = write_tiny_qwen(tmp_path / "tiny-qwen")
    server = Server(model, tmp_path / "vllm-1.log", plugin=True)
    port, url = server.port, f"http://127.0.0.1:{server.port}"
    client = StdioClient([str(TEAM_PYTHON), "-m", "lsp_server.cli", "serve", "--log-file",
                          str(tmp_path / "serve.log")], dict(os.environ, PYTHONPATH=str(REPO)))
    editor = _Editor(client, tmp_path)
    try:
        client.request("initialize", {
            "processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {},
            "initializationOptions": {"seam": {
                "engine": "vllm", "vllmServer": url, "fallback": "local",
                "model": "random:santacoder", "maxTokens": 24, "timeBudgetMs": 120000,
                "contextBudgetTokens": 64, "suggestions": 1}}})
        client.notify("initialized", {})
        st = _ready(client)
        assert st["serving"] == "server" and st["runtime"]["engine"] == "vllm"
        # 1. The server answers: its processor finishes constrained rows.
        _served_rows(editor, server)
        assert editor.status()["serving"] == "server"

        # 2. Stopped: the local model loads in the background and serves.
        server.stop()
        st = editor.until_serving("local")
        assert st["state"] == "fallback" and st["runtime"]["engine"] == "transformers"
        assert url in st["message"] and "unreachable since" in st["message"]
        assert st["message"].endswith("local model random:santacoder serving")
        before = len([r for r in st["recent"] if r["source"] == "model"])
        for _ in range(3):
            editor.complete()
        st = editor.status()
        decoded = [r for r in st["recent"] if r["source"] == "model"][before:]
        # Each answered by a decode (the server is down: the local model), none failed.
        assert len(decoded) == 3 and all(r["stop"] != "error" for r in decoded), decoded
        assert st["serving"] == "local"

        # 3. Back at the same URL: the server answers again, and rows show it did.
        server = _restart(port, model, tmp_path / "vllm-2.log", monkeypatch)
        st = editor.until_serving("server")
        assert st["state"] == "ready" and st["runtime"]["engine"] == "vllm"
        _served_rows(editor, server)
        assert editor.status()["serving"] == "server"
    finally:
        client.close()
        server.stop()
