"""Several suggestions per place (the ``suggestions`` setting): the first answer is the greedy
one at once, the place's ranked alternatives follow in idle time (or at once when the user asks
explicitly where one is shown), greedy's first and the others by likelihood, and typing
through still answers from the cache.

In process, a model written as a tree (``tests.support.tree_model``) whose likeliest complete
middle is not greedy's, so the order is known; through a real ``seam serve``, the random test
model."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsprotocol import types

from fim.engines.model_specs import EngineKind
from lsp_server.completion_service import CompletionService
from lsp_server.messages import CompletionSource
from lsp_server.model_host import ModelHost
from lsp_server.settings import Settings
from tests.support.in_process_service import loaded_host, until_idle
from tests.support.seam_lsp_client import (
    TEST_MODEL,
    inline,
    items_of,
    lsp_session,
    open_doc,
    status,
    wait_ready,
)
from tests.support.tree_model import greedy_trap, tree_engine_over

pytestmark = [pytest.mark.timeout(300)]

HERE = types.Position(line=0, character=4)  # x = |


def tree_host() -> ModelHost:
    host = loaded_host()
    host._engine, _ = tree_engine_over(host.engine.backend, greedy_trap)
    return host


def run_service(suggestions: int, steps) -> list:
    host = tree_host()

    async def main() -> list:
        loop = asyncio.get_running_loop()
        service = CompletionService(
            Settings(model=TEST_MODEL, engine=EngineKind.TRANSFORMERS, suggestions=suggestions,
                     time_budget_ms=60_000), host, loop.call_soon_threadsafe)
        service.documents.open(types.TextDocumentItem(uri="file:///a.py", language_id="python",
                                                      version=1, text="x = \n"))
        try:
            return await steps(service)
        finally:
            service.shutdown()

    return asyncio.run(main())


def shown(found) -> list[str]:
    return [] if found is None else [found[1].middle, *found[1].alternatives]


def test_the_first_answer_is_greedys_then_the_place_offers_all_greedys_first() -> None:
    async def steps(service: CompletionService) -> list:
        first = shown(await service.suggest("file:///a.py", HERE))
        await until_idle(service)  # the alternatives are decoded in idle time
        again = shown(await service.suggest("file:///a.py", HERE))
        return [first, again, service.recent[-1].source]

    first, again, source = run_service(3, steps)
    assert first == ["1"]  # greedy, at once
    # Greedy's still first (the fresh corpus measured that order best), then the others by
    # the model's likelihood: -1.0 (None), -8.5 (y).
    assert again == ["1", "None", "y"]
    assert source == CompletionSource.TYPED_THROUGH  # from the cache, no model work


def test_asking_explicitly_where_one_is_shown_waits_for_the_others() -> None:
    async def steps(service: CompletionService) -> list:
        first = shown(await service.suggest("file:///a.py", HERE))
        # No idle time: the explicit request runs (or adopts) the ranked search itself.
        more = shown(await service.suggest("file:///a.py", HERE, invoked=True))
        return [first, more]

    first, more = run_service(3, steps)
    assert first == ["1"] and more == ["1", "None", "y"]


def test_typing_through_keeps_the_suggestions_that_agree() -> None:
    async def steps(service: CompletionService) -> list:
        await service.suggest("file:///a.py", HERE)
        await until_idle(service)
        service.documents.change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri="file:///a.py", version=2),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text="x = N\n")]))
        typed = shown(await service.suggest("file:///a.py", types.Position(line=0,
                                                                           character=5)))
        return [typed, service.recent[-1].source]

    typed, source = run_service(3, steps)
    assert typed == ["one"] and source == CompletionSource.TYPED_THROUGH


def test_one_suggestion_turns_it_off() -> None:
    async def steps(service: CompletionService) -> list:
        await service.suggest("file:///a.py", HERE)
        await until_idle(service)
        return [shown(await service.suggest("file:///a.py", HERE, invoked=True))]

    assert run_service(1, steps) == [["1"]]


URI = "file:///work/example.py"


@pytest.mark.asyncio
async def test_the_server_returns_several_items_at_a_shown_place(tmp_path: Path) -> None:
    """Through ``seam serve``: the first request one item, asking again at the same place
    (what VS Code does for its next-suggestion key) the distinct alternatives, the first
    of which typing through then keeps."""
    source = "def add(a, b):\n    return \n\nprint(add(1, 2))\n"
    settings = {"seam": {"model": TEST_MODEL, "engine": "transformers", "maxTokens": 8}}
    async with lsp_session(tmp_path, settings) as lc:
        await wait_ready(lc)
        open_doc(lc, URI, source)
        first = [i.insert_text for i in items_of(await inline(lc, URI, 1, 11))]
        assert len(first) == 1, first
        items = [i.insert_text for i in items_of(await inline(lc, URI, 1, 11))]
        assert len(items) > 1 and len(set(items)) == len(items), items
        assert first[0] in items
        entry = (await status(lc))["recent"][-1]
        assert entry["source"] == "model"  # the ranked search ran for it
        again = [i.insert_text for i in items_of(await inline(lc, URI, 1, 11))]
        assert again == items
        assert (await status(lc))["recent"][-1]["source"] == "typed-through"


def test_a_request_in_another_document_does_not_lose_the_alternatives() -> None:
    """Issue 28, finding 6: a request in document B used to drop document A's ranked search
    (queued or running) for good, and A went on offering one suggestion."""
    async def steps(service: CompletionService) -> list:
        service.documents.open(types.TextDocumentItem(uri="file:///b.py", language_id="python",
                                                      version=1, text="x = \n"))
        first = shown(await service.suggest("file:///a.py", HERE))
        # At once, before the worker is idle: A's alternatives are due, not decoded yet.
        other = shown(await service.suggest("file:///b.py", HERE))
        await until_idle(service)
        again = shown(await service.suggest("file:///a.py", HERE))
        return [first, other, again, service.recent[-1].source]

    first, other, again, source = run_service(3, steps)
    assert first == ["1"] and other == ["1"]
    assert again == ["1", "None", "y"]
    assert source == CompletionSource.TYPED_THROUGH
