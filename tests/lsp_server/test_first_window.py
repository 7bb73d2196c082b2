"""The first window at a new place follows the prefill speed the engine measures (issue 29,
item 2): the speed record (``fim.engines.prefill_speed``), the step model that fills it (with
a clock the test drives, never the wall clock), and the planner that reads it."""

from __future__ import annotations

import pytest

from fim.api import Engine
from fim.editor_policy import LEFT_FIRST_TOKENS, RIGHT_TOKENS
from fim.engines.model_specs import EngineKind
from fim.engines.prefill_speed import MIN_MEASURED_TOKENS, PrefillSpeed
from lsp_server.request_plan import (
    FIRST_WINDOW_RATIO,
    NEW_PLACE_PREFILL_S,
    RequestPlanner,
    first_window,
)
from lsp_server.settings import Settings
from tests.support.seam_lsp_client import TEST_MODEL

pytestmark = [pytest.mark.timeout(300)]

#: No project context: the test model's whole window (1,024 tokens, what the planner plans
#: for) is the file's, a left share of some 860 tokens, room for the wide windows below.
NO_CONTEXT = {"context_definitions": False, "context_open_files": False,
              "context_recent_edits": False, "context_similar_code": False}
SETTINGS = Settings(model=TEST_MODEL, engine=EngineKind.TRANSFORMERS, time_budget_ms=60_000,
                    **NO_CONTEXT)


