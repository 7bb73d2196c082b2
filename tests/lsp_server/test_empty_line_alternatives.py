"""On an empty line where the model's greedy choice is to end at once, the first answer is the
ranked search's best middle that writes something (an empty middle ranks after every such
middle, ``fim.alternatives``), not "nothing"; elsewhere, and with one suggestion per place,
an empty greedy answer stays empty.

In process, a model written as a tree (``tests.support.tree_model``): it prefers the end of
text at once (logit 12) over ``y`` (10) and ``z`` (3); after ``y`` it writes a second line,
``w``, and ends; after ``z`` it ends."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from lsprotocol import types

from fim.engines.model_specs import EngineKind
from lsp_server.completion_service import CompletionService
from lsp_server.settings import Settings
from tests.support.in_process_service import loaded_host, service_with, until_idle
from tests.support.seam_lsp_client import TEST_MODEL
from tests.support.tree_model import tree_engine_over

pytestmark = [pytest.mark.timeout(300)]

URI = "file:///a.py"
SOURCE = "x = 1\n\nprint(x)\n"
EMPTY_LINE = types.Position(line=1, character=0)
LINE_END = types.Position(line=0, character=5)  # x = 1|: nothing is a complete middle too


def ends_at_once(one: Callable[[str], int], eos: int) -> dict:
    y, nl = one("y"), one("\n")
    return {(): {eos: 12.0, y: 10.0, one("z"): 3.0},
            (y,): {nl: 30.0}, (y, nl): {one("w"): 30.0}, (y, nl, one("w")): {eos: 30.0},
            (one("z"),): {eos: 30.0}}


#: Below the empty line, after a line of its own, two lines the model copies (``copies``).
COPY_SOURCE = "x = 1\n\nz = 2\nprint(x)\nprint(x + 1)\n"


def copies(one: Callable[[str], int], eos: int) -> dict:
    """Greedy writes the last two lines of ``COPY_SOURCE`` again, a character a token, and
    ends; its second choice at the start is ``y``, then the end."""
    ids = [one(ch) for ch in "print(x)\nprint(x + 1)\n"]
    tree = {tuple(ids[:i]): {tid: 30.0} for i, tid in enumerate(ids)}
    tree[()] = {ids[0]: 12.0, one("y"): 10.0}
    tree[(one("y"),)] = {eos: 30.0}
    return tree


def answer(position: types.Position, suggestions: int, again: bool = False,
           tree=ends_at_once, source: str = SOURCE) -> tuple[list[str], list[str]]:
    """The middles shown at ``position`` and the stops of the server's records (``again``:
    and then, once the worker is idle, those shown when asked there again)."""
    host = loaded_host()
    host._engine, _ = tree_engine_over(host.engine.backend, tree)

    async def main() -> tuple[list[str], list[str]]:
        loop = asyncio.get_running_loop()
        service = CompletionService(
            Settings(model=TEST_MODEL, engine=EngineKind.TRANSFORMERS, suggestions=suggestions,
                     time_budget_ms=60_000, context_budget=0), host,
            loop.call_soon_threadsafe)
        service.documents.open(types.TextDocumentItem(uri=URI, language_id="python",
                                                      version=1, text=source))
        try:
            found = await service.suggest(URI, position)
            stops = [r.stop for r in service.recent]
            if again:
                await until_idle(service)
                found = await service.suggest(URI, position)
            shown = [] if found is None else [found[1].middle, *found[1].alternatives]
            return shown, stops
        finally:
            service.shutdown()

    return asyncio.run(main())


def test_an_empty_line_where_greedy_ends_shows_the_best_middle_that_writes_something():
    shown, stops = answer(EMPTY_LINE, 3)
    # Greedy's decode, then a search that ends at its first middle writing something, and
    # that middle at its first line: the answer does not wait for the rest of the block.
    assert shown == ["y"] and stops == ["eos", "line_end"]
    # The place's other suggestions follow in idle time, whole.
    assert answer(EMPTY_LINE, 3, again=True)[0] == ["y\nw", "z"]


def test_one_suggestion_per_place_or_a_cursor_in_a_line_keeps_nothing():
    assert answer(EMPTY_LINE, 1) == ([], ["eos"])
    assert answer(LINE_END, 3) == ([], ["eos"])


def test_an_empty_line_where_greedy_copies_the_code_below_shows_what_else_it_would_write():
    """The copy is cut where it starts (``fim.stopping.RightStop.copies_lines``): nothing is
    left of greedy's middle, and, as where the model ends at once, the search's best middle
    that writes something is shown."""
    shown, stops = answer(EMPTY_LINE, 3, tree=copies, source=COPY_SOURCE)
    assert stops[0] == "right_context" and shown == ["y"]
    # One suggestion per place: the cut copy, nothing shown.
    assert answer(EMPTY_LINE, 1, tree=copies, source=COPY_SOURCE) == ([], ["right_context"])


def test_no_background_work_runs_between_the_empty_answer_and_its_search() -> None:
    """The search reads the prompt the empty answer left in the model's cache: work started
    in between (the widening, the project context, queued after an answer) would run its own
    prompt over those cells first, and the search would run the prompt again (two seconds
    of a first request on a two-core CPU). It is queued after the search's answer."""
    host = loaded_host()
    host._engine, _ = tree_engine_over(host.engine.backend, ends_at_once)

    async def main() -> tuple[list[str], list[bool]]:
        service = service_with(host, URI, SOURCE, suggestions=3)
        try:
            found = await service.suggest(URI, EMPTY_LINE)
            await until_idle(service)
            shown = [] if found is None else [found[1].middle]
            return shown, [bool(r.background) for r in service.jobs.finished]
        finally:
            service.shutdown()

    shown, background = asyncio.run(main())
    assert shown == ["y"]
    assert background[:2] == [False, False]  # the empty answer, then its search
    assert True in background[2:]  # the widening came after
