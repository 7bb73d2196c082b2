"""``seam serve`` behind a real LSP client (pytest-lsp), with the random SantaCoder model."""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import json

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from lsp_server.documents import Document
from lsp_server.messages import StatusReply
from tests.support.seam_lsp_client import (
    TEST_MODEL,
    documented_examples,
    inline,
    insert_text,
    items_of,
    lsp_session,
    open_doc,
    raw_request,
    status,
    wait_ready,
)

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(300)]

needs_fim = pytest.mark.skipif(importlib.util.find_spec("fim.api") is None,
                               reason="fim.api is not there yet")

# (source with the hole marked by |, whether the hole is mid-line)
EXAMPLES = [
    "def add(a, b):\n    return |\n\nprint(add(1, 2))\n",
    "import os\n\nfor name in os.listdir('.'):\n    |\n",
    "values = [1, 2, 3]\ntotal = sum(|)\nprint(total)\n",
    "class Point:\n    def __init__(self, x, y):\n        self.x = x\n|\n\np = Point(1, 2)\n",
]


def split_hole(source: str) -> tuple[str, int, int]:
    before, after = source.split("|", 1)
    line = before.count("\n")
    col = len(before) - (before.rfind("\n") + 1)
    return before + after, line, col


def apply_inline(text: str, item: types.InlineCompletionItem) -> str:
    doc = Document("u", text, 1, "python")
    rng = item.range
    a, b = doc.offset_at(rng.start), doc.offset_at(rng.end)
    insert = item.insert_text if isinstance(item.insert_text, str) else item.insert_text.value
    return text[:a] + insert + text[b:]


async def test_capabilities(tmp_path) -> None:
    async with lsp_session(tmp_path, {"seam": {"model": TEST_MODEL}}) as lc:
        caps = lc.init_result.capabilities
        assert lc.init_result.server_info.name == "seam"
        assert caps.inline_completion_provider is not None
        assert caps.completion_provider is not None
        sync = caps.text_document_sync
        assert sync.change == types.TextDocumentSyncKind.Incremental and sync.open_close


async def test_load_failure_keeps_server_up(tmp_path) -> None:
    missing = str(tmp_path / "no-such-model")
    async with lsp_session(tmp_path, {"seam": {"model": missing}}) as lc:
        for _ in range(600):
            if any(m.type == types.MessageType.Error for m in lc.messages):
                break
            await asyncio.sleep(0.1)
        errors = [m.message for m in lc.messages if m.type == types.MessageType.Error]
        assert errors and "seam.model" in errors[0], lc.messages
        st = await status(lc)
        assert st["state"] == "error"
        uri = (tmp_path / "a.py").as_uri()
        open_doc(lc, uri, "x = 1\n")
        assert items_of(await inline(lc, uri, 0, 5)) == []
        if importlib.util.find_spec("fim.api") is None:
            return
        # The server still works: a corrected setting loads the model.
        lc.workspace_did_change_configuration(types.DidChangeConfigurationParams(
            settings={"seam": {"model": TEST_MODEL}}))
        # The server may answer a status request before it has applied the notification
        # (it can pull the configuration first): wait for the old error to go.
        for _ in range(600):
            if (await status(lc))["state"] != "error":
                break
            await asyncio.sleep(0.1)
        await wait_ready(lc)


GATED_MODEL_CODE = """
import os
import time

# The model stays "loading" until the test creates the gate file (or five minutes pass).
for _ in range(3000):
    if os.path.exists(os.environ["SEAM_TEST_GATE"]):
        break
    time.sleep(0.1)
from transformers import PretrainedConfig


class GatedConfig(PretrainedConfig):
    model_type = "seam-gated"
"""


async def test_requests_while_loading_answer_empty_at_once(tmp_path, monkeypatch) -> None:
    # A model whose own code blocks its load until the test opens a gate, so the request
    # below certainly arrives while the model is loading (a real, fast model might be ready
    # first, and then nothing would be tested).
    model = tmp_path / "gated-model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(
        {"model_type": "seam-gated", "auto_map": {"AutoConfig": "gated.GatedConfig"}}))
    (model / "gated.py").write_text(GATED_MODEL_CODE)
    gate = tmp_path / "gate"
    monkeypatch.setenv("SEAM_TEST_GATE", str(gate))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    async with lsp_session(tmp_path, {"seam": {"model": str(model), "device": "cpu"}},
                           extra_args=("--trust-remote-code",)) as lc:
        try:
            for _ in range(600):
                if (await status(lc))["state"] == "loading":
                    break
                await asyncio.sleep(0.1)
            uri = (tmp_path / "a.py").as_uri()
            open_doc(lc, uri, "x = \n")
            assert items_of(await inline(lc, uri, 0, 4)) == []
            # Still loading after the answer: it was given without waiting for the model.
            assert (await status(lc))["state"] == "loading"
        finally:
            gate.touch()  # the load goes on (and fails: this is no real model)


