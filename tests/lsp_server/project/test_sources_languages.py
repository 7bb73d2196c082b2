"""The project context keeps to the document's language: a JavaScript file's prompt holds the
open JavaScript files and the JavaScript files beside it, never the Python ones, and no
Python definitions; a Python file's keeps its own sources as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from fim import api
from lsp_server.project.sources import ContextCollector, OpenDocument
from lsp_server.project.workspace import Workspace
from lsp_server.request_plan import RequestPlanner
from lsp_server.settings import Settings

UTIL_JS = ("export function scaleAll(values, factor) {\n"
           "  return values.map((v) => v * factor);\n}\n")
OTHER_JS = "export const names = ['a', 'b'];\n"
HELPERS_PY = "def scale(value, factor):\n    return value * factor\n"
MAIN_JS = ("import { scaleAll } from './util.js';\n\n"
           "export function total(values) {\n"
           "  const scaled = scaleAll(values, 2);\n"
           "  return scaled.reduce((a, b) => a + b, 0);\n}\n")


@pytest.fixture(scope="module")
def engine():
    return api.Engine.load("random:santacoder")


def test_a_javascript_prompt_holds_javascript_only(engine, tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    for name, text in (("util.js", UTIL_JS), ("other.js", OTHER_JS),
                       ("helpers.py", HELPERS_PY), ("main.js", MAIN_JS)):
        (root / name).write_text(text)
    ws = Workspace()
    ws.add(root.as_uri())
    uri = (root / "main.js").as_uri()
    docs = [OpenDocument((root / "helpers.py").as_uri(), HELPERS_PY, "python"),
            OpenDocument((root / "other.js").as_uri(), OTHER_JS, "javascript"),
            OpenDocument(uri, MAIN_JS, "javascript")]
    settings = Settings(model="random:santacoder", context_tokens=2048, context_budget=256)
    planner = RequestPlanner(ContextCollector(ws))
    offset = MAIN_JS.index("  return scaled")
    req = planner.plan(engine, settings, uri, MAIN_JS, offset, docs,
                       language="javascript").request
    assert req.language == "javascript"
    paths = [f.path for f in req.context_files]
    assert "other.js" in paths  # the open JavaScript file
    assert "util.js" in paths  # similar code from the file beside it
    assert "helpers.py" not in paths, paths
    assert not any("def scale" in f.text for f in req.context_files)
    # The same open documents for a Python file: its own language's sources.
    py_uri = (root / "helpers.py").as_uri()
    py = planner.plan(engine, settings, py_uri, HELPERS_PY, len(HELPERS_PY) - 1, docs,
                      language="python").request
    assert py.language == "python"
    assert not any(f.path.endswith(".js") for f in py.context_files), py.context_files
