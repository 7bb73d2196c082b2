"""A plain LSP client, which sends no ``seam/cursor`` notifications, gets the widened window
too (issue 29 item 2): the server widens the prompt at the place of an answer when its worker
is idle, and the next request there starts at the widened anchor. Run on the random test
model through llama.cpp (its GGUF export), where the window can also slide."""

from __future__ import annotations

import pytest

from fim.engines.model_specs import llama_cpp_available
from tests.lsp_server.test_warm_and_prefetch import idle, settings
from tests.support.seam_lsp_client import inline, lsp_session, open_doc, status, wait_ready

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(300),
              pytest.mark.skipif(not llama_cpp_available(),
                                 reason="llama-cpp-python is not installed")]

URI = "file:///work/long.py"
# Far more than a first window (128 tokens) above the cursor.
SOURCE = "".join(f"value_{i} = compute({i}, offset={i * 7})\n" for i in range(120)) + "x = \n"


async def test_an_answer_to_a_plain_client_is_followed_by_the_widened_prompt(tmp_path):
    # No project context: the test model's window (1,024 tokens) is the file's, a left share
    # of some 860 tokens that the widened prompt can reach into.
    async with lsp_session(tmp_path, settings("llama.cpp", contextDefinitions=False,
                                              contextOpenFiles=False, contextRecentEdits=False,
                                              contextSimilarCode=False)) as lc:
        await wait_ready(lc)
        open_doc(lc, URI, SOURCE)
        await inline(lc, URI, 120, 4)  # no cursor notification before or after
        first = (await status(lc))["recent"][-1]
        await idle(lc)
        log = (tmp_path / "server.log").read_text()
        assert "widened the prompt at" in log
        await inline(lc, URI, 120, 4)
        await inline(lc, URI, 119, 4)  # a new place, served from the widened prompt
        again = (await status(lc))["recent"][-1]
        assert again["source"] == "model"
        assert again["prompt_tokens"] > first["prompt_tokens"] + 200
        assert again["prompt_tokens"] - again["cached_tokens"] < first["prompt_tokens"]
