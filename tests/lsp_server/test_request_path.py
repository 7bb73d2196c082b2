"""The shape of one request's path, read from the code (``ast``), so that it cannot regrow
unseen: the engine is called from ``engine_work`` only, planning is the planner's (settings
only parse and validate), and no engine is probed with ``getattr`` or reached through its
``backend``. docs/DESIGN.md ("One inline request's path") draws the path these keep."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LSP = ROOT / "lsp_server"
#: The engine's model work (``fim.engine_interface.CompletionEngine``).
ENGINE_WORK = {"complete", "warm", "prompt_for", "uncached"}
#: Where a module may call it, and why.
ENGINE_CALLERS = {
    "engine_work.py": "the one module that calls the engine for requests and background work",
    # (moved out of model_host.py with the team-server fallback, which loads a second engine)
    "warm_up.py": "the model's own warm-up as it loads, before any session can ask",
}


def modules() -> list[Path]:
    return sorted(p for p in LSP.rglob("*.py") if "__pycache__" not in p.parts)


def calls_of(path: Path, names: set[str]) -> list[tuple[int, str]]:
    """``x.name(...)`` calls in ``path`` of a method in ``names``, by line (``engine_work``'s
    own functions of those names are how the others reach the engine)."""
    tree = ast.parse(path.read_text(), str(path))
    return [(node.lineno, node.func.attr) for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in names
            and getattr(node.func.value, "id", None) != "engine_work"]


def test_the_engine_is_called_from_engine_work_only() -> None:
    found = {p.relative_to(ROOT).as_posix(): calls_of(p, ENGINE_WORK) for p in modules()
             if p.name not in ENGINE_CALLERS}
    # jobs, background and the service hand work to engine_work; the vLLM client's HTTP
    # ``complete`` is not in lsp_server.
    assert {k: v for k, v in found.items() if v} == {}
    assert calls_of(LSP / "engine_work.py", ENGINE_WORK)


def test_settings_parse_and_validate_and_the_planner_plans() -> None:
    settings = ast.parse((LSP / "settings.py").read_text())
    defined = {n.name for n in settings.body if isinstance(n, ast.FunctionDef)}
    imported = {a.name for n in ast.walk(settings) if isinstance(n, ast.ImportFrom)
                for a in n.names}
    assert not {"policy_for", "project_sources", "context_sources"} & defined
    assert "auto_policy" not in imported  # the "auto" policy is resolved by the planner
    plan = ast.parse((LSP / "request_plan.py").read_text())
    assert {"policy_for", "project_sources", "project_budget"} <= {
        n.name for n in plan.body if isinstance(n, ast.FunctionDef)}


def test_no_engine_is_probed_or_reached_through_its_backend() -> None:
    for path in modules():
        if path.name == "model_host.py":  # loads engines: it builds them from backends
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "getattr":
                first = node.args[0] if node.args else None
                assert not (isinstance(first, ast.Name) and "engine" in first.id), \
                    f"{path.name}:{node.lineno} probes an engine"
            if isinstance(node, ast.Attribute) and node.attr == "backend":
                base = node.value
                name = getattr(base, "id", getattr(base, "attr", ""))
                assert "engine" not in name, f"{path.name}:{node.lineno} reads engine.backend"
