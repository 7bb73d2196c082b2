"""One inline request's path, traced: from ``SeamServer.on_inline_completion`` to the engine,
the modules of the server (and ``fim``'s policy and engine) that the calls go through, as the
interpreter's profiler sees them (``sys.setprofile`` on the event loop, ``threading.setprofile``
on the worker). On the way in no module of the path is entered twice (the chain of calls never
comes back into one it left), and the hops there and back are at most twelve, as
docs/DESIGN.md ("One inline request's path") draws them. The modules the path's steps use as
leaves (the documents, the suggestion cache, the project context's sources, the prompt anchors,
the measures of text, the messages) are entered and left within one step, and counted with
it."""

from __future__ import annotations

import asyncio
import sys
import threading

import pytest
from lsprotocol import types

from fim.engines.model_specs import EngineKind
from lsp_server.server import SeamServer
from lsp_server.settings import Settings
from tests.support.in_process_service import loaded_host
from tests.support.seam_lsp_client import TEST_MODEL
from tests.support.tree_model import greedy_trap, tree_engine_over

pytestmark = [pytest.mark.timeout(300)]

ENGINE = "fim.api"
#: The modules the path is drawn in: the handler's, the service's, the planner's (with fim's
#: policy; the settings used to resolve it), the background work's, the scheduler's,
#: engine_work's and the engine's entry.
PATH = frozenset({"lsp_server.server", "lsp_server.completion_service",
                  "lsp_server.request_plan", "fim.editor_policy", "lsp_server.settings",
                  "lsp_server.background",
                  "lsp_server.jobs", "lsp_server.engine_work", ENGINE})


def chain(frame) -> tuple[str, ...]:
    """The path's modules on the stack down to ``frame``, outermost first, each run of one
    module counted once."""
    names: list[str] = []
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name in PATH:
            if not names or names[-1] != name:
                names.append(name)
        frame = frame.f_back
    return tuple(reversed(names))


def test_one_request_crosses_at_most_twelve_hops_and_no_module_twice() -> None:
    host = loaded_host()
    host._engine, _ = tree_engine_over(host.engine.backend, greedy_trap)
    seen: list[tuple[str, ...]] = []
    engine_reached = threading.Event()

    def profile(frame, event, arg):
        if event != "call" or engine_reached.is_set():
            return
        name = frame.f_globals.get("__name__", "")
        if name not in PATH:
            return
        here = chain(frame)
        seen.append(here)
        if name == ENGINE and frame.f_code.co_name == "complete":
            engine_reached.set()  # the engine's decode: what follows is the way back

    async def main() -> list:
        server = SeamServer(Settings(model=TEST_MODEL, engine=EngineKind.TRANSFORMERS,
                                     suggestions=1, time_budget_ms=60_000), host=host)
        server.bind_loop(asyncio.get_running_loop())
        server.on_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
            uri="file:///a.py", language_id="python", version=1, text="x = \n")))
        params = types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri="file:///a.py"),
            position=types.Position(line=0, character=4),
            context=types.InlineCompletionContext(
                trigger_kind=types.InlineCompletionTriggerKind.Automatic))
        threading.setprofile(profile)
        sys.setprofile(profile)
        try:
            found = await server.on_inline_completion(params)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)
            server.service.shutdown()
        return [i.insert_text for i in found.items]

    assert asyncio.run(main()) == ["1"]
    assert engine_reached.is_set()
    way_in = [c for c in seen if c and c[0] == "lsp_server.server"]
    for c in seen:
        assert len(set(c)) == len(c), f"a module entered twice on the way in: {c}"
    # The engine's decode is entered from the worker, through engine_work, which the
    # scheduler runs (the planner reads the engine's tokenizer and window on the way: leaves).
    at_engine = [c for c in seen if c[-1] == ENGINE and c[0] == "lsp_server.jobs"]
    assert at_engine[0] == ("lsp_server.jobs", "lsp_server.engine_work", ENGINE)
    handed = max((c for c in way_in if c[-1] == "lsp_server.jobs"), key=len)
    assert handed == ("lsp_server.server", "lsp_server.completion_service", "lsp_server.jobs")
    # Hops there and back: the handler to the scheduler, the worker to the engine, and the
    # deepest side trip of the service (the planner and fim's policy), each both ways.
    side = max(len(c) - 2 for c in way_in if len(c) > 1 and c[1] ==
               "lsp_server.completion_service" and "lsp_server.jobs" not in c)
    hops = 2 * ((len(handed) - 1) + (len(at_engine[0]) - 1)) + 2 * side
    assert hops <= 12, (hops, handed, at_engine[0], side)
    print(f"hops {hops}: {' > '.join(handed)} | {' > '.join(at_engine[0])}; side trip {side}")
