"""``seam doctor``, ``seam --version`` and the light install's promise that the llama.cpp path
never imports torch.

The log tests read logs written by a real ``seam serve`` (through the LSP client of
``tests.support.seam_lsp_client``), so a change to what the server logs breaks them here rather
than silently blinding the doctor.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from fim.engines.model_specs import EngineKind
from fim.version import __version__
from lsp_server import diagnosis
from lsp_server.diagnosis import Finding, Request, Topic, Verdict, diagnose
from lsp_server.server_log_state import ServerState, last_session
from lsp_server.settings import Settings, merge
from tests.support.seam_lsp_client import (
    REPO,
    TEST_MODEL,
    lsp_session,
    server_env,
    status,
    wait_ready,
)

pytestmark = [pytest.mark.timeout(300)]


def settings(**values) -> Settings:
    merged, problems = merge(Settings(), values)
    assert not problems, problems
    return merged


def run_seam(*args: str, env: dict[str, str] | None = None, timeout: float = 120
             ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lsp_server.cli", *args], cwd=REPO,
                          env=env or server_env(), capture_output=True, text=True,
                          timeout=timeout)


def findings(report, topic: Topic) -> list[Finding]:
    return report.find(topic)


# ----- the version and the distribution -----------------------------------------------------

def test_the_version_is_written_once_and_seam_prints_it() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["name"] == "seam-complete"
    assert "version" not in project["project"]
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "fim.version.__version__"}
    done = run_seam("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"seam {__version__}"
    from lsp_server.server import SERVER_VERSION

    assert SERVER_VERSION == __version__


def test_the_default_install_has_no_torch_and_the_extras_name_it() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    names = [d.split("=")[0].split(">")[0].split("<")[0].strip()
             for d in project["project"]["dependencies"]]
    assert "llama-cpp-python" in names
    assert not {"torch", "transformers", "accelerate", "safetensors"} & set(names)
    extras = project["project"]["optional-dependencies"]
    assert "torch==2.13.0" in extras["transformers"]
    # the bundled model runs on the default engine: its extra brings no torch of its own
    assert not any(d.startswith(("torch", "transformers")) for d in extras["bundled"])


# ----- the llama.cpp path without torch -----------------------------------------------------

#: Run in a child: torch and transformers cannot be imported at all (as in the light install),
#: then the command runs and the child reports which of them got into ``sys.modules``.
BLOCKED = textwrap.dedent("""
    import importlib.abc, json, sys

    class Absent(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("torch", "transformers", "accelerate", "safetensors"):
                raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)",
                                          name=name)
            return None

    sys.meta_path.insert(0, Absent())
    from lsp_server.cli import main
    try:
        code = main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
    heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers"))
    print(json.dumps({"code": code, "heavy": heavy}), file=sys.stderr)
