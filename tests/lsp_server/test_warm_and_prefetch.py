"""The server's latency features through a real client: the cursor's resting place is warmed,
a shown suggestion is followed by the next one as if it were accepted, an empty line is
answered with its first line while the block goes on into the cache, and the engine setting.

Each test runs both engines on the random test model (llama.cpp through its GGUF export)."""

from __future__ import annotations

import asyncio

import pytest

from fim.engines.model_specs import llama_cpp_available
from tests.support.seam_lsp_client import (
    TEST_MODEL,
    inline,
    insert_text,
    items_of,
    lsp_session,
    open_doc,
    status,
    wait_ready,
)

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(300)]

ENGINES = [
    "transformers",
    pytest.param("llama.cpp", marks=pytest.mark.skipif(
        not llama_cpp_available(), reason="llama-cpp-python is not installed")),
]
URI = "file:///work/example.py"
SOURCE = ("import os\n\n\ndef list_files(root):\n    out = []\n"
          "    for name in os.listdir(root):\n        path = os.path.jo\n"
          "    return sorted(out)\n")


def cursor(lc, line: int, character: int) -> None:
    lc.protocol.notify("seam/cursor", {"textDocument": {"uri": URI},
                                       "position": {"line": line, "character": character}})


async def idle(lc, timeout: float = 60.0) -> dict:
    """Wait until the server's worker has nothing queued or running."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        st = await status(lc)
        if not st["running"] and st.get("idle", True):
            return st
        if loop.time() > deadline:
            raise TimeoutError(st)
        await asyncio.sleep(0.05)


def settings(engine: str, **extra) -> dict:
    return {"seam": {"model": TEST_MODEL, "engine": engine, **extra}}


@pytest.mark.parametrize("engine", ENGINES)
async def test_a_resting_cursor_is_warmed_so_the_request_only_decodes(tmp_path, engine):
    async with lsp_session(tmp_path, settings(engine)) as lc:
        await wait_ready(lc)
        open_doc(lc, URI, SOURCE)
        cursor(lc, 6, 25)
        await idle(lc)
        st = await status(lc)
        assert any(d.get("background") and d["stop"] == "done" for d in st["decodes"])
        await inline(lc, URI, 6, 25)
        entry = (await status(lc))["recent"][-1]
        assert entry["source"] == "model"
        assert entry["cached_tokens"] == entry["prompt_tokens"] > 0


@pytest.mark.parametrize("engine", ENGINES)
async def test_a_plain_clients_edit_is_warmed_where_it_ended(tmp_path, engine):
    """No ``seam/cursor``: the end of the last edit is taken for the cursor's rest."""
    async with lsp_session(tmp_path, settings(engine)) as lc:
        await wait_ready(lc)
        open_doc(lc, URI, SOURCE)
        insert_text(lc, URI, 2, 6, 25, "in(")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 120
        while not any(d.get("background") and d["stop"] == "done"
                      for d in (await status(lc))["decodes"]):
            assert loop.time() < deadline, "the edit's end was never warmed"
            await asyncio.sleep(0.05)
        await idle(lc)
        await inline(lc, URI, 6, 28)
        entry = (await status(lc))["recent"][-1]
        assert entry["source"] == "model"
        assert entry["cached_tokens"] == entry["prompt_tokens"] > 0


@pytest.mark.parametrize("engine", ENGINES)
async def test_the_next_suggestion_is_ready_when_the_shown_one_is_accepted(tmp_path, engine):
    source = "def add(a, b):\n    return \n\nprint(add(1, 2))\n"
    async with lsp_session(tmp_path, settings(engine)) as lc:
        await wait_ready(lc)
        open_doc(lc, URI, source)
        items = items_of(await inline(lc, URI, 1, 11))
        assert items, "the random model (seed 0) suggests a middle here"
        middle = items[0].insert_text
        await idle(lc)  # the prefetch ran while the user was reading
        st = await status(lc)
        assert any(d.get("background") and d["stop"] == "done" for d in st["decodes"])
        insert_text(lc, URI, 2, 1, 11, middle)
        await inline(lc, URI, 1, 11 + len(middle))
        entry = (await status(lc))["recent"][-1]
        assert entry["source"] == "typed-through"  # served from the cache, no model work


@pytest.mark.parametrize("engine", ENGINES)
async def test_an_empty_line_is_answered_early_and_the_block_follows(tmp_path, engine):
    source = "def f(x):\n    y = x + 1\n    \n    return y\n"
    async with lsp_session(tmp_path, settings(engine, maxTokens=48)) as lc:
        await wait_ready(lc)
        open_doc(lc, URI, source)
        items = items_of(await inline(lc, URI, 2, 4))
        st = await idle(lc)
        sources = [r["source"] for r in st["recent"]]
        if not items:
            pytest.skip("the random model gave no suggestion here")
        # Either answered at the first complete line end (early) or the decode ended first.
        assert sources[-1] in ("early", "model")
        first = items[0].insert_text
        assert "\n" not in first.rstrip("\n") or sources[-1] == "model"


async def test_engine_setting_is_validated_and_reported(tmp_path):
    async with lsp_session(tmp_path, {"seam": {"model": TEST_MODEL,
                                               "engine": "tensorrt"}}) as lc:
        st = await wait_ready(lc)
        assert st["settings"]["engine"] == "auto"
        assert st["runtime"]["engine"] == "transformers"  # random model, auto
        messages = [m for m in lc.log_messages + lc.messages if "engine" in m.message]
        assert messages and "llama.cpp" in messages[0].message
