"""On an empty line where the model's greedy choice is to end at once, the first answer is the
ranked search's best middle that writes something (an empty middle ranks after every such
middle, ``fim.alternatives``), not "nothing"; elsewhere, and with one suggestion per place,
an empty greedy answer stays empty.

In process, a model written as a tree (``tests.support.tree_model``): it prefers the end of
text at once (logit 12) over ``y`` (10) and ``z`` (3), each of which it then ends."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from lsprotocol import types

from fim.engines.model_specs import EngineKind
from lsp_server.completion_service import CompletionService
from lsp_server.settings import Settings
from tests.support.in_process_service import loaded_host
from tests.support.seam_lsp_client import TEST_MODEL
from tests.support.tree_model import tree_engine_over

pytestmark = [pytest.mark.timeout(300)]

URI = "file:///a.py"
SOURCE = "x = 1\n\nprint(x)\n"
EMPTY_LINE = types.Position(line=1, character=0)
LINE_END = types.Position(line=0, character=5)  # x = 1|: nothing is a complete middle too


def ends_at_once(one: Callable[[str], int], eos: int) -> dict:
    return {(): {eos: 12.0, one("y"): 10.0, one("z"): 3.0},
            (one("y"),): {eos: 30.0}, (one("z"),): {eos: 30.0}}


def answer(position: types.Position, suggestions: int) -> tuple[list[str], list[str]]:
    """The middles shown at ``position`` and the sources of the server's records."""
    host = loaded_host()
    host._engine, _ = tree_engine_over(host.engine.backend, ends_at_once)

    async def main() -> tuple[list[str], list[str]]:
        loop = asyncio.get_running_loop()
        service = CompletionService(
            Settings(model=TEST_MODEL, engine=EngineKind.TRANSFORMERS, suggestions=suggestions,
                     time_budget_ms=60_000, context_budget=0), host,
            loop.call_soon_threadsafe)
        service.documents.open(types.TextDocumentItem(uri=URI, language_id="python",
                                                      version=1, text=SOURCE))
        try:
            found = await service.suggest(URI, position)
            shown = [] if found is None else [found[1].middle, *found[1].alternatives]
            return shown, [r.stop for r in service.recent]
        finally:
            service.shutdown()

    return asyncio.run(main())


def test_an_empty_line_where_greedy_ends_shows_the_best_middle_that_writes_something():
    shown, stops = answer(EMPTY_LINE, 3)
    assert shown == ["y", "z"]
    assert stops == ["eos", "eos"]  # greedy's decode, then the ranked search


def test_one_suggestion_per_place_or_a_cursor_in_a_line_keeps_nothing():
    assert answer(EMPTY_LINE, 1) == ([], ["eos"])
    assert answer(LINE_END, 3) == ([], ["eos"])
