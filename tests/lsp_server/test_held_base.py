"""The document's base (``lsp_server.prompt_anchors``, ``StepModel``'s held slot): once the
widened prompt is adopted, the window from its start on below the cursor is held in the model's
cache, and the first request at another place within it (further down than a first window, or
back up) keeps the widened start and runs only its right text.  Run on the random test model
through the real planner, engine and step model."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest

from fim.api import Engine
from fim.engines.model_specs import EngineKind
from fim.templates import ContextFile
from lsp_server.project.sources import ProjectContext
from lsp_server.request_plan import HeldWindow, RequestPlanner, Widening
from lsp_server.settings import Settings
from tests.support.seam_lsp_client import TEST_MODEL

pytestmark = [pytest.mark.timeout(300)]

#: The test model's whole window (1,024 tokens), all of it the file's (no project context):
#: prompts are never cut below the planner's starts, and the base reaches well below.
SETTINGS = Settings(model=TEST_MODEL, engine=EngineKind.TRANSFORMERS, time_budget_ms=60_000,
                    context_tokens=1024, max_tokens=8, context_definitions=False,
                    context_open_files=False, context_recent_edits=False,
                    context_similar_code=False)
URI = "file:///work/long.py"
TEXT = "".join(f"value_{i} = compute({i}, {i} + 1)\n" for i in range(400))


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine.load(TEST_MODEL, engine=EngineKind.TRANSFORMERS)


def rest_and_widen(engine: Engine, planner: RequestPlanner, cursor: int, hold: bool):
    """A rest at ``cursor``: the narrow prompt, then the widening (adopted), then the base
    (held when ``hold``), as the server's background work runs them."""
    planned = planner.plan(engine, SETTINGS, URI, TEXT, cursor)
    assert engine.warm(planned.request)
    widening = planner.wider(engine, SETTINGS, URI, planned)
    assert widening is not None
    widened = planner.plan(engine, SETTINGS, URI, TEXT, cursor, left_start=widening.start)
    assert engine.warm(widened.request, keep_cached=True)
    planner.adopt(URI, planned.request.left, widening)
    base = planner.base(engine, URI, widened, widening)
    assert base is not None and base.end > cursor
    if hold:
        assert engine.warm(base.request, keep_cached=True, hold=True)
        planner.hold(URI, base)
    return widening, base


def fresh(engine: Engine) -> RequestPlanner:
    engine.step_model.reset()
    # A first window of 128 tokens, as on two cores (the tiny model prefills fast enough for
    # the whole left share at once, where the base has nothing to add).
    return RequestPlanner(left_first=128)


def test_a_new_place_within_the_held_base_runs_only_its_right_text(engine) -> None:
    planner = fresh(engine)
    rested = TEXT.index("value_300 ")
    widening, base = rest_and_widen(engine, planner, rested, hold=True)
    held = engine.prompt_for(base.request).ids
    tokens = engine.tokenizer.encode
    # The last line the base holds, more than a first window below where the user rested:
    # without the base that is a new, narrow anchor (checked below).
    below = TEXT.rindex("\n", 0, base.end - 1) + 1
    assert len(tokens(TEXT[rested:below])) > planner.left_first
    above = TEXT.index("value_290 ")
    for cursor in (below, above, below):
        planned = planner.plan(engine, SETTINGS, URI, TEXT, cursor)
        assert planned.request.left_start == widening.start
        prompt = engine.prompt_for(planned.request)
        right = len(tokens(planned.request.right[:200]))
        assert engine.uncached(planned.request, prompt) <= min(right, 64) + 8
        engine.complete(planned.request, prompt=prompt)
        assert engine.step_model.cached_prefix(held) == len(held)  # forked, never cropped


def test_without_the_base_the_same_place_starts_a_narrow_window(engine) -> None:
    planner = fresh(engine)
    rested = TEXT.index("value_300 ")
    widening, base = rest_and_widen(engine, planner, rested, hold=False)
    below = TEXT.rindex("\n", 0, base.end - 1) + 1
    planned = planner.plan(engine, SETTINGS, URI, TEXT, below)
    assert planned.request.left_start > widening.start


def test_a_wide_window_without_a_base_gets_one_and_a_held_one_is_not_run_again(engine) -> None:
    # A widening whose base was interrupted: the next answer there finds no wider start, and
    # holds the window it has.
    planner = fresh(engine)
    rested = TEXT.index("value_300 ")
    widening, _ = rest_and_widen(engine, planner, rested, hold=False)
    planned = planner.plan(engine, SETTINGS, URI, TEXT, rested)
    assert planner.wider(engine, SETTINGS, URI, planned) is None
    base = planner.base(engine, URI, planned)
    assert base is not None and base.start == widening.start and base.end > rested
    assert engine.warm(base.request, keep_cached=True, hold=True)
    planner.hold(URI, base)
    assert planner.base(engine, URI, planned) is None


class EveryTimeAnother:
    """A project-context collector whose every choice differs (as after an edit the ring of
    recent edits does): what a request within the held base must not take."""

    def __init__(self) -> None:
        self.changes: Counter[str] = Counter()
        self.ring = SimpleNamespace(changes=Counter())
        self.calls = 0

    def forget(self, uri: str) -> None:
        pass

    def collect(self, uri, text, line, sources, documents, counter, **_) -> ProjectContext:
        self.calls += 1
        note = ContextFile("notes.py", f"# choice {self.calls}\n")
        return ProjectContext(files=(note,), repo="work", path="long.py", budget=32)


def base_with_context(engine: Engine) -> tuple[RequestPlanner, Settings, Widening, HeldWindow]:
    """A rest at ``value_300`` with project context on, its widening adopted and its base
    planned (not yet held)."""
    engine.step_model.reset()
    planner = RequestPlanner(EveryTimeAnother(), left_first=128)
    settings = Settings(model=TEST_MODEL, engine=EngineKind.TRANSFORMERS, context_tokens=1024,
                        max_tokens=8, context_budget=64)
    rested = TEXT.index("value_300 ")
    planned = planner.plan(engine, settings, URI, TEXT, rested)
    widening = planner.wider(engine, settings, URI, planned)
    widened = planner.plan(engine, settings, URI, TEXT, rested, left_start=widening.start)
    planner.adopt(URI, planned.request.left, widening)
    base = planner.base(engine, URI, widened, widening)
    return planner, settings, widening, base


def test_a_request_within_the_held_base_keeps_its_project_context(engine) -> None:
    planner, settings, widening, base = base_with_context(engine)
    planner.hold(URI, base)
    below = TEXT.rindex("\n", 0, base.end - 1) + 1
    within = planner.plan(engine, settings, URI, TEXT, below)
    assert within.request.left_start == widening.start
    assert within.request.context_files == base.request.context_files
    # Below the base: a place of its own, with its own context.
    outside = planner.plan(engine, settings, URI, TEXT, TEXT.index("value_390 "))
    assert outside.request.context_files != base.request.context_files


def test_a_base_planned_before_the_workspace_changed_is_not_held(engine) -> None:
    """The base's prefill runs in the background; a folder that comes or goes meanwhile
    (``reset``) makes its project context stale, and a request within it plans its own
    (a race the server's test of announced folders met on a busy machine)."""
    planner, settings, _, base = base_with_context(engine)
    planner.reset()  # a workspace folder came while the base was being prefilled
    planner.hold(URI, base)
    below = TEXT.rindex("\n", 0, base.end - 1) + 1
    within = planner.plan(engine, settings, URI, TEXT, below)
    assert within.request.context_files != base.request.context_files
