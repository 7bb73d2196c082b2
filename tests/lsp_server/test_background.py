"""The server's background work (``lsp_server.background``), each kind on its own: run on a
model written as a tree (``tests.support.tree_model``), whose answers are known, through the
real engine, planner and scheduler; and the planner's promise that a place is planned once,
however many of the cursor's warm-up, the request and the prefetch ask for it."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter

import pytest
from lsprotocol import types

from fim.engines.model_specs import EngineKind
from lsp_server.background import Place, Prefetch, Rank, WarmUp, Widen, Wider
from lsp_server.completion_service import CompletionService
from lsp_server.messages import CursorMessage
from lsp_server.model_host import ModelHost
from lsp_server.request_plan import RequestPlanner
from lsp_server.settings import Settings
from tests.support.in_process_service import loaded_host, service_with, until_idle
from tests.support.seam_lsp_client import TEST_MODEL
from tests.support.tree_model import greedy_trap, tree_engine_over

pytestmark = [pytest.mark.timeout(300)]

URI = "file:///a.py"
TEXT = "x = \n"
SETTINGS = Settings(model=TEST_MODEL, engine=EngineKind.TRANSFORMERS, time_budget_ms=60_000)


@pytest.fixture(scope="module")
def host() -> ModelHost:
    host = loaded_host()
    host._engine, _ = tree_engine_over(host.engine.backend, greedy_trap)
    return host


def kept_by(calls: list) -> tuple:
    """A ``keep`` callback that records what it is given, and a ``post`` that runs at once."""
    return (lambda place, middles, ranked: calls.append((place, middles, ranked)),
            lambda fn: fn())


def planned_here(host: ModelHost, text: str = TEXT, offset: int = 4):
    return RequestPlanner().plan(host.engine, SETTINGS, URI, text, offset)


def test_rank_keeps_the_places_ranked_middles_greedys_first(host: ModelHost) -> None:
    calls: list = []
    keep, post = kept_by(calls)
    place = Place(URI, "x = ", "\n", "\n")
    res = Rank(host.engine, planned_here(host), 3, place, keep, post)(threading.Event())
    assert res.alternatives
    assert calls == [(place, ("1", "None", "y"), True)]


def test_a_cancelled_rank_keeps_nothing(host: ModelHost) -> None:
    calls: list = []
    keep, post = kept_by(calls)
    cancel = threading.Event()
    cancel.set()
    Rank(host.engine, planned_here(host), 3, Place(URI, "x = ", "\n", "\n"), keep, post)(cancel)
    assert calls == []


def test_prefetch_keeps_its_one_middle_in_the_documents_line_breaks(host: ModelHost) -> None:
    calls: list = []
    keep, post = kept_by(calls)
    place = Place(URI, "x = ", "\r\n", "\r\n")
    res = Prefetch(host.engine, host, planned_here(host, "x = \r\n"), place, keep, post)(
        threading.Event())
    assert res.middle == "1"
    assert calls == [(place, ("1",), False)]


def test_warm_up_runs_the_prompt_and_decodes_nothing(host: ModelHost) -> None:
    engine, tree = tree_engine_over(host.engine.backend, greedy_trap)
    WarmUp(engine, host, planned_here(host), "here")(threading.Event())
    assert (tree.prefills, tree.steps) == (1, 0)


def test_widen_with_nothing_to_widen_runs_nothing(host: ModelHost) -> None:
    adopted: list = []
    planned = planned_here(host)
    Widen(host.engine, host, planned, lambda: Wider(None, lambda: adopted.append(1)),
          lambda fn: fn(), "here")(threading.Event())
    assert adopted == []


def test_a_place_is_planned_once_for_cursor_request_and_prefetch(host: ModelHost) -> None:
    """The cursor's warm-up plans the place, the request there reuses that plan, and the
    prefetch's plan of the place after accepting is the one the request there reuses."""
    async def main() -> tuple[Counter, list]:
        loop = asyncio.get_running_loop()
        service = CompletionService(
            Settings(model=TEST_MODEL, engine=EngineKind.TRANSFORMERS, suggestions=1,
                     time_budget_ms=60_000), host, loop.call_soon_threadsafe)
        built: Counter = Counter()
        collect = service.project.collect

        def counted(uri, text, *args, **kwargs):
            built[(text, kwargs["cursor"])] += 1
            return collect(uri, text, *args, **kwargs)

        service.project.collect = counted  # the real collector, counted per place
        service.documents.open(types.TextDocumentItem(uri=URI, language_id="python",
                                                      version=1, text=TEXT))
        try:
            service.cursor(CursorMessage(URI, 0, 4))
            await until_idle(service)
            found = await service.suggest(URI, types.Position(line=0, character=4))
            await until_idle(service)  # the prefetch past "1"
            service.documents.change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=2),
                content_changes=[types.TextDocumentContentChangeWholeDocument(
                    text="x = 1\n")]))
            service.reset_suggestions()  # the request asks the model, not the cache
            await service.suggest(URI, types.Position(line=0, character=5))
            await until_idle(service)
            return built, [found[1].middle if found else None]
        finally:
            service.shutdown()

    built, answers = asyncio.run(main())
    assert answers == ["1"]
    assert built[(TEXT, 4)] == 1  # the cursor's plan, reused by the request
    assert built[("x = 1\n", 5)] == 1  # the prefetch's plan, reused by the request there
    assert set(built.values()) == {1}, built