class Clock:
    """A clock that moves only when the test says so: ``step`` seconds per reading."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine.load(TEST_MODEL, engine=EngineKind.TRANSFORMERS)


def test_the_record_is_a_moving_average_of_long_enough_prefills() -> None:
    speed = PrefillSpeed()
    assert speed.tokens_within(1.0) is None
    speed.record(MIN_MEASURED_TOKENS - 1, 0.001)  # too short to say anything
    assert speed.tokens_per_s is None and speed.samples == 0
    speed.record(200, 1.0)
    assert speed.tokens_per_s == 200 and speed.tokens_within(0.5) == 100
    speed.record(400, 1.0)  # the newest weighs 0.3
    assert speed.tokens_per_s == pytest.approx(0.3 * 400 + 0.7 * 200)
    assert speed.samples == 2


def test_the_first_window_is_what_the_speed_runs_in_the_new_place_budget() -> None:
    left_max = 1800
    assert first_window(None, RIGHT_TOKENS, left_max) == LEFT_FIRST_TOKENS
    slow = PrefillSpeed()
    slow.record(100, 1.0)  # slower than the constant: never narrower than it
    assert first_window(slow, RIGHT_TOKENS, left_max) == LEFT_FIRST_TOKENS
    mid = PrefillSpeed()
    mid.record(600, 1.0)  # affords 532 left tokens: the highest rung within them
    assert 600 * NEW_PLACE_PREFILL_S - RIGHT_TOKENS - 4 >= 4 * LEFT_FIRST_TOKENS
    assert first_window(mid, RIGHT_TOKENS, left_max) == 4 * LEFT_FIRST_TOKENS
    fast = PrefillSpeed()
    fast.record(10_000, 1.0)  # ten times this machine: the whole left share at once
    assert first_window(fast, RIGHT_TOKENS, left_max) == left_max
    assert first_window(fast, RIGHT_TOKENS, 100) == 100  # a small window caps the floor


def speed_of(tokens_per_s: float) -> PrefillSpeed:
    speed = PrefillSpeed()
    speed.record(round(tokens_per_s * 10), 10.0)
    return speed


def test_a_wavering_speed_keeps_one_first_window() -> None:
    """Measured speeds waver by a share of themselves: within 20% either way of the middle
    of a rung (this machine's 260 tokens/s, quiet, sat on the old 128/192 boundary), every
    speed gives the same window, so two sessions at one cursor run the same prompt."""
    left_max = 1800
    for rung in (LEFT_FIRST_TOKENS * FIRST_WINDOW_RATIO, LEFT_FIRST_TOKENS * 4):
        # the speed whose affordable left tokens sit midway (by ratio) between two rungs
        middle = rung * FIRST_WINDOW_RATIO ** 0.5 + RIGHT_TOKENS + 4
        windows = {first_window(speed_of(middle * f / NEW_PLACE_PREFILL_S), RIGHT_TOKENS,
                                left_max) for f in (0.8, 0.9, 1.0, 1.1, 1.2)}
        assert windows == {rung}
    # the quiet two-core machine's figures either side of the old boundary
    assert {first_window(speed_of(s), RIGHT_TOKENS, left_max) for s in (240, 260, 280)} == \
        {LEFT_FIRST_TOKENS}


def test_the_window_grows_with_the_speed_and_stays_within_the_share() -> None:
    left_max = 1800
    windows = [first_window(speed_of(s), RIGHT_TOKENS, left_max)
               for s in range(100, 4000, 25)]
    assert windows == sorted(windows)  # a faster machine never gets a narrower window
    assert set(windows) == {128, 256, 512, 1024, left_max}
    for s in range(100, 4000, 25):
        left = first_window(speed_of(s), RIGHT_TOKENS, left_max)
        affordable = s * NEW_PLACE_PREFILL_S - RIGHT_TOKENS - 4
        # within the new-place budget (the floor aside), and at least half what it affords
        assert left == LEFT_FIRST_TOKENS or left <= affordable
        assert left == left_max or 2 * left > affordable - 1


def test_the_step_model_measures_the_tokens_it_ran_not_those_it_reused(engine) -> None:
    model = engine.step_model
    model.reset()
    model.speed = PrefillSpeed()
    model.clock = Clock(0.5)  # each prefill takes 0.5 s by this clock
    ids = engine.tokenizer.encode("def f(x):\n    return x + 1\n" * 8)
    assert len(ids) > 2 * MIN_MEASURED_TOKENS
    model.prefill(ids)
    assert model.speed.tokens_per_s == pytest.approx(len(ids) / 0.5)
    # The same prompt and MIN_MEASURED_TOKENS more: only the new ones ran.
    more = ids + ids[:MIN_MEASURED_TOKENS]
    model.prefill(more)
    assert model.reused == len(ids)
    assert model.speed.samples == 2
    assert model.speed.tokens_per_s == pytest.approx(
        0.3 * MIN_MEASURED_TOKENS / 0.5 + 0.7 * len(ids) / 0.5)
    model.prefill(more)  # all cached: nothing ran, nothing measured
    assert model.speed.samples == 2
    # A prefill stopped by its interrupt ran an unknown share of its tokens: not measured.
    other = engine.tokenizer.encode("class A:\n    pass\n" * 20)
    assert len(other) > model.chunk
    assert model.prefill(other, interrupt=lambda: True) is None
    assert model.speed.samples == 2
    assert engine.runtime.prefill_speed is model.speed  # what the planner reads


def test_a_fast_machine_gets_a_wide_first_window_at_a_new_place(engine) -> None:
    text = "".join(f"value_{i} = compute({i}, {i} + 1)\n" for i in range(400))
    cursor = text.index("value_350 ")
    count = lambda s: len(engine.tokenizer.encode(s))  # noqa: E731
    engine.step_model.speed = PrefillSpeed()
    narrow = RequestPlanner().plan(engine, SETTINGS, "file:///a.py", text, cursor)
    narrow_tokens = count(text[narrow.request.left_start:cursor])
    assert narrow_tokens <= LEFT_FIRST_TOKENS
    engine.step_model.speed.record(20_000, 1.0)
    wide = RequestPlanner().plan(engine, SETTINGS, "file:///a.py", text, cursor)
    wide_tokens = count(text[wide.request.left_start:cursor])
    assert wide_tokens > 4 * LEFT_FIRST_TOKENS
    # A planner that already placed a narrow anchor keeps it for cursors it still serves,
    # and places the next new one with the wider window.
    planner = RequestPlanner()
    engine.step_model.speed = PrefillSpeed()
    first = planner.plan(engine, SETTINGS, "file:///a.py", text, cursor)
    engine.step_model.speed.record(20_000, 1.0)
    again = planner.plan(engine, SETTINGS, "file:///a.py", text, cursor + 3)
    assert again.request.left_start == first.request.left_start
    far = text.index("value_50 ")
    jumped = planner.plan(engine, SETTINGS, "file:///a.py", text, far)
    assert count(text[jumped.request.left_start:far]) > 4 * LEFT_FIRST_TOKENS
    # A benchmark's fixed first window stays fixed whatever the speed.
    fixed = RequestPlanner(left_first=LEFT_FIRST_TOKENS).plan(
        engine, SETTINGS, "file:///a.py", text, cursor)
    assert fixed.request.left_start == narrow.request.left_start


def test_a_longer_new_place_time_reads_a_wider_first_window(engine) -> None:
    """``newPlaceMs``: on the same measured speed, a user who allows the new place more time
    gets more of the file above the cursor; "auto" is ``NEW_PLACE_PREFILL_S``."""
    speed = PrefillSpeed()
    speed.record(260, 1.0)  # this project's two-core machine
    assert first_window(speed, RIGHT_TOKENS, 1700) == LEFT_FIRST_TOKENS
    assert first_window(speed, RIGHT_TOKENS, 1700, seconds=3.0) == 4 * LEFT_FIRST_TOKENS
    assert first_window(speed, RIGHT_TOKENS, 1700, seconds=60.0) == 1700
    text = "".join(f"value_{i} = compute({i}, {i} + 1)\n" for i in range(400))
    cursor = text.index("value_350 ")
    count = lambda s: len(engine.tokenizer.encode(s))  # noqa: E731
    engine.step_model.speed = speed
    auto = RequestPlanner().plan(engine, SETTINGS, "file:///a.py", text, cursor)
    assert count(text[auto.request.left_start:cursor]) <= LEFT_FIRST_TOKENS
    patient = Settings(model=TEST_MODEL, engine=EngineKind.TRANSFORMERS, time_budget_ms=60_000,
                       new_place_ms=3000, **NO_CONTEXT)
    longer = RequestPlanner().plan(engine, patient, "file:///a.py", text, cursor)
    longer_tokens = count(text[longer.request.left_start:cursor])
    assert 2 * LEFT_FIRST_TOKENS < longer_tokens <= 4 * LEFT_FIRST_TOKENS
    # The widening still reaches above the first window whatever the setting.
    planner = RequestPlanner()
    planned = planner.plan(engine, patient, "file:///a.py", text, cursor)
    widening = planner.wider(engine, patient, "file:///a.py", planned)
    assert widening is not None and widening.start < planned.request.left_start