@needs_fim
@pytest.mark.parametrize("constrained", [False, True])
async def test_completion_on_examples(tmp_path, constrained) -> None:
    settings = {"model": TEST_MODEL, "constrained": constrained, "maxTokens": 12}
    async with lsp_session(tmp_path, {"seam": settings}) as lc:
        await wait_ready(lc)
        answered = 0
        for i, example in enumerate(EXAMPLES):
            text, line, col = split_hole(example)
            uri = (tmp_path / f"ex{i}.py").as_uri()
            open_doc(lc, uri, text)
            result = await inline(lc, uri, line, col)
            for item in items_of(result):
                answered += 1
                assert item.range.start == types.Position(line=line, character=col)
                assert item.range.end.line == line
                new = apply_inline(text, item)
                assert new != text
                if constrained:
                    ast.parse(new)
            comp = await lc.text_document_completion_async(types.CompletionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                position=types.Position(line=line, character=col)))
            assert comp is not None and comp.is_incomplete
            for item in comp.items:
                assert item.text_edit.range.start == types.Position(line=line, character=col)
        assert answered > 0, "no example got a suggestion"
        # The model load was reported as work-done progress, begun and ended.
        kinds = [[type(v).__name__ for v in reports] for reports in lc.progress_reports.values()]
        assert any(k and k[0] == "WorkDoneProgressBegin" and k[-1] == "WorkDoneProgressEnd"
                   for k in kinds), kinds
        st = await status(lc)
        assert any(r.get("source") == "model" for r in st["recent"])
        # What the server sends is what docs/INTERFACES.md shows, member for member.
        documented = documented_examples()
        assert set(st) == set(documented["seam/status request"])
        assert all(set(r) <= set(documented["completion record"]) for r in st["recent"])
        assert all(set(d) <= set(documented["decode record"]) for d in st["decodes"])
        assert StatusReply.from_json(st).to_json() == st


@needs_fim
async def test_typing_through_skips_the_model(tmp_path) -> None:
    settings = {"model": TEST_MODEL, "constrained": False, "maxTokens": 8}
    async with lsp_session(tmp_path, {"seam": settings}) as lc:
        await wait_ready(lc)
        uri = (tmp_path / "t.py").as_uri()
        text = "x = \n"
        open_doc(lc, uri, text)
        items = items_of(await inline(lc, uri, 0, 4))
        if not items or len(items[0].insert_text) < 2:
            pytest.skip("the random model produced no multi-character middle here")
        first = items[0].insert_text[0]
        if first == "\n":
            pytest.skip("middle starts with a newline")
        insert_text(lc, uri, 2, 0, 4, first)
        again = items_of(await inline(lc, uri, 0, 5))
        assert again and again[0].insert_text == items[0].insert_text[1:]
        st = await status(lc)
        assert st["recent"][-1]["source"] == "typed-through"


@needs_fim
async def test_cancel_request_stops_the_decode(tmp_path) -> None:
    # A long budget so that only the cancellation can end the decode early.
    settings = {"model": TEST_MODEL, "constrained": False, "maxTokens": 400,
                "timeBudgetMs": 120000}
    async with lsp_session(tmp_path, {"seam": settings}) as lc:
        await wait_ready(lc)
        uri = (tmp_path / "c.py").as_uri()
        open_doc(lc, uri, "def f():\n    \n")
        msg_id = "cancel-me"
        future = lc.protocol.send_request(
            types.TEXT_DOCUMENT_INLINE_COMPLETION,
            types.InlineCompletionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                position=types.Position(line=1, character=4),
                context=types.InlineCompletionContext(
                    trigger_kind=types.InlineCompletionTriggerKind.Automatic)),
            msg_id=msg_id)
        for _ in range(3000):  # cancel once the worker is decoding it
            if uri in (await status(lc))["running"]:
                break
            await asyncio.sleep(0.01)
        lc.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
        with pytest.raises(JsonRpcException) as err:
            await asyncio.wait_for(asyncio.wrap_future(future), 60)
        assert err.value.code == -32800  # RequestCancelled
        for _ in range(300):
            decodes = (await status(lc))["decodes"]
            if decodes:
                break
            await asyncio.sleep(0.1)
        assert decodes, "the decode never finished"
        last = decodes[-1]
        assert last["stop"] == "cancelled" and last["tokens"] < 400, last
        # The server still answers.
        assert (await status(lc))["state"] == "ready"


@needs_fim
async def test_newer_request_supersedes_older(tmp_path) -> None:
    settings = {"model": TEST_MODEL, "constrained": False, "maxTokens": 400,
                "timeBudgetMs": 120000}
    async with lsp_session(tmp_path, {"seam": settings}) as lc:
        await wait_ready(lc)
        uri = (tmp_path / "s.py").as_uri()
        open_doc(lc, uri, "def f():\n    \n")
        first = asyncio.ensure_future(inline(lc, uri, 1, 4))
        for _ in range(3000):
            if uri in (await status(lc))["running"]:
                break
            await asyncio.sleep(0.01)
        lc.workspace_did_change_configuration(types.DidChangeConfigurationParams(
            settings={"seam": {"maxTokens": 4}}))
        second = await inline(lc, uri, 1, 4)
        older = await first
        assert items_of(older) == []  # superseded: answered, empty
        decodes = (await status(lc))["decodes"]
        assert decodes[0]["stop"] == "cancelled", decodes
        assert isinstance(items_of(second), list)


