"""Both editors against a running llama-server with only ``engine`` and ``modelServer`` set:
the suggestion comes from the server, Tab accepts it, the saved file parses.

The server is llama.cpp's ``llama-server`` built from the llama.cpp sources Seam runs
(``benchmarks/llama_server.py``) serving the bundled GGUF; skipped unless it was built and the
bundled model is installed.  The editors are driven as in ``test_nvim.py`` and
``test_vscode.py`` (their helpers, with these settings instead of a local model).
"""

from __future__ import annotations

import ast
import json
import urllib.request

import pytest

from benchmarks.llama_server import LlamaServer, built
from fim.engines import bundled
from tests.e2e import test_nvim, test_vscode
from tests.e2e.test_vscode import tooling, vsix  # noqa: F401 - fixtures

pytestmark = [
    pytest.mark.e2e, pytest.mark.bundled, pytest.mark.timeout(900),
    pytest.mark.skipif(built() is None, reason="llama-server not built "
                       "(python benchmarks/llama_server.py)"),
    pytest.mark.skipif(not bundled.installed(), reason="the bundled model is not installed"),
]


@pytest.fixture(scope="module")
def llama_server():
    model = bundled.gguf_file(bundled.lookup_spec("bundled:qwen2.5-coder-1.5b"))
    # One thread: on a machine busy with other work, llama.cpp's threads spin at their
    # barriers against each other and a token can take seconds.
    with LlamaServer(built(), model, threads=1, context=4096, batch=512) as server:
        server.wait_ready()
        # A server the user already runs has answered before: its first request (the
        # compute graph, the threads) is not Seam's to wait for, and on a busy machine it
        # can take longer than the one-token check Seam asks before it reports "ready".
        request = urllib.request.Request(
            server.url + "/completion", json.dumps({"prompt": "x = ", "n_predict": 1}).encode(),
            {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=300):
            pass
        yield server


def test_neovim_with_only_engine_and_model_server(llama_server, tmp_path, monkeypatch):
    monkeypatch.setattr(test_nvim, "SETTINGS", {"engine": "llama-server",
                                                "modelServer": llama_server.url})
    with test_nvim.start_nvim(tmp_path, test_nvim.SOURCE) as (vim, target, server_log):
        vim.wait_for("the seam client", lambda: vim.lua(
            "#vim.lsp.get_clients({name='seam'})").strip() not in ("", "0"), 60)
        vim.wait_for("the server", lambda: vim.lua(
            "require('seam').state() or ''").strip() == "ready", 300)
        vim.send(f"<Esc>{test_nvim.HOLE_LINE}GA ")
        ghost = json.loads(vim.wait_for("ghost text", lambda: vim.lua(
            test_nvim.GHOST_LUA).strip(), 240))
        shown = "".join(chunk[0] for chunk in ghost.get("virt_text", []))
        assert shown.strip(), ghost
        before = vim.lua("table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\\n')")
        vim.send("<Tab>")
        vim.wait_for("the accepted text", lambda: vim.lua(
            "table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\\n')") != before, 30)
        saved = test_nvim.saved_buffer(vim, target)
        assert saved != test_nvim.SOURCE
        ast.parse(saved)
        assert saved.startswith("def add(a, b):\n    return ") and "print(add(1, 2))" in saved
        log = server_log.read_text()
        assert "Traceback" not in log and "llama-server" in log, log[-3000:]


def test_vscode_with_only_engine_and_model_server(llama_server, vsix, tmp_path,  # noqa: F811
                                                  monkeypatch):
    # code-server reads machine-scoped settings (the server's URL is one) from the machine's
    # settings file only.
    monkeypatch.setattr(test_vscode, "MACHINE_SCOPED",
                        (*test_vscode.MACHINE_SCOPED, "seam.modelServer"))
    out = test_vscode.OUTPUT / "model-server"
    seam = {"seam.engine": "llama-server", "seam.modelServer": llama_server.url}
    result = test_vscode.run_in_vscode(vsix, tmp_path, out, seam, {
        "line": test_vscode.LEFT.count("\n") + 1,
        "column": len(test_vscode.LEFT.rsplit("\n", 1)[-1]) + 1,
        "screenshot": str(out / "ghost_text.png"),
        "screenshotAccepted": str(out / "accepted.png"),
        "serverLog": str(tmp_path / "xdg" / "state" / "seam" / "server.log"),
        "restMs": 1500,
    })
    assert result["saved"], result
    assert result["status"].endswith("Seam: ready"), result
    saved = (result["workspace"] / "scale.py").read_text()
    ast.parse(saved)
    assert saved.startswith(test_vscode.LEFT) and saved.endswith(test_vscode.RIGHT), saved
    assert saved[len(test_vscode.LEFT):len(saved) - len(test_vscode.RIGHT)].strip()
    seam_log = "".join(p.read_text() for p in out.glob("seam-*.log"))
    assert "llama-server at" in seam_log, seam_log[-3000:]
