"""The completion service in process, on the random test model: what a request costs in
prompt builds (each prompt is built once: the one built to decide whether the project context
is cached is the one the engine runs, where it used to be built again) and what it answers."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from lsprotocol import types

from fim.engines.model_specs import EngineKind
from lsp_server.completion_service import CompletionService
from lsp_server.jobs import DecodeOutcome
from lsp_server.model_host import ModelHost
from lsp_server.settings import Settings
from tests.support.in_process_service import loaded_host, until_idle

pytestmark = [pytest.mark.timeout(300)]

TEST_MODEL = "random:santacoder"
HELPERS = ('def scale(value, factor):\n    """Multiply value by factor."""\n'
           "    return value * factor\n")
MAIN = ("from helpers import scale\n\n\ndef compute(values):\n    total = 0\n"
        "    for v in values:\n        total = total + scale(v, 2)\n    return total\n")


def test_each_prompt_of_a_request_is_built_once(tmp_path: Path) -> None:
    (tmp_path / "helpers.py").write_text(HELPERS)
    uri = (tmp_path / "main.py").as_uri()
    host = loaded_host()
    engine = host.engine
    built = []  # every request whose prompt the engine built, in order
    build = engine.prompt_for

    def counted(req):
        built.append(req)
        return build(req)

    engine.prompt_for = counted  # the real method, counted

    async def main() -> tuple[object, list]:
        loop = asyncio.get_running_loop()
        service = CompletionService(
            Settings(model=TEST_MODEL, engine=EngineKind.TRANSFORMERS, max_tokens=4,
                     context_budget=256), host, loop.call_soon_threadsafe)
        try:
            assert service.folders.add(tmp_path.as_uri(), "project") is not None
            service.documents.open(types.TextDocumentItem(uri=uri, language_id="python",
                                                          version=1, text=MAIN))
            await service.suggest(uri, types.Position(line=5, character=4))
            on_request = list(built)
            await until_idle(service)  # the context warmed after, and the prefetch
            return service.recent[-1], on_request
        finally:
            service.shutdown()

    record, on_request = asyncio.run(main())
    # The context is not cached on the first request: the prompt with it and the one without
    # are built to compare them, and the engine runs the one without as it was built.
    assert record.context_files and record.context_deferred, record
    assert len(on_request) == 2, on_request
    repeated = [r for i, r in enumerate(built) if r in built[:i]]
    assert not repeated, f"{len(repeated)} prompt(s) built again"


def test_a_removed_folder_takes_its_suggestions_and_queued_work_along(tmp_path: Path) -> None:
    """Suggestions decoded while a folder fed the prompt, and background work planned with it,
    go when the folder goes (the sources drop their own caches; this is the service's part)."""
    uri = (tmp_path / "main.py").as_uri()
    ran: list[str] = []

    async def main() -> tuple[bool, bool]:
        loop = asyncio.get_running_loop()
        service = CompletionService(Settings(model=TEST_MODEL), ModelHost(),
                                    loop.call_soon_threadsafe)
        service.suggestions.put(uri, "x = ", "\n", "helper_from_b()")
        started = threading.Event()

        def warm(cancel: threading.Event) -> None:  # a warm-up that runs until cancelled
            started.set()
            ran.append("warm")
            cancel.wait(60)

        service.jobs.background(uri, "warm", warm)
        service.jobs.background(uri, "prefetch", lambda cancel: ran.append("prefetch"))
        await asyncio.to_thread(started.wait, 60)
        service.folder_removed()
        await until_idle(service)
        gone = service.suggestions.lookup(uri, "x = ", "\n") is None
        cancelled = service.jobs.finished[-1].stop == DecodeOutcome.CANCELLED
        service.shutdown()
        return gone, cancelled

    gone, cancelled = asyncio.run(main())
    assert gone and cancelled
    assert ran == ["warm"]  # the queued prefetch never ran
