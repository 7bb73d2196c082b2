"""End-to-end: every file type gets suggestions in Neovim and in VS Code (issue 33).

A JavaScript, a YAML and a shell file get ghost text from the tiny in-process model, and the
editor says their suggestions are unchecked (Seam has no grammar for them); a Python and a Go
file's are exact.  Neovim: one session visits the five files (``require("seam").check()`` is what a
statusline shows).  VS Code (code-server in Chromium, ``tests/e2e/vscode/drive.cjs``): the
status item reads ``Seam: ready (unchecked)`` in the JavaScript, YAML and shell files, and
``Seam: ready`` in the Python and Go ones; Tab accepts the suggestion into the file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e import test_nvim, test_vscode
from tests.e2e.test_vscode import tooling, vsix  # noqa: F401 - fixtures

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]

#: name -> (text, 1-based line of the hole, whether suggestions there are exact); the hole is
#: at the end of that line, after a typed space in Neovim.
FILES = {
    "app.js": ("function add(a, b) {\n  return a + b;\n}\n\nconst total =\n"
               "console.log(total);\n", 5, False),
    "ci.yaml": ("name: build\non: [push]\njobs:\n  test:\n    runs-on:\n", 5, False),
    "run.sh": ("#!/bin/sh\nset -eu\nfor f in *.txt; do\n  echo\ndone\n", 4, False),
    "mod.py": ("def add(a, b):\n    return\n\n\nprint(add(1, 2))\n", 2, True),
    # (the hole's line has no tab: VS Code's driver places the cursor by visual column)
    "main.go": ("package main\n\nvar total =\n\nfunc main() {\n\tprintln(total)\n}\n", 3,
                True),
}


def _ghost_at(vim: test_nvim.Nvim, line: int) -> str:
    """Go to the end of ``line`` in insert mode, type a space, and wait for ghost text (asking
    again by typing a character and deleting it, should an answer come back empty)."""
    vim.send(f"<Esc>{line}GA ")
    for _ in range(4):
        try:
            raw = vim.wait_for("ghost text", lambda: vim.lua(test_nvim.GHOST_LUA).strip(), 90)
            ghost = json.loads(raw)
            return "".join(chunk[0] for chunk in ghost.get("virt_text", []))
        except AssertionError:
            vim.send("x<BS>")
    raise AssertionError("no ghost text after four tries")


def test_nvim_completes_every_file_type_and_labels_them(tmp_path: Path) -> None:
    for name, (text, _, _) in FILES.items():
        (tmp_path / name).write_text(text)
    first = next(iter(FILES))
    with test_nvim.start_nvim(tmp_path, FILES[first][0], name=first) as (vim, _, server_log):
        vim.wait_for("the model", lambda: vim.lua("require('seam').state() or ''").strip()
                     == "ready", 300)
        for name, (_, line, exact) in FILES.items():
            if name != first:
                vim.send(f"<Esc>:edit {tmp_path / name}<CR>")
                vim.wait_for(f"the client in {name}", lambda: vim.lua(
                    "#vim.lsp.get_clients({name='seam', bufnr=0})").strip() not in ("", "0"),
                    60)
            shown = _ghost_at(vim, line)
            assert shown.strip(), name
            check = vim.wait_for(f"the check of {name}",
                                 lambda: vim.lua("require('seam').check(0) or ''").strip(), 30)
            assert check == ("exact" if exact else "unchecked"), (name, check)
            vim.send("<C-]><Esc>")
        log = server_log.read_text()
        assert "Traceback" not in log, log[-3000:]
        # The server's completion records (logged as dicts) say the same.
        assert "'mode': 'unchecked'" in log and "'mode': 'exact'" in log


@pytest.mark.parametrize("name", list(FILES))
def test_vscode_completes_the_file_type_and_labels_it(vsix: Path, tmp_path: Path,  # noqa: F811
                                                      name: str) -> None:
    text, line, exact = FILES[name]
    # The hole as Neovim's test makes it (a space typed after the line's end): the same text
    # for the deterministic random model.
    lines = text.split("\n")
    lines[line - 1] += " "
    text = "\n".join(lines)
    out = test_vscode.OUTPUT / f"language-{name}"
    seam = {"seam.model": "random:santacoder", "seam.maxTokens": 8, "seam.timeBudgetMs": 60000}
    result = test_vscode.run_in_vscode(vsix, tmp_path, out, seam, {
        "file": name,
        "line": line,
        "column": len(text.split("\n")[line - 1]) + 1,
        "screenshot": str(out / "ghost_text.png"),
        "once": True,
    }, files={name: text})
    label = result["statusAtGhost"]
    assert label.endswith("Seam: ready" if exact else "Seam: ready (unchecked)"), result
    assert result["ghost"].strip() and result["saved"], result
    saved = (result["workspace"] / name).read_text()
    assert saved != text and saved.startswith(text.split("\n")[0]), saved