def test_a_kept_plan_is_made_again_when_other_documents_change(host: ModelHost) -> None:
    """What a plan reads of other documents (open, edited, visited) is part of its place: a
    change there makes it again; the same place with nothing changed reuses it."""
    from lsp_server.project.sources import ContextCollector, OpenDocument
    from lsp_server.project.workspace import Workspace

    planner = RequestPlanner(ContextCollector(Workspace()))
    other = [OpenDocument("file:///b.py", "y = 2\n")]

    def plan() -> None:
        planner.plan(host.engine, SETTINGS, URI, TEXT, 4, other)

    plan()
    plan()
    assert planner.builds == 1
    planner.collector.ring.record("file:///b.py", "y = 3\n", 0, 1, 1)
    plan()
    assert planner.builds == 2
    planner.collector.visit("file:///b.py", 0)
    plan()
    planner.changed("file:///b.py")  # opened, closed or edited
    plan()
    assert planner.builds == 4
    planner.collector.visit(URI, 0)  # its own document: the place says it all
    plan()
    assert planner.builds == 4


def test_the_widening_is_planned_when_the_worker_gets_to_it(host: ModelHost) -> None:
    """Planning the widening tokenizes the whole wide window: at the rest it shared the two
    cores with the warm-up's prompt, so ``at_cursor`` queues the warm-up and the widening
    and plans nothing; the widening is planned when its work runs, on the loop."""
    from lsp_server.background import Background

    order: list = []
    queued: list = []

    class Jobs:  # records what is queued, in order
        def background(self, uri, key, work, share_key=None, priority=None, prepares=False):
            order.append(key[0])
            queued.append(work)

    def wider() -> Wider:
        order.append("widening planned")
        return Wider(None)

    posted: list = []

    def post(fn) -> None:
        posted.append(fn)
        fn()

    calls: list = []
    keep, _ = kept_by(calls)
    Background(Jobs(), host, post, keep).at_cursor(host.engine, URI, planned_here(host), wider,
                                                   "here")
    assert order == ["warm", "widen"]
    queued[1](threading.Event())
    assert order == ["warm", "widen", "widening planned"]
    assert posted  # planned through ``post``, on the event loop


def test_on_loop_returns_what_the_loop_ran_and_gives_up_when_cancelled() -> None:
    from lsp_server.background import on_loop

    assert on_loop(lambda fn: fn(), lambda: 42, threading.Event()) == 42
    cancel = threading.Event()
    dropped: list = []
    # A loop that never runs what is posted (closed): the cancel flag ends the wait.
    threading.Timer(0.1, cancel.set).start()
    assert on_loop(dropped.append, lambda: 42, cancel) is None
    assert len(dropped) == 1
    dropped[0]()  # run late, after the worker gave up: nothing happens (cancelled)

    def fails() -> int:
        raise ValueError("planning failed")

    with pytest.raises(ValueError, match="planning failed"):
        on_loop(lambda fn: fn(), fails, threading.Event())


@pytest.mark.parametrize("kept", [False, True])
def test_a_rest_at_a_new_place_stops_the_running_work_before_it_is_planned(
        host: ModelHost, kept: bool) -> None:
    """Planning a new place (the project context, token counts) would share the cores with
    the background work its warm-up stops anyway: it is stopped first. A place whose plan is
    kept costs no planning, and work that prepares it (its own prefetch) runs on."""
    async def main() -> tuple[list, bool]:
        service = service_with(host, URI, TEXT, suggestions=1)
        share_key = (service._plan(host.engine, URI, TEXT, 4).share_key if kept
                     else "elsewhere")
        seen: list = []
        collect = service.project.collect
        begun, stop = threading.Event(), threading.Event()

        def running(cancel: threading.Event) -> None:  # a prefetch, until stopped
            begun.set()
            while not cancel.is_set() and not stop.is_set():
                cancel.wait(0.01)

        def counted(uri, text, *args, **kwargs):
            seen.append(job.cancel.is_set())  # stopped by the time the place is planned?
            return collect(uri, text, *args, **kwargs)

        service.project.collect = counted
        from lsp_server.jobs import Priority
        service.jobs.background(URI, "prefetch", running, share_key=share_key,
                                priority=Priority.PREFETCH)
        try:
            await asyncio.to_thread(begun.wait, 5)
            job = service.jobs._background
            service.cursor(CursorMessage(URI, 0, 4))
            stopped = job.cancel.is_set()
            stop.set()
            await until_idle(service)
            return seen, stopped
        finally:
            service.shutdown()

    seen, stopped = asyncio.run(main())
    if kept:
        assert seen == [] and not stopped  # no planning, and its own prefetch runs on
    else:
        assert seen == [True] and stopped
