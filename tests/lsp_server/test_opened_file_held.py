"""A plain LSP client's newly opened file is warmed from its start (``edit_rests``' open
rest): left alone, the document's window from its first line is held in the model's cache, so
the first request anywhere within it runs only its right text; a file asked at once is not
held up by it.  Run on the random test model through llama.cpp (its GGUF export), the engine
that holds a window."""

from __future__ import annotations

import pytest

from fim.engines.model_specs import llama_cpp_available
from tests.lsp_server.test_warm_and_prefetch import idle, settings
from tests.support.seam_lsp_client import inline, lsp_session, open_doc, status, wait_ready

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(300),
              pytest.mark.skipif(not llama_cpp_available(),
                                 reason="llama-cpp-python is not installed")]

READ = "file:///work/read_first.py"
NO_PROJECT_CONTEXT = {"contextTokens": 1024, "contextDefinitions": False,
                      "contextOpenFiles": False, "contextRecentEdits": False,
                      "contextSimilarCode": False}
ASKED = "file:///work/asked_at_once.py"
EMPTY = "file:///work/empty.py"


def source(name: str) -> str:
    return "".join(f"{name}_{i} = compute({i}, offset={i * 7})\n" for i in range(60))


async def test_a_file_left_open_is_held_from_its_start(tmp_path):
    # The test model's whole window (1,024 tokens) is the prompt's, all of it the file's (no
    # project context): the planner's left share is then one the engine does not cut (the
    # default plans for 2,048), and the base reaches some 38 lines.
    async with lsp_session(tmp_path, settings("llama.cpp", **NO_PROJECT_CONTEXT)) as lc:
        await wait_ready(lc)
        # Asked at once: the open's rest never comes, the request reads its prompt itself.
        open_doc(lc, ASKED, source("other"))
        await inline(lc, ASKED, 40, 0)
        asked = (await status(lc))["recent"][-1]
        await idle(lc)
        log = (tmp_path / "server.log").read_text()
        assert f"warmed the prompt at {ASKED}:1:1" not in log
        # Opened and left alone (no edit, no request, no seam/cursor): held from line 1.
        open_doc(lc, READ, source("value"))
        await idle(lc)
        log = (tmp_path / "server.log").read_text()
        assert f"held the document's window below {READ}:1:1" in log
        await inline(lc, READ, 30, 0)  # the first request there, thirty lines down
        first = (await status(lc))["recent"][-1]
        assert first["source"] == "model"
        # It read the file from its first line (thirty lines of some sixteen tokens) and ran
        # little more than its right text; the file asked at once ran its whole prompt.
        assert first["prompt_tokens"] - first["context_tokens"] > 30 * 14
        assert first["prompt_tokens"] - first["cached_tokens"] < 100
        assert asked["prompt_tokens"] - asked["cached_tokens"] > 100
        # An empty file opened and left alone rests at its start too: nothing to hold, and
        # the server goes idle and still answers there.
        open_doc(lc, EMPTY, "")
        await idle(lc)
        await inline(lc, EMPTY, 0, 0)
        assert (await status(lc))["state"] == "ready"
        assert f"warmed the prompt at {EMPTY}:1:1" in (tmp_path / "server.log").read_text()
