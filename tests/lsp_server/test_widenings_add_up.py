"""Interrupted widenings add up (``lsp_server.prompt_anchors``): the planner gives the next
widening of a document the start of the last one, so the prompt it warms begins with what the
interrupted one ran, and the step model resumes from there instead of starting over.  Run on
the random test model through the real planner, engine and step model."""

from __future__ import annotations

import pytest

from fim.api import Engine
from fim.engines.model_specs import EngineKind
from fim.engines.prefill_speed import PrefillSpeed
from lsp_server.request_plan import RequestPlanner
from lsp_server.settings import Settings
from tests.support.seam_lsp_client import TEST_MODEL

pytestmark = [pytest.mark.timeout(300)]

#: The test model's whole window (1,024 tokens): prompts are never cut below the planner's
#: starts.
SETTINGS = Settings(model=TEST_MODEL, engine=EngineKind.TRANSFORMERS, time_budget_ms=60_000,
                    context_tokens=1024)
URI = "file:///work/long.py"
TEXT = "".join(f"value_{i} = compute({i}, {i} + 1)\n" for i in range(400))


class StopAfter:
    """An interrupt that lets ``polls`` polls pass, then stops the work."""

    def __init__(self, polls: int) -> None:
        self.polls = polls

    def __call__(self) -> bool:
        self.polls -= 1
        return self.polls < 0


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine.load(TEST_MODEL, engine=EngineKind.TRANSFORMERS)


def test_the_next_widening_resumes_what_an_interrupted_one_ran(engine) -> None:
    model = engine.step_model
    model.reset()
    model.speed = PrefillSpeed()  # nothing measured: the 128-token first window
    planner = RequestPlanner()
    cursor = TEXT.index("value_300 ")
    planned = planner.plan(engine, SETTINGS, URI, TEXT, cursor)
    first = planner.wider(engine, SETTINGS, URI, planned)
    assert first is not None and first.start < planned.request.left_start
    widened = planner.plan(engine, SETTINGS, URI, TEXT, cursor, left_start=first.start)
    # The user types before it finishes: one chunk ran (the check before the prefill passes,
    # the one after the first chunk stops it).
    assert not engine.warm(widened.request, StopAfter(1))
    # Two lines further down (typed, or the cursor moved): a new place, the same start.
    below = TEXT.index("value_302 ")
    planned = planner.plan(engine, SETTINGS, URI, TEXT, below)
    second = planner.wider(engine, SETTINGS, URI, planned)
    assert second is not None and second.start == first.start
    widened = planner.plan(engine, SETTINGS, URI, TEXT, below, left_start=second.start)
    assert engine.warm(widened.request, lambda: False)
    assert model.reused >= model.chunk  # what the interrupted widening ran was not lost
