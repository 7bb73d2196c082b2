"""The ``vllm`` engine's limits against a real HTTP peer on 127.0.0.1
(``tests/support/vllm_peer.py``): ``seam eval --engine vllm`` can write its report (the
engine names its template as the in-process engines do), and a stream's socket read waits as
long as the request's time budget allows, not a fixed minute (issue 19)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from fim.api import CompletionRequest
from fim.cli_eval import _eval_report
from fim.options import Mode, Scope, StopReason
from fim.vllm.client import VllmEngine
from fim.vllm.stream import Stream


def test_the_eval_report_names_the_servers_template(peer, tmp_path):
    engine = VllmEngine.connect(peer.url)
    args = SimpleNamespace(model="bundled:x", engine="vllm", policy="exact", max_tokens=16,
                           top_k=5, scope="statement", seed=0, per_file=1, cases=1,
                           left_share=0.75, folder=tmp_path)
    report = _eval_report(args, {}, [], engine, 1.0, False)
    config = report["config"]
    # The peer's sentinels are the santacoder template's.
    assert config["template"] == engine.template.name == "santacoder"
    assert config["engine"] == "vllm" and config["context_tokens"] == 2048


def _request(budget_ms: int | None) -> CompletionRequest:
    return CompletionRequest("def add(a, b):\n    return ", "\n", mode=Mode.CONSTRAINED,
                             scope=Scope.STATEMENT, max_tokens=16, time_budget_ms=budget_ms)


@pytest.mark.parametrize("budget_s", [5.0, 150.0])
def test_the_stream_reads_as_long_as_the_time_budget_allows(peer, budget_s):
    engine = VllmEngine.connect(peer.url, timeout=2.0)
    req = _request(int(budget_s * 1e3))
    body = engine.body(req, engine.prompt_for(req))
    stream = Stream(engine.http, body, None, time.monotonic() + budget_s)
    got = stream.run()
    assert got.text == "a + b" and got.finish == "stop"
    # The socket the answer was read from waited at least the budget: a budget past a
    # minute is not cut at 60 s; a short one needs no minute-long read.
    read_s = stream.conn.timeout
    assert budget_s <= read_s <= budget_s + Stream.READ_MARGIN_S + 1.0


def test_without_a_budget_the_read_waits_the_documented_fallback(peer):
    engine = VllmEngine.connect(peer.url, timeout=2.0)
    req = _request(None)
    stream = Stream(engine.http, engine.body(req, engine.prompt_for(req)), None, None)
    assert stream.run().finish == "stop"
    assert stream.conn.timeout == Stream.UNBUDGETED_READ_S
    # A longer HTTP timeout is never shortened.
    slow = VllmEngine.connect(peer.url, timeout=300.0)
    stream = Stream(slow.http, slow.body(req, slow.prompt_for(req)), None, None)
    stream.run()
    assert stream.conn.timeout == 300.0


def test_a_slow_first_token_within_the_budget_is_an_answer(peer):
    # The peer waits before streaming, longer than the HTTP timeout: the budget decides.
    engine = VllmEngine.connect(peer.url, timeout=0.2)
    peer.delay_s = 0.6
    res = engine.complete(_request(30_000))
    assert (res.middle, res.stop) == ("a + b", StopReason.EOS)
