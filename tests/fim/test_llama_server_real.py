"""The ``llama-server`` and ``openai`` engines against a real llama.cpp ``llama-server`` (the
one ``benchmarks/llama_server.py`` builds from the llama.cpp sources Seam's own engine runs)
serving the bundled GGUF, started as llama.vim's README starts it.  Skipped unless that
server was built (``python benchmarks/llama_server.py``, once, about ten minutes) and the
bundled model is installed."""

from __future__ import annotations

import ast

import pytest

from benchmarks.llama_server import LlamaServer, built
from fim.engines import bundled
from fim.options import Mode, StopReason
from fim.request import CompletionRequest
from fim.servers.engine import ServerOptions, connect
from fim.servers.errors import ServerError

pytestmark = [
    pytest.mark.bundled, pytest.mark.slow,
    pytest.mark.skipif(built() is None, reason="llama-server not built "
                       "(python benchmarks/llama_server.py)"),
    pytest.mark.skipif(not bundled.installed(), reason="the bundled model is not installed"),
]

CURSORS = [
    ("def add(a, b):\n    return ", "\n\nprint(add(1, 2))\n"),
    ("class Point:\n    def __init__(self, x, y):\n        self.x = x\n        ",
     "\n\n    def norm(self):\n        return (self.x ** 2 + self.y ** 2) ** 0.5\n"),
    ("values = [1, 2, 3]\ntotal = sum(", "\nprint(total)\n"),
    ("import os\n\ndef list_py(path):\n    return [f for f in os.listdir(path) if f.", ""),
    ("def greet(name):\n    print(f\"Hello, {", "\n"),
    ("for i in range(10):\n    if i % 2 == 0:\n        ", "\n    else:\n        pass\n"),
]


@pytest.fixture(scope="module")
def server():
    model = bundled.gguf_file(bundled.lookup_spec("bundled:qwen2.5-coder-1.5b"))
    with LlamaServer(built(), model, threads=2, context=4096, batch=512) as s:
        s.wait_ready()
        yield s


def _parses(left: str, middle: str, right: str) -> bool:
    try:
        ast.parse(left + middle + right)
    except SyntaxError:
        return False
    return True


@pytest.mark.parametrize("kind", ["llama-server", "openai"])
def test_every_middle_parses_and_repairs_are_counted(server, kind):
    engine = connect(kind, ServerOptions(server.url, top_n=5))
    assert engine.template.name == "qwen2.5-coder"
    repaired = answered = 0
    for left, right in CURSORS:
        res = engine.complete(CompletionRequest(left, right, max_tokens=32))
        stats = engine.last_stats
        assert stats.round_trips == stats.repairs + 1
        repaired += stats.repairs > 0
        if res.middle is not None:
            answered += 1
            assert res.parses and _parses(left, res.middle, right), (left, res.middle)
    assert answered >= 4
    # The unterminated comprehension with nothing after it makes the model's favourites
    # unviable somewhere: repairs happen on a real server, and the answers still parse.
    assert repaired >= 1


def test_the_native_route_counts_and_heals_with_the_servers_tokens(server):
    engine = connect("llama-server", ServerOptions(server.url))
    assert engine.window == 4096 and engine.features.exact_tokens
    prompt = engine.prompt_for(CompletionRequest("total = sum(", ")\n"))
    assert prompt.healed == "("  # the left context's last token is backed off
    assert engine.tokenizer.decode(engine.tokenizer.encode("x = 1\n")) == "x = 1\n"
    res = engine.complete(CompletionRequest("values = [1, 2]\ntotal = sum(", ")\n"))
    assert res.middle is not None and _parses("values = [1, 2]\ntotal = sum(", res.middle,
                                              ")\n")


def test_unconstrained_follows_the_server_without_repairs(server):
    engine = connect("llama-server", ServerOptions(server.url))
    res = engine.complete(CompletionRequest(*CURSORS[0], mode=Mode.UNCONSTRAINED,
                                            max_tokens=8))
    assert engine.last_stats.repairs == 0 and res.tokens >= 1


def test_a_tiny_time_budget_ends_without_a_hang(server):
    engine = connect("llama-server", ServerOptions(server.url))
    left, right = CURSORS[1]
    res = engine.complete(CompletionRequest(left + "# " * 300, right, time_budget_ms=5))
    assert res.stop in (StopReason.TIME, StopReason.BEST_COMPLETE)
    assert engine.complete(CompletionRequest(*CURSORS[0])).middle is not None  # still fine


def test_a_server_that_went_away(server):
    engine = connect("llama-server", ServerOptions(server.url))
    model = bundled.gguf_file(bundled.lookup_spec("bundled:qwen2.5-coder-1.5b"))
    with LlamaServer(built(), model, threads=1, context=512, batch=64) as other:
        other.wait_ready()
        gone = connect("llama-server", ServerOptions(other.url))
    with pytest.raises(ServerError, match="cannot be reached"):
        gone.complete(CompletionRequest(*CURSORS[0]))
    assert engine.complete(CompletionRequest(*CURSORS[0])).middle is not None
