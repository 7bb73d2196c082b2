"""Helpers to run ``seam serve`` as a subprocess behind a real LSP client (pytest-lsp)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities
from pytest_lsp.client import make_test_lsp_client

REPO = Path(__file__).resolve().parents[2]
TEST_MODEL = "random:santacoder"


def server_command(log_file: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "lsp_server.cli", "serve", "--log-file", str(log_file),
            *extra]


def server_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


@contextlib.asynccontextmanager
async def lsp_session(tmp_path: Path, init_options: dict[str, Any] | None = None,
                      client: str = "visual_studio_code", configuration: dict | None = None,
                      extra_args: tuple[str, ...] = ()) -> AsyncIterator[LanguageClient]:
    """A started, initialized client talking to a fresh ``seam serve`` over stdio."""
    lc = make_test_lsp_client()
    if configuration is not None:
        lc.set_configuration(configuration)
    await lc.start_io(*server_command(tmp_path / "server.log", *extra_args), env=server_env())
    try:
        lc.init_result = await asyncio.wait_for(lc.initialize_session(types.InitializeParams(
            capabilities=client_capabilities(client),
            initialization_options=init_options,
            root_uri=tmp_path.as_uri())), 60)
        yield lc
        await asyncio.wait_for(lc.shutdown_session(), 30)
    finally:
        proc = lc._server
        if proc is not None and proc.returncode is None:
            # The test failed before a clean shutdown: do not leave the server running.
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()
        await lc.stop()


def plain(value: Any) -> Any:
    """pygls hands untyped results back as named tuples: turn them into dicts and lists."""
    if hasattr(value, "_asdict"):
        value = value._asdict()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


async def status(lc: LanguageClient) -> dict[str, Any]:
    return plain(await lc.protocol.send_request_async("seam/status", {}))


async def wait_ready(lc: LanguageClient, timeout: float = 180.0) -> dict[str, Any]:
    """Poll ``seam/status`` until the model is ready (or failed: then raise)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        st = await status(lc)
        if st["state"] == "ready":
            return st
        if st["state"] == "error":
            raise RuntimeError(f"model failed to load: {st['message']}")
        if loop.time() > deadline:
            raise TimeoutError(f"model not ready after {timeout}s: {st}")
        await asyncio.sleep(0.1)


async def raw_request(lc: LanguageClient, method: str, params: dict[str, Any],
                      msg_id: str = "raw") -> Any:
    """Send ``params`` as-is (bypassing the client's schema) and await the answer."""
    future: Future[Any] = Future()
    lc.protocol._request_futures[msg_id] = future
    lc.protocol._send_data({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
    return await asyncio.wait_for(asyncio.wrap_future(future), 60)


def open_doc(lc: LanguageClient, uri: str, text: str, language: str = "python") -> None:
    lc.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id=language, version=1,
                                             text=text)))


def insert_text(lc: LanguageClient, uri: str, version: int, line: int, character: int,
                text: str) -> None:
    """Send the edit that inserts ``text`` at ``line``:``character`` (a ranged ``didChange``,
    as an editor sends for typing or pasting)."""
    at = types.Position(line=line, character=character)
    lc.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=at, end=at), text=text)]))


async def inline(lc: LanguageClient, uri: str, line: int, character: int
                 ) -> types.InlineCompletionList | list | None:
    return await lc.text_document_inline_completion_async(types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(line=line, character=character),
        context=types.InlineCompletionContext(
            trigger_kind=types.InlineCompletionTriggerKind.Invoked)))


def items_of(result: Any) -> list:
    if result is None:
        return []
    if isinstance(result, list):
        return result
    return list(result.items)


def documented_examples() -> dict[str, Any]:
    """The JSON examples of Seam's own messages in docs/INTERFACES.md, by their heading
    (``### `seam/cursor` notification (client -> server)`` -> ``seam/cursor notification``)."""
    import json
    import re

    text = (REPO / "docs" / "INTERFACES.md").read_text(encoding="utf-8")
    part = text.split("## lsp_server: Seam's own messages", 1)[1]
    found = {}
    for heading, body in re.findall(r"^### (.+?)\n(.*?)(?=^### |\Z)", part, re.M | re.S):
        block = re.search(r"```json\n(.*?)```", body, re.S)
        if block is not None:
            name = re.sub(r"\s*\(.*?\)", "", heading).replace("`", "").strip()
            found[name] = json.loads(block.group(1))
    return found