""")


def _blocked(args: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess, dict]:
    done = subprocess.run([sys.executable, "-c", BLOCKED, *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=240)
    last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "{}"
    return done, json.loads(last)


@pytest.mark.skipif(not diagnosis.installed_packages()["llama-cpp-python"],
                    reason="llama-cpp-python not installed")
def test_seam_complete_on_llama_cpp_never_imports_torch(tmp_path: Path) -> None:
    from fim.engines.gguf_export import write_santacoder_gguf
    from fim.engines.random_model import build_random_santacoder

    model, tokenizer = build_random_santacoder(seed=0)
    gguf = write_santacoder_gguf(model, tokenizer, tmp_path / "random.gguf")
    source = tmp_path / "a.py"
    source.write_text("def add(a, b):\n    return \n", encoding="utf-8")
    env = server_env() | {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    done, seen = _blocked(["complete", f"{source}:2:12", "--model", str(gguf),
                           "--engine", "llama.cpp", "--max-tokens", "4", "--json"], env)
    assert seen.get("code") == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["parses"] is True and result["tokens"] > 0, result
    assert seen["heavy"] == []
    # the doctor and the version too
    for args in (["--version"], ["doctor", "--json", "--model", str(gguf)]):
        done, seen = _blocked(args, env)
        assert seen.get("code") in (0, 1), done.stderr[-2000:]
        assert seen["heavy"] == [], args


def test_the_transformers_engine_without_torch_is_one_clear_line(tmp_path: Path) -> None:
    """The check above can fail (the blocker does stop an import of torch), and the light
    install asked for the transformers engine says which extra to install, without a
    traceback."""
    env = server_env() | {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    source = tmp_path / "a.py"
    source.write_text("x = \n", encoding="utf-8")
    done, seen = _blocked(["complete", f"{source}:1:5", "--model", TEST_MODEL,
                           "--engine", "transformers", "--max-tokens", "2"], env)
    assert seen.get("code") == 2, done.stderr[-2000:]
    assert "pip install 'seam-complete[transformers]'" in done.stderr
    assert "Traceback" not in done.stderr


# ----- what the doctor reports ---------------------------------------------------------------

def test_the_engine_that_would_run_and_a_missing_transformers_engine() -> None:
    light = {name: None for name in diagnosis.PACKAGES} | {"llama-cpp-python": "0.3.36"}
    report = diagnosis._engine_and_model(settings(model=TEST_MODEL, engine="transformers"), light)
    assert report[0].verdict is Verdict.PROBLEM
    assert "seam-complete[transformers]" in report[0].fix
    ok = diagnosis._engine_and_model(settings(model=TEST_MODEL, engine="llama.cpp"), light)
    assert ok[0].verdict is Verdict.OK and ok[0].details["engine"] == "llama.cpp"
    vllm = diagnosis._engine_and_model(settings(engine="vllm"), light)
    assert vllm[0].verdict is Verdict.PROBLEM and "vllmServer" in vllm[0].fix


def test_the_default_engine_missing_is_a_problem() -> None:
    found = {name: None for name in diagnosis.PACKAGES}
    problems = [f for f in diagnosis._packages(found) if f.verdict is Verdict.PROBLEM]
    assert len(problems) == 1 and "llama-cpp-python" in problems[0].summary


def test_a_file_type_that_is_not_served(tmp_path: Path) -> None:
    script = tmp_path / "a.js"
    script.write_text("let x = 1\n", encoding="utf-8")
    python = tmp_path / "b.py"
    python.write_text("x = 1\n", encoding="utf-8")
    log = tmp_path / "none.log"
    base = settings(model=TEST_MODEL)

    def file_finding(path: Path, language: str | None = None,
                     s: Settings = base) -> Finding:
        report = diagnose(Request(s, file=path, language=language, log_file=log))
        (found,) = findings(report, Topic.FILE)
        return found

    only_python = settings(model=TEST_MODEL, languages=["python"])
    assert file_finding(script, s=only_python).verdict is Verdict.PROBLEM
    assert "not served" in file_finding(script, s=only_python).summary
    assert file_finding(python, s=only_python).verdict is Verdict.OK
    assert file_finding(python, "markdown", s=only_python).verdict is Verdict.PROBLEM
    assert file_finding(script, "javascript",
                        settings(languages=["python", "javascript"])).verdict is Verdict.OK
    # By default every file is served: Python's suggestions exact, the others' unchecked.
    assert file_finding(script).verdict is Verdict.OK
    assert "unchecked" in file_finding(script).summary
    assert "exact" in file_finding(python).summary
    odd = tmp_path / "notes.unknownsuffix"
    odd.write_text("some text\n", encoding="utf-8")
    assert file_finding(odd).verdict is Verdict.OK and "unchecked" in file_finding(odd).summary
    assert file_finding(odd, s=only_python).verdict is Verdict.PROBLEM


def test_an_unreachable_vllm_server(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    report = diagnose(Request(settings(engine="vllm", vllmServer=url),
                              log_file=tmp_path / "none.log"))
    (server,) = findings(report, Topic.SERVER)
    assert server.verdict is Verdict.PROBLEM and url in server.summary
    assert not report.ok


def test_refused_settings_are_reported_as_the_server_refuses_them(tmp_path: Path) -> None:
    done = run_seam("doctor", "--json", "--settings", '{"seam": {"scope": "bogus"}}',
                    "--log-file", str(tmp_path / "none.log"), "--model", TEST_MODEL)
    report = json.loads(done.stdout)
    assert done.returncode == 1 and report["ok"] is False
    problems = [f for f in report["findings"] if f["topic"] == "settings"]
    assert len(problems) == 1 and "seam.scope" in problems[0]["summary"]
    assert report["settings"]["scope"] == "auto"  # the value kept, as the server keeps it


def test_bad_arguments_are_one_line_and_exit_code_2() -> None:
    for args in (["doctor", "--settings", "not json"], ["doctor", "--settings", "[1]"],
                 ["doctor", "--engine", "nonsense"]):
        done = run_seam(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_the_text_report_names_each_problem_and_its_fix(tmp_path: Path) -> None:
    done = run_seam("doctor", "--engine", "vllm", "--log-file", str(tmp_path / "none.log"))
    assert done.returncode == 1
    assert "PROBLEM engine: engine vllm" in done.stdout
    assert "fix: set \"vllmServer\"" in done.stdout
    assert done.stdout.strip().endswith("1 problem found")


@pytest.mark.asyncio
async def test_the_last_server_state_from_a_real_server_log(tmp_path: Path) -> None:
    """Ready, then (the same log cut after the load began) still loading, then a model that
    fails to load: each read back from what ``seam serve`` wrote."""
    log = tmp_path / "server.log"
    async with lsp_session(tmp_path, {"seam": {"model": TEST_MODEL,
                                               "engine": "transformers"}}) as lc:
        await wait_ready(lc)
    state = last_session(log.read_text(encoding="utf-8"))
    assert state is not None and state.state is ServerState.READY, log.read_text()
    report = diagnose(Request(settings(model=TEST_MODEL), log_file=log))
    assert any(f.details.get("state") == "ready" for f in findings(report, Topic.LOG))

    lines = log.read_text(encoding="utf-8").splitlines()
    cut = next(i for i, line in enumerate(lines) if "loading model" in line)
    loading = tmp_path / "loading.log"
    loading.write_text("\n".join(lines[:cut + 1]) + "\n", encoding="utf-8")
    report = diagnose(Request(settings(model=TEST_MODEL), log_file=loading))
    (still,) = [f for f in findings(report, Topic.LOG) if "state" in f.details]
    assert still.details["state"] == "loading" and still.verdict is Verdict.NOTE
    assert "still loading" in still.summary

    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a gguf file at all" * 100)
    async with lsp_session(tmp_path, {"seam": {"model": str(broken),
                                               "engine": "llama.cpp"}}) as lc:
        for _ in range(600):
            if (await status(lc))["state"] == "error":
                break
            await asyncio.sleep(0.1)
    report = diagnose(Request(settings(model=TEST_MODEL), log_file=log))
    (failed,) = [f for f in findings(report, Topic.LOG) if "state" in f.details]
    assert failed.verdict is Verdict.PROBLEM and failed.details["state"] == "error"
    assert str(broken) in failed.summary
    assert not report.ok


def test_load_reports_how_long_the_model_took(tmp_path: Path) -> None:
    report = diagnose(Request(settings(model=TEST_MODEL, engine="transformers"),
                              log_file=tmp_path / "none.log", load=True, load_timeout_s=240))
    (load,) = findings(report, Topic.LOAD)
    assert load.verdict is Verdict.OK, load.summary
    assert load.details["state"] == "ready" and load.details["seconds"] > 0
    report = diagnose(Request(settings(model=TEST_MODEL, engine=EngineKind.LLAMA_CPP.value),
                              log_file=tmp_path / "none.log"))
    assert not findings(report, Topic.LOAD)  # only with load=True


def test_the_documented_json_matches_the_report(tmp_path: Path) -> None:
    """docs/user-guide.md shows editors the shape of ``seam doctor --json``: its keys, topics
    and verdicts are the real ones."""
    import re

    guide = (REPO / "docs/user-guide.md").read_text(encoding="utf-8")
    part = guide.split("`seam doctor --json` is for editors", 1)[1]
    example = json.loads(re.search(r"```json\n(.*?)```", part, re.S).group(1))
    real = diagnose(Request(settings(model=TEST_MODEL), file=tmp_path / "notes.txt",
                            log_file=tmp_path / "none.log")).as_json()
    assert set(example) == set(real)
    for finding in example["findings"]:
        assert set(finding) == set(real["findings"][0])
        assert Topic(finding["topic"]) and Verdict(finding["verdict"])
    topics = re.search(r"`topic` \((.*?)\)", part, re.S).group(1)
    assert set(re.findall(r"`(\w+)`", topics)) == {t.value for t in Topic}
    states = re.search(r"`details.state`:(.*?)\.", part, re.S).group(1)
    assert set(re.findall(r"`(\w+)`", states)) == {s.value for s in ServerState}
