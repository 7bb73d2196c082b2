"""Helpers for tests that run the completion service in process: a model host with the
random test model loaded, and a wait for the service's worker to finish its background work."""

from __future__ import annotations

import asyncio
from typing import Any

from lsprotocol import types

from fim.engines.model_specs import EngineKind
from lsp_server.completion_service import CompletionService
from lsp_server.model_host import LoadState, ModelHost
from lsp_server.settings import Settings
from tests.support.seam_lsp_client import TEST_MODEL


def loaded_host(model: str = TEST_MODEL) -> ModelHost:
    """A model host with ``model`` loaded on the transformers engine (ready, or the test
    fails saying why)."""
    host = ModelHost()
    host.load(model, engine=EngineKind.TRANSFORMERS).join(240)
    assert host.state.state is LoadState.READY, host.state
    return host


async def until_idle(service: CompletionService) -> None:
    """Wait (at most two minutes) until the service's worker has nothing queued or running."""
    for _ in range(2400):
        if service.jobs.idle():
            return
        await asyncio.sleep(0.05)
    raise TimeoutError("the worker did not become idle")


def service_with(host: ModelHost, uri: str, text: str, **settings: Any) -> CompletionService:
    """A completion service on ``host``, made on the running event loop, with the Python
    document ``uri`` open holding ``text``; ``settings`` over the test model on the
    transformers engine with a one-minute time budget."""
    loop = asyncio.get_running_loop()
    service = CompletionService(
        Settings(**{"model": TEST_MODEL, "engine": EngineKind.TRANSFORMERS,
                    "time_budget_ms": 60_000, **settings}), host, loop.call_soon_threadsafe)
    service.documents.open(types.TextDocumentItem(uri=uri, language_id="python", version=1,
                                                  text=text))
    return service