async def test_settings_changes_and_bad_values(tmp_path) -> None:
    async with lsp_session(tmp_path, {"seam": {"model": TEST_MODEL}}) as lc:
        lc.workspace_did_change_configuration(types.DidChangeConfigurationParams(
            settings={"seam": {"maxTokens": -3, "scope": "block", "languages": ["python", "x"],
                               "constrained": False}}))
        for _ in range(100):
            st = await status(lc)
            if st["settings"]["scope"] == "block":
                break
            await asyncio.sleep(0.05)
        assert st["settings"]["scope"] == "block"
        assert st["settings"]["languages"] == ["python", "x"]
        assert st["settings"]["constrained"] is False
        assert st["settings"]["maxTokens"] == "auto"  # -3 was refused, previous kept
        warnings = [m.message for m in lc.messages if m.type == types.MessageType.Warning]
        assert any("maxTokens" in w for w in warnings)


async def _runtime_when_ready(lc) -> dict:
    for _ in range(600):
        st = await status(lc)
        if st["state"] == "ready" and "runtime" in st:
            return st["runtime"]
        await asyncio.sleep(0.05)
    raise AssertionError(f"never ready: {st}")


async def test_the_model_is_loaded_for_the_context_setting(tmp_path) -> None:
    # llama.cpp sizes its cache when it loads: a context setting the loaded model cannot hold
    # must reload it, or requests would be cut to the old window without a word.
    async with lsp_session(tmp_path, {"seam": {"model": TEST_MODEL, "contextTokens": 300}}) as lc:
        assert (await _runtime_when_ready(lc))["window"] == 300
        lc.workspace_did_change_configuration(types.DidChangeConfigurationParams(
            settings={"seam": {"model": TEST_MODEL, "contextTokens": 600}}))
        for _ in range(600):
            runtime = await _runtime_when_ready(lc)
            if runtime["window"] != 300:
                break
            await asyncio.sleep(0.05)
        assert runtime["window"] == 600


async def test_pull_configuration(tmp_path) -> None:
    config = {"seam": {"model": TEST_MODEL, "topK": 7}}
    async with lsp_session(tmp_path, None, configuration=config) as lc:
        for _ in range(100):
            st = await status(lc)
            if st["settings"]["topK"] == 7:
                break
            await asyncio.sleep(0.05)
        assert st["settings"]["topK"] == 7 and st["settings"]["model"] == TEST_MODEL


@needs_fim
async def test_bad_requests_never_crash(tmp_path) -> None:
    async with lsp_session(tmp_path, {"seam": {"model": TEST_MODEL, "constrained": False,
                                               "maxTokens": 4}}) as lc:
        await wait_ready(lc)
        uri = (tmp_path / "b.py").as_uri()
        open_doc(lc, uri, 'x = "😋"\ny = 1\n')
        # Position beyond the end of the document.
        assert items_of(await inline(lc, uri, 50, 0)) == []
        # Unknown URI.
        assert items_of(await inline(lc, (tmp_path / "nope.py").as_uri(), 0, 0)) == []
        # Inside a UTF-16 surrogate pair.
        assert items_of(await inline(lc, uri, 0, 6)) == []
        # Column past the end of the line: clamped (LSP), so a normal answer.
        assert isinstance(items_of(await inline(lc, uri, 1, 999)), list)
        # A non-Python document: served too (unchecked, tests/lsp_server/test_every_language).
        md = (tmp_path / "r.md").as_uri()
        open_doc(lc, md, "# title\n\ntext", language="markdown")
        assert isinstance(items_of(await inline(lc, md, 2, 4)), list)
        # Negative coordinates break the schema: a JSON-RPC error, not a crash.
        with pytest.raises(JsonRpcException):
            await raw_request(lc, types.TEXT_DOCUMENT_INLINE_COMPLETION, {
                "textDocument": {"uri": uri}, "position": {"line": -1, "character": -5},
                "context": {"triggerKind": 1}})
        # A 5 MB document: opened, edited and completed in without error.
        big = (tmp_path / "big.py").as_uri()
        line = "value_%07d = compute(%d, 'some text to fill the line')\n"
        text = "".join(line % (i, i) for i in range(5 * 1024 * 1024 // 56))
        assert len(text) >= 5_000_000
        open_doc(lc, big, text)
        insert_text(lc, big, 2, 1000, 0, "x = \n")
        result = await asyncio.wait_for(inline(lc, big, 1000, 4), 120)
        assert isinstance(items_of(result), list)
        st = await status(lc)
        assert st["state"] == "ready" and st["documents"] == 3
    log = (tmp_path / "server.log").read_text()
    assert "Traceback" not in log, log[-3000:]
