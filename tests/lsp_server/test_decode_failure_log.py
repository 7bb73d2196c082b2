"""A failed decode is one log line when it is expected (a model server that cannot be reached
or answers with an error) and keeps its traceback when it is not (issue 28, finding 8: every
failed vLLM request logged a full traceback)."""

from __future__ import annotations

import asyncio
import logging

import pytest
from lsprotocol import types

from fim.engines.model_specs import EngineKind
from fim.vllm.http import VllmError
from lsp_server.completion_service import CompletionService
from lsp_server.model_host import LoadState, ModelHost
from lsp_server.settings import Settings

pytestmark = [pytest.mark.timeout(300)]

URI = "file:///w/a.py"


@pytest.fixture(scope="module")
def host():
    host = ModelHost()
    host.load("random:santacoder", engine=EngineKind.TRANSFORMERS).join(240)
    assert host.state.state is LoadState.READY, host.state
    yield host
    host.close()


def failures_logged(host: ModelHost, error: Exception, caplog) -> list[logging.LogRecord]:
    engine = host.engine
    real = engine.complete

    def failing(*args, **kwargs):
        raise error

    engine.complete = failing

    async def main() -> None:
        loop = asyncio.get_running_loop()
        service = CompletionService(Settings(model="random:santacoder",
                                             engine=EngineKind.TRANSFORMERS, max_tokens=4),
                                    host, loop.call_soon_threadsafe)
        try:
            service.documents.open(types.TextDocumentItem(
                uri=URI, language_id="python", version=1, text="def f(a):\n    return \n"))
            await service.suggest(URI, types.Position(line=1, character=11))
        finally:
            service.shutdown()

    caplog.set_level(logging.INFO, logger="lsp_server.completion_service")
    try:
        asyncio.run(main())
    finally:
        engine.complete = real
    return [r for r in caplog.records if "decode failed" in r.getMessage()]


@pytest.mark.parametrize("error", [
    VllmError("the vLLM server at http://127.0.0.1:9 answered HTTP 500"),
    ConnectionRefusedError(111, "Connection refused"),
    TimeoutError("timed out"),
], ids=["server-error", "refused", "timeout"])
def test_an_expected_failure_is_one_line(host, caplog, error) -> None:
    failed = failures_logged(host, error, caplog)
    assert failed, "the failure was not logged"
    for record in failed:
        assert record.exc_info is None, "a traceback for an expected failure"
        assert "\n" not in record.getMessage()
        assert type(error).__name__ in record.getMessage()
    assert str(error) in failed[0].getMessage()


def test_an_unexpected_failure_keeps_its_traceback(host, caplog) -> None:
    failed = failures_logged(host, KeyError("a bug"), caplog)
    assert failed and all(r.exc_info is not None for r in failed)
