"""Project context: the sources, their budgets and switches, and stability across cursors,
through the request planning the server and the benchmarks share."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from fim import api
from fim.editor_policy import LEFT_FIRST_TOKENS
from lsp_server.project.recent_edits import EditRing
from lsp_server.project.sources import (
    SOURCES,
    ContextCollector,
    ContextSources,
    OpenDocument,
)
from lsp_server.project.workspace import Workspace
from lsp_server.request_plan import RequestPlanner, project_budget, project_sources
from lsp_server.settings import (
    CONTEXT_BUDGET_TOKENS,
    GPU_CONTEXT_BUDGET_TOKENS,
    Settings,
    merge,
)

HELPERS = '''def scale(value, factor):
    """Multiply ``value`` by ``factor``."""
    return value * factor


def offset(value, by=1):
    return value + by
'''
NOTES = '''def remember(item):
    """Keep an item for later."""
    return [item]


class Archive:
    def put(self, item):
        return item
'''


def long_body(n: int) -> str:
    return "".join(f"    total = total + scale({i}, {i + 1})\n" for i in range(n))


MAIN = ("from helpers import scale\n\n\ndef compute(values):\n    total = 0\n"
        + long_body(120) + "    return total\n")


@pytest.fixture(scope="module")
def engine():
    return api.Engine.load("random:santacoder")


@pytest.fixture
def project(tmp_path: Path) -> dict:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "helpers.py").write_text(HELPERS)
    (root / "notes.py").write_text(NOTES)
    (root / "main.py").write_text(MAIN)
    ws = Workspace()
    ws.add(root.as_uri())
    uris = {name: (root / f"{name}.py").as_uri() for name in ("helpers", "notes", "main")}
    return {"root": root, "workspace": ws, "uris": uris}


def documents(project: dict, main_text: str = MAIN) -> list[OpenDocument]:
    u = project["uris"]
    return [OpenDocument(u["notes"], NOTES), OpenDocument(u["main"], main_text)]


def settings(**flags) -> Settings:
    return Settings(model="random:santacoder", context_tokens=2048, context_budget=256,
                    **{f"context_{k}": v for k, v in flags.items()})


def plan(engine, project, text=MAIN, offset=None, planner=None, **flags):
    planner = planner or RequestPlanner(ContextCollector(project["workspace"]))
    if offset is None:
        offset = text.index("    return total")
    return planner.plan(engine, settings(**flags), project["uris"]["main"], text, offset,
                        documents(project, text))


def test_every_source_reaches_the_prompt_in_the_repository_layout(engine, project):
    collector = ContextCollector(project["workspace"])
    collector.ring.record(project["uris"]["notes"], NOTES, 6, 7, 7)
    planned = plan(engine, project, planner=RequestPlanner(collector))
    req = planned.request
    paths = [f.path for f in req.context_files]
    # definitions first (steadiest), then open files, recent edits and similar code
    assert paths == ["helpers.py", "notes.py", "notes.py", "main.py"]
    assert "def scale(value, factor):" in req.context_files[0].text
    assert "def remember(item): ..." in req.context_files[1].text  # unvisited: signatures
    assert "return item" in req.context_files[2].text  # the edited chunk
    # the lines at the top of the function read like those above the cursor
    assert "total = total + scale(0, 1)" in req.context_files[3].text
    assert (req.repo, req.path) == ("proj", "main.py")
    prompt = engine.prompt_for(req)
    assert 0 < prompt.project_tokens <= req.context_budget == 256
    assert "# helpers.py" in engine.tokenizer.decode(prompt.ids[:prompt.project_tokens])


@pytest.mark.parametrize("source", SOURCES)
def test_each_source_can_be_turned_off(engine, project, source):
    collector = ContextCollector(project["workspace"])
    collector.ring.record(project["uris"]["notes"], NOTES, 6, 7, 7)
    on = plan(engine, project, planner=RequestPlanner(collector))
    off = plan(engine, project, planner=RequestPlanner(collector), **{source: False})
    got = dict(off.project.tokens)
    assert source not in got and all(got.values())
    assert dict(on.project.tokens)[source] > 0
    none = plan(engine, project, definitions=False, open_files=False, recent_edits=False,
                similar_code=False)
    assert none.request.context_files == () and none.request.context_budget == 0
    assert engine.prompt_for(none.request).project_tokens == 0


def test_budgets_hold_for_each_source_and_in_total(engine, project):
    big = "\n\n".join(f"def helper_{i}(a, b, c):\n    return a + b + c + {i}" for i in range(80))
    (project["root"] / "helpers.py").write_text(HELPERS + "\n\n" + big + "\n")
    collector = ContextCollector(project["workspace"])
    for line in range(0, 40, 10):
        collector.ring.record(project["uris"]["notes"], NOTES + big, line, line + 1, line + 1)
    text = MAIN.replace("from helpers import scale",
                        "from helpers import scale, " + ", ".join(
                            f"helper_{i}" for i in range(80)))
    text += "".join(f"helper_{i}(1, 2, 3)\n" for i in range(80))
    planned = plan(engine, project, text=text, offset=text.index("    return total"),
                   planner=RequestPlanner(collector))
    used = dict(planned.project.tokens)
    assert sum(used.values()) <= 256
    assert used["definitions"] <= 0.5 * 256 + 1  # its share, the later sources' kept
    prompt = engine.prompt_for(planned.request)
    assert prompt.project_tokens <= 256


def test_two_cursors_in_one_document_get_the_same_context(engine, project):
    collector = ContextCollector(project["workspace"])
    collector.ring.record(project["uris"]["notes"], NOTES, 6, 7, 7)
    planner = RequestPlanner(collector)
    first = plan(engine, project, offset=MAIN.index("    total = total + scale(100"),
                 planner=planner)
    # The user moves a few lines down and types: the same prompt start, the same context.
    below = MAIN.index("    total = total + scale(104")
    typed = MAIN[:below] + "    total = sca\n" + MAIN[below:]
    second = plan(engine, project, text=typed, offset=typed.index("sca\n") + 3,
                  planner=planner)
    assert first.request.left_start == second.request.left_start
    assert first.request.context_files == second.request.context_files
    assert (first.request.repo, first.request.path) == (second.request.repo,
                                                       second.request.path)
    a, b = engine.prompt_for(first.request), engine.prompt_for(second.request)
    assert a.project_tokens == b.project_tokens > 0
    assert a.ids[:a.project_tokens] == b.ids[:b.project_tokens]


def test_edits_in_the_prompt_window_stay_out_and_edits_above_it_come_in(engine, project):
    collector = ContextCollector(project["workspace"], EditRing())
    uri = project["uris"]["main"]
    cursor = MAIN.index("    return total")
    planner = RequestPlanner(collector)
    start = plan(engine, project, offset=cursor, planner=planner,
                 similar_code=False).request.left_start
    anchor_line = MAIN.count("\n", 0, start)
    assert anchor_line > 10
    collector.ring.record(uri, MAIN, anchor_line + 5, anchor_line + 6, anchor_line + 6)
    inside = plan(engine, project, offset=cursor, planner=planner, similar_code=False)
    assert "recent_edits" not in dict(inside.project.tokens) or \
        dict(inside.project.tokens)["recent_edits"] == 0
    collector.ring.record(uri, MAIN, 5, 6, 6)
    above = plan(engine, project, offset=cursor, planner=planner, similar_code=False)
    assert dict(above.project.tokens)["recent_edits"] > 0
    assert "total = total + scale(0, 1)" in above.request.context_files[-1].text


def test_a_visited_open_file_shows_where_the_user_was(engine, project):
    collector = ContextCollector(project["workspace"])
    collector.visit(project["uris"]["notes"], 7)
    planned = plan(engine, project, planner=RequestPlanner(collector), definitions=False,
                   recent_edits=False, similar_code=False)
    (notes,) = planned.request.context_files
    assert notes.path == "notes.py" and "return item" in notes.text  # lines, not signatures


def test_the_context_comes_out_of_the_left_share_so_the_prompt_start_holds(engine, project):
    planned = plan(engine, project)
    req = planned.request
    prompt = engine.prompt_for(req)
    assert prompt.project_tokens > 0
    # Nothing beyond the planned start was cut to make room for the context.
    assert prompt.left_chars_dropped == req.left_start
    budget = project_budget(planned.policy, ContextSources(budget=10**6))
    # The "auto" context (2,048 tokens) is capped by the test model's window (1,024).
    assert planned.policy.context_tokens == min(2048, engine.window) == 1024
    room = 1024 - 96 - planned.policy.right_tokens - 4
    assert budget == room - LEFT_FIRST_TOKENS
    # A window too small to spare the context's minimum gets none.
    small = dataclasses.replace(
        planned.policy,
        context_tokens=96 + planned.policy.right_tokens + 4 + LEFT_FIRST_TOKENS + 40)
    assert project_budget(small, ContextSources(budget=512)) == 0


def test_the_context_is_planned_without_a_workspace_too(engine, project):
    planned = RequestPlanner(ContextCollector(Workspace())).plan(
        engine, settings(), project["uris"]["main"], MAIN, MAIN.index("    return total"),
        documents(project))
    paths = [f.path for f in planned.request.context_files]
    # the open file and similar code from the document itself: nothing is read from disk
    assert paths == ["notes.py", "main.py"]
    assert planned.request.repo == "" and planned.request.path == "main.py"


def test_context_settings_are_validated():
    s, problems = merge(Settings(), {"contextBudgetTokens": 300, "contextDefinitions": False,
                                     "contextOpenFiles": True, "contextRecentEdits": False})
    assert not problems and s.context_budget == 300 and not s.context_definitions
    assert project_sources(s).enabled() == ("open_files", "similar_code")
    s, problems = merge(s, {"contextSimilarCode": False})
    assert not problems and project_sources(s).enabled() == ("open_files",)
    for bad in (-5, 10, 1 << 20, "lots", True):
        kept, problems = merge(s, {"contextBudgetTokens": bad})
        assert problems and kept.context_budget == 300
    kept, problems = merge(s, {"contextRecentEdits": "yes"})
    assert problems and kept.context_recent_edits is False
    auto, _ = merge(s, {"contextBudgetTokens": "auto"})
    assert project_sources(auto, "cpu").budget == CONTEXT_BUDGET_TOKENS
    assert project_sources(auto, "cuda").budget == GPU_CONTEXT_BUDGET_TOKENS
    assert not dataclasses.replace(project_sources(auto), definitions=False,
                                   open_files=False, recent_edits=False).active


def test_a_ring_put_in_place_later_is_the_one_the_edits_come_from(engine, project):
    collector = ContextCollector(project["workspace"])
    ring = EditRing()
    ring.record(project["uris"]["notes"], NOTES, 6, 7, 7)
    collector.ring = ring  # as benchmarks/usefulness.py does
    planned = plan(engine, project, planner=RequestPlanner(collector))
    assert dict(planned.project.tokens)["recent_edits"] > 0
