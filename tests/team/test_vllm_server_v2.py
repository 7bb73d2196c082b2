"""Seam's constraint inside a real vLLM server running Model Runner V2 (vLLM 0.32's default
runner where Triton runs, so on CUDA).

On this CPU vLLM would fall back to the V1 runner: its V2 runner's batch kernels are Triton,
and the registry's Triton has no CPU backend.  ``tests.support.triton_interpreter`` opens V2 to
Triton's own interpreter, which runs those same kernels on the CPU, slowly; so this module is
the V1 server test's core again, smaller, under V2 and its logits-processor interface
(``add_request`` by slot, the runner's token table, penalties before the processor):

* both servers (plain, and ``seam team-server``) say they run V2, and Seam's processor says V2
  built it (under V1 every other test here would pass unchanged);
* requests without Seam's arguments come back byte for byte as from the plain V2 server;
* constrained requests through Seam's client give middles that parse with their suffix, and
  the processor masked the model's likeliest token at least once;
* sampled constrained requests (temperature, min-p, penalties) leave no row dead.
"""

from __future__ import annotations

import ast
import re
import time

import pytest

from tests.support.team import need_team_python
from tests.team.test_vllm_server import (
    CASES,
    Server,
    _answers,
    _plain_requests,
    _post,
    sampled_constrained,
)

pytestmark = pytest.mark.slow
V2_LOG = "Using V2 Model Runner"


@pytest.fixture(scope="module")
def v2_servers(tmp_path_factory):
    need_team_python()
    from tests.support.tiny_qwen import write_tiny_qwen
    from tests.support.triton_interpreter import v2_environment

    work = tmp_path_factory.mktemp("vllm-v2")
    model = write_tiny_qwen(work / "tiny-qwen")
    env = v2_environment(work / "triton-backend")
    plain = Server(model, work / "plain.log", plugin=False, env=env)
    try:
        name = plain.model()
        plain_answers = _answers(plain.port, _plain_requests(name)[:4])
        plain_log = plain.log.read_text(errors="replace")
    finally:
        plain.stop()
    seam = Server(model, work / "seam.log", plugin=True, env=env)
    print(f"\nvLLM (Model Runner V2, Triton interpreted) start-up with the tiny model: plain "
          f"{plain.start_s:.1f} s, with Seam's processor {seam.start_s:.1f} s")
    try:
        yield seam, name, plain_answers, plain_log
    finally:
        seam.stop()


def _flush_finished_rows(port: int, name: str) -> None:
    """V2 tells a processor nothing when a request ends: its slot is handed to the next
    request (``add_request``), and that is when Seam logs the row it held.  One plain request
    per slot (``--max-num-seqs 8``) reuses every slot whatever order the free list keeps."""
    for _ in range(8):
        _post(port, "/v1/completions", {"model": name, "prompt": "x", "max_tokens": 1})


def test_both_servers_run_model_runner_v2(v2_servers):
    seam, _, _, plain_log = v2_servers
    log = seam.log.read_text(errors="replace")
    assert V2_LOG in plain_log and V2_LOG in log, seam.tail()
    assert "Seam constraint loaded for Model Runner V2" in log, seam.tail()


def test_requests_without_seams_arguments_are_untouched_under_v2(v2_servers):
    seam, name, plain_answers, _ = v2_servers
    assert _answers(seam.port, _plain_requests(name)[:4]) == plain_answers


def test_constrained_middles_parse_and_the_processor_masked_under_v2(v2_servers):
    from fim.api import CompletionRequest
    from fim.options import Mode, StopReason
    from fim.vllm.client import VllmEngine

    seam, name, _, _ = v2_servers
    engine = VllmEngine.connect(f"http://127.0.0.1:{seam.port}")
    done = re.compile(r"seam row done: .*masked_top=(\d+)")
    before = len(done.findall(seam.log.read_text(errors="replace")))
    answered = 0
    for left, right, scope in CASES:
        res = engine.complete(CompletionRequest(left, right, mode=Mode.CONSTRAINED,
                                                scope=scope, max_tokens=32))
        if res.middle is None:  # the random model ran out of tokens with no complete point
            assert res.stop is StopReason.NO_CANDIDATE, res
        else:
            ast.parse(left + res.middle + right)
            answered += 1
    _flush_finished_rows(seam.port, name)
    masked = [int(m) for m in done.findall(seam.log.read_text(errors="replace"))[before:]]
    assert len(masked) >= len(CASES), seam.tail()
    assert sum(masked) > 0
    assert answered >= len(CASES) // 2


def test_no_sampling_setting_lets_an_unviable_token_through_under_v2(v2_servers):
    """V2 applies penalties and bias before the processor and temperature and min-p after
    it: no row may end dead (a sampled token the constraint refused).  Top-k and top-p are not
    sent here: vLLM's Triton kernel for them stops in Triton's interpreter (``InterpreterError:
    'int' object has no attribute 'to'``, which ends the engine); they are checked against
    V1's real sampler in ``test_sampling_exact.py`` and over the real V1 server."""
    from transformers import AutoTokenizer

    from fim.vllm.rows import TokenTable

    seam, name, _, _ = v2_servers
    tok = AutoTokenizer.from_pretrained(str(seam.log.parent / "tiny-qwen"))
    stops = sorted(TokenTable.from_tokenizer(tok, len(tok)).stop_ids)
    done = re.compile(r"seam row done: .*dead=(\w+)")
    before = len(done.findall(seam.log.read_text(errors="replace")))
    settings = [dict(temperature=0.9), dict(temperature=1.2, min_p=0.05),
                dict(temperature=1.0, repetition_penalty=1.3, frequency_penalty=0.5,
                     presence_penalty=0.5)]
    cases = CASES[:3]
    sampled_constrained(seam.port, name, stops, cases, settings, max_tokens=24)
    time.sleep(1)
    _flush_finished_rows(seam.port, name)
    dead = done.findall(seam.log.read_text(errors="replace"))[before:]
    assert len(dead) >= len(cases) * len(settings), seam.tail()
    assert "True" not in dead
