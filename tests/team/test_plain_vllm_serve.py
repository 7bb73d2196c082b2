"""Plain ``vllm serve`` with Seam installed: constrained answers with no Seam flag, every route
closed without the key, limits per request.

Seam is "installed" for the server as pip installs it: a ``.dist-info`` folder whose
``entry_points.txt`` is written from pyproject.toml's ``vllm.logits_processors`` table, on the
server's ``PYTHONPATH`` (the shared ``.venv-team`` keeps its own install untouched).  The
server is ``python -m vllm.entrypoints.openai.api_server`` with no ``--logits-processors``;
``VLLM_API_KEY`` and Seam's route guard (``--middleware``) close its routes, and small limits
are set through their variables.  ``seam complete --engine vllm`` must get a middle that
parses, and the processor's log must show it masked rows: the entry point alone loaded it.
"""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support.team import REPO, TEAM_PYTHON, need_team_python

pytestmark = pytest.mark.slow
START_TIMEOUT_S = 600
KEY = "team-secret-1"
LIMITS = {"SEAM_MAX_CONTEXT_CHARS": "5000", "SEAM_MAX_NEW_TOKENS": "64",
          "SEAM_MAX_REQUEST_BYTES": "200000"}


def write_installed_metadata(site: Path) -> Path:
    """A ``seam_complete`` distribution's metadata with pyproject.toml's entry points (what
    ``pip install`` writes), in ``site``."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    info = site / "seam_complete-0.0.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: seam-complete\n"
                                   "Version: 0.0.0\n")
    lines = []
    for group, entries in project["entry-points"].items():
        lines.append(f"[{group}]")
        lines += [f"{name} = {target}" for name, target in entries.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return site


def _url(port: int, path: str) -> str:
    return f"http://127.0.0.1:{port}{path}"


def _call(port: int, path: str, body: dict | None = None, key: str | None = None,
          raw: bytes | None = None) -> tuple[int, dict]:
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    req = urllib.request.Request(_url(port, path), data, headers)
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            text = resp.read()
            status = resp.status
    except urllib.error.HTTPError as err:
        text, status = err.read(), err.code
    try:
        return status, json.loads(text)
    except ValueError:
        return status, {"text": text.decode(errors="replace")}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    need_team_python()
    from tests.support.tiny_qwen import write_tiny_qwen

    work = tmp_path_factory.mktemp("plain-serve")
    model = write_tiny_qwen(work / "tiny-qwen")
    site = write_installed_metadata(work / "site")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = [str(TEAM_PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
            "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "1024",
            "--dtype", "float32", "--enforce-eager", "--max-num-seqs", "4", "--seed", "0",
            "--middleware", "fim.vllm.route_guard.RouteGuard"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]),
               VLLM_API_KEY=KEY, VLLM_CPU_KVCACHE_SPACE="1",
               VLLM_CPU_OMP_THREADS_BIND="nobind", **LIMITS)
    log = work / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=work,
                                start_new_session=True)
    try:
        end = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vLLM exited with {proc.returncode}:\n" + log.read_text()[-4000:])
            try:
                with urllib.request.urlopen(_url(port, "/health"), timeout=5):
                    break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > end:
                    pytest.fail("vLLM did not start:\n" + log.read_text()[-4000:])
                time.sleep(1)
        yield port, log
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def test_the_installed_plugin_constrains_with_no_flag(server, tmp_path):
    port, log = server
    left, right = "def f(a, b):\n    total = a +", "\n    return total\n"
    source = tmp_path / "case.py"
    source.write_text(left + right, encoding="utf-8")
    col = len(left) - (left.rfind("\n") + 1) + 1
    proc = subprocess.run(
        [sys.executable, "-m", "fim", "complete", f"{source}:2:{col}", "--engine", "vllm",
         "--server", _url(port, ""), "--max-tokens", "24", "--json", "--quiet"],
        capture_output=True, text=True, timeout=300, cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO), SEAM_VLLM_API_KEY=KEY))
    assert proc.returncode in (0, 1), proc.stderr
    res = json.loads(proc.stdout)
    text = log.read_text(errors="replace")
    # Loaded by the entry point (the command line names no processor) and it masked the row.
    assert "Seam's logits processor for vLLM" in text and "seam row done" in text, text[-3000:]
    if res["middle"] is None:  # a random model may find no complete point in its budget
        assert res["stop"] == "no_candidate", res
    else:
        ast.parse(left + res["middle"] + right)


@pytest.mark.parametrize("method,path", [("POST", "/tokenize"), ("GET", "/metrics"),
                                         ("GET", "/v1/models"), ("GET", "/version")])
def test_every_route_but_health_needs_the_key(server, method, path):
    port, _ = server
    body = {"prompt": "x = 1"} if method == "POST" else None
    status, answer = _call(port, path, body)
    assert status == 401 and "API key" in answer["error"]["message"], (status, answer)
    status, _ = _call(port, path, body, key=KEY)
    assert status == 200
    status, _ = _call(port, path, body, key="wrong-" + KEY)
    assert status == 401


def test_health_stays_open(server):
    port, _ = server
    assert _call(port, "/health")[0] == 200


def _completion(**extra) -> dict:
    return {"model": "x", "prompt": "<fim-prefix>x = <fim-suffix>\n<fim-middle>",
            "max_tokens": 4, **extra}


@pytest.mark.parametrize("body,status,names", [
    (_completion(vllm_xargs={"seam_left": "x = " + "1" * 6000, "seam_right": "\n"}), 400,
     ("seam_left", "5000", "SEAM_MAX_CONTEXT_CHARS")),
    (_completion(max_tokens=65), 400, ("max_tokens", "64", "SEAM_MAX_NEW_TOKENS")),
    (_completion(prompt="#" * 250_000), 413, ("200000", "SEAM_MAX_REQUEST_BYTES")),
])
def test_limits_are_refused_by_name(server, body, status, names):
    port, _ = server
    got, answer = _call(port, "/v1/completions", body, key=KEY)
    message = answer["error"]["message"]
    assert got == status and all(n in message for n in names), (got, answer)
    # The server is up and answers a request within the limits.
    model = _call(port, "/v1/models", key=KEY)[1]["data"][0]["id"]
    ok, _ = _call(port, "/v1/completions", _completion(model=model), key=KEY)
    assert ok == 200
