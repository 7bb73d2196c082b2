"""Helpers for tests that run the completion service in process: a model host with the
random test model loaded, and a wait for the service's worker to finish its background work."""

from __future__ import annotations

import asyncio

from fim.engines.model_specs import EngineKind
from lsp_server.completion_service import CompletionService
from lsp_server.model_host import LoadState, ModelHost
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
