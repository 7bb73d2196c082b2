"""Where the first window finds nothing to suggest, the server still widens the prompt when
its worker is idle, and once the wide window is cached, asking there again reads it instead of
answering from the kept "nothing" (a user who pauses on an empty line and asks again).

In process, a model that ends at once after a short prompt and writes a line after a long one
(``tests.support.tree_model``), so the answer shows which window the request read."""

from __future__ import annotations

import asyncio

import pytest
from lsprotocol import types

from fim.api import Engine
from fim.engines.model_specs import EngineKind
from lsp_server.completion_service import CompletionService
from lsp_server.model_host import ModelHost
from lsp_server.settings import Settings
from lsp_server.suggestions import SuggestionCache
from tests.support.in_process_service import loaded_host, until_idle
from tests.support.seam_lsp_client import TEST_MODEL
from tests.support.tree_model import Tree

pytestmark = [pytest.mark.timeout(300)]

URI = "file:///long.py"
# Far more than a first window (128 tokens) above the empty line at the end.
SOURCE = "".join(f"value_{i} = compute({i}, offset={i * 7})\n" for i in range(120)) + "\n"
HERE = types.Position(line=120, character=0)
#: prompt tokens above which the model answers: more than any first window holds
WIDE = 400


class ReadsFar(Tree):
    """Ends at once unless its prompt held more than ``WIDE`` tokens; then writes ``y``."""

    def prefill(self, ids, interrupt=None, progress=None, keep_cached=False, hold=False):
        self.wide = len(ids) > WIDE
        return super().prefill(ids, interrupt, progress, keep_cached, hold)

    def _logits(self):
        out = super()._logits()
        if getattr(self, "wide", False) and not self.path:
            out[self.line] = 60.0
        return out


def far_reading_host() -> ModelHost:
    host = loaded_host()
    backend = host.engine.backend
    tok = backend.tokenizer
    (line,) = tok.encode("y")
    model = ReadsFar(backend.step_model.vocab_size, {}, tok.token_id("<|endoftext|>"))
    model.line = line
    backend.step_model = model
    host._engine = Engine(backend, heal=False)
    return host


def test_an_empty_answer_is_followed_by_the_widening_and_asking_again_reads_it() -> None:
    host = far_reading_host()

    async def main() -> tuple:
        loop = asyncio.get_running_loop()
        service = CompletionService(
            Settings(model=TEST_MODEL, engine=EngineKind.TRANSFORMERS, suggestions=1,
                     time_budget_ms=60_000, context_budget=0), host, loop.call_soon_threadsafe)
        service.documents.open(types.TextDocumentItem(uri=URI, language_id="python",
                                                      version=1, text=SOURCE))
        try:
            first = await service.suggest(URI, HERE)
            narrow = service.recent[-1].prompt_tokens
            await until_idle(service)  # the widening runs and is adopted
            again = await service.suggest(URI, HERE)
            return first, narrow, again, service.recent[-1]
        finally:
            service.shutdown()

    first, narrow, again, record = asyncio.run(main())
    assert first is None and narrow <= WIDE  # the first window: nothing to suggest
    assert again is not None and again[1].middle == "y"
    assert record.prompt_tokens > WIDE


def test_forgetting_the_empty_places_keeps_the_suggestions() -> None:
    cache = SuggestionCache()
    cache.put(URI, "a = 1\n", "", "")
    cache.put(URI, "b = ", "\n", "2")
    cache.put("file:///other.py", "c = 1\n", "", "")
    cache.forget_empty(URI)
    assert cache.lookup(URI, "a = 1\n", "") is None  # unknown again: the model is asked
    assert cache.lookup(URI, "b = ", "\n") == "2"
    assert cache.lookup("file:///other.py", "c = 1\n", "") == ""
