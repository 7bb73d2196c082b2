"""A minimal raw LSP client over stdio for benchmarks: ``seam serve`` as an editor sees it.

It speaks JSON-RPC with ``Content-Length`` framing directly (no client library between the
clock and the wire), keeps documents' text and versions so that edits are sent as the
incremental changes an editor sends, and answers the server's own requests
(``workspace/configuration``, ``window/workDoneProgress/create``) the way VS Code does.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def position_of(text: str, offset: int) -> dict[str, int]:
    """LSP position (UTF-16 columns) of ``offset`` in ``text``."""
    line = text.count("\n", 0, offset)
    start = text.rfind("\n", 0, offset) + 1
    col = len(text[start:offset].encode("utf-16-le")) // 2
    return {"line": line, "character": col}


class LspSession:
    """One ``seam serve`` subprocess and its documents."""

    def __init__(self, settings: dict[str, Any], log_file: Path,
                 extra_args: list[str] | None = None, root_uri: str | None = None,
                 root: Path = ROOT) -> None:
        self.settings = settings
        #: the checkout whose server runs (another one's: a baseline in the same run)
        self.root = root
        self.root_uri = root_uri
        self.log_file = log_file
        self.extra_args = extra_args or []
        self.proc: asyncio.subprocess.Process | None = None
        self._next = 0
        self._waiting: dict[int, asyncio.Future] = {}
        self._reader: asyncio.Task | None = None
        self.texts: dict[str, str] = {}
        self.versions: dict[str, int] = {}
        self.notifications: list[tuple[float, str, Any]] = []
        self.initialized_at: float | None = None
        self.ready_after_initialize_s: float | None = None

    async def start(self) -> float:
        """Start the server and initialize; seconds from the process's spawn until the
        model is ready (``ready_after_initialize_s`` holds the part after ``initialize``
        was answered)."""
        env = dict(os.environ)
        env["PYTHONPATH"] = str(self.root) + os.pathsep + env.get("PYTHONPATH", "")
        t0 = time.perf_counter()
        # In the checkout's folder: ``python -m`` puts the working folder first on the path,
        # ahead of PYTHONPATH, so a baseline started from this checkout's folder ran this
        # checkout's code.
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "lsp_server.cli", "serve", "--log-file", str(self.log_file),
            *self.extra_args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            env=env, limit=1 << 24, cwd=str(self.root))
        self._reader = asyncio.create_task(self._read())
        await self.request("initialize", {
            "processId": os.getpid(), "rootUri": self.root_uri, "initializationOptions":
                {"seam": self.settings},
            "capabilities": {"workspace": {"configuration": True},
                             "window": {"workDoneProgress": True},
                             "general": {"positionEncodings": ["utf-16"]}}})
        self.notify("initialized", {})
        self.initialized_at = time.perf_counter()
        while True:
            st = await self.request("seam/status", {})
            if st["state"] == "ready":
                now = time.perf_counter()
                self.ready_after_initialize_s = now - self.initialized_at
                return now - t0
            if st["state"] == "error":
                raise RuntimeError(f"model failed to load: {st['message']}")
            await asyncio.sleep(0.05)

    def _send(self, message: dict) -> None:
        body = json.dumps(message).encode("utf-8")
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        out = self.proc.stdout
        while True:
            length = None
            while True:
                line = await out.readline()
                if not line:
                    return
                line = line.strip()
                if not line:
                    break
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            message = json.loads(await out.readexactly(length))
            if "id" in message and "method" in message:  # a request from the server
                self._answer(message)
            elif "id" in message:
                fut = self._waiting.pop(message["id"], None)
                if fut is not None and not fut.done():
                    fut.set_result(message)
            else:
                self.notifications.append((time.perf_counter(), message.get("method"),
                                           message.get("params")))

    def _answer(self, message: dict) -> None:
        method = message["method"]
        result: Any = None
        if method == "workspace/configuration":
            result = [self.settings for _ in message["params"]["items"]]
        self._send({"jsonrpc": "2.0", "id": message["id"], "result": result})

    async def request(self, method: str, params: Any, timeout: float = 600.0) -> Any:
        self._next += 1
        fut = asyncio.get_running_loop().create_future()
        self._waiting[self._next] = fut
        self._send({"jsonrpc": "2.0", "id": self._next, "method": method, "params": params})
        reply = await asyncio.wait_for(fut, timeout)
        if "error" in reply:
            raise RuntimeError(f"{method} failed: {reply['error']}")
        return reply.get("result")

    def notify(self, method: str, params: Any) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    # ----- documents -----------------------------------------------------------------------

    def open(self, uri: str, text: str) -> None:
        self.texts[uri], self.versions[uri] = text, 1
        self.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": text}})

    def edit(self, uri: str, start: int, end: int, new: str) -> None:
        """Replace ``[start, end)`` of the document by ``new`` (one incremental change)."""
        text = self.texts[uri]
        rng = {"start": position_of(text, start), "end": position_of(text, end)}
        self.texts[uri] = text[:start] + new + text[end:]
        self.versions[uri] += 1
        self.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": self.versions[uri]},
            "contentChanges": [{"range": rng, "text": new}]})

    def cursor(self, uri: str, offset: int) -> None:
        """What Seam's editor clients send when the cursor moves or rests."""
        self.notify("seam/cursor", {"textDocument": {"uri": uri},
                                    "position": position_of(self.texts[uri], offset)})

    async def inline(self, uri: str, offset: int) -> tuple[str | None, float]:
        """The suggestion at ``offset`` (the text inserted at the cursor) and the seconds the
        request took, as the client saw it."""
        t0 = time.perf_counter()
        res = await self.request("textDocument/inlineCompletion", {
            "textDocument": {"uri": uri}, "position": position_of(self.texts[uri], offset),
            "context": {"triggerKind": 2}})
        took = time.perf_counter() - t0
        items = (res or {}).get("items") or []
        if not items:
            return None, took
        item = items[0]
        insert = item["insertText"]
        if isinstance(insert, dict):
            insert = insert.get("value", "")
        # The item replaces the rest of the line after the cursor: keep only the new part.
        text = self.texts[uri]
        line_end = text.find("\n", offset)
        rest = text[offset:line_end if line_end >= 0 else len(text)]
        if rest and insert.endswith(rest):
            insert = insert[: len(insert) - len(rest)]
        return insert, took

    def peak_rss_mb(self) -> float:
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
        return 0.0

    async def close(self) -> None:
        try:
            await asyncio.wait_for(self.request("shutdown", None), 30)
            self.notify("exit", None)
            assert self.proc is not None
            await asyncio.wait_for(self.proc.wait(), 15)
        except (TimeoutError, RuntimeError, ConnectionError):
            if self.proc is not None and self.proc.returncode is None:
                self.proc.kill()
        if self._reader is not None:
            self._reader.cancel()
