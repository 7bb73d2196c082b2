"""The engine contract (``tests/support/engine_contract.py``) run against every engine the main
environment has: the in-process engine over each tiny step model (transformers and llama.cpp
over the same random model, as ``tests/fim/engines/test_step_model_contract.py`` builds them),
and the vLLM client against the local vLLM peer (``tests/support/vllm_peer.py``), counting
tokens with the served model's tokenizer and by the estimate.  The real vLLM server's turn is
in ``tests/team/test_vllm_server.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from fim.api import Engine
from fim.engine_interface import CompletionEngine
from fim.engines.loading import load_backend
from fim.engines.model_specs import llama_cpp_available
from fim.engines.transformers_engine import backend_from_loaded
from fim.options import Mode
from fim.request import CompletionRequest
from fim.vllm.client import VllmEngine
from tests.support.engine_contract import CHECKS
from tests.support.vllm_peer import VllmPeer

WINDOW = 256
#: The empty middle does not parse here: every engine must write one, token after token (what
#: progress is reported for), and the random models do (they would stop at once elsewhere).
REQUEST = CompletionRequest("import os\n\n\ndef add(a, b):\n    total = a * 2\n    return total +",
                            "\n", mode=Mode.CONSTRAINED, max_tokens=12)

ENGINES = [
    "transformers",
    pytest.param("llama.cpp", marks=pytest.mark.skipif(
        not llama_cpp_available(),
        reason="llama-cpp-python is not installed (bash scripts/install_llama_cpp.sh)")),
    "vllm-peer-exact",
    "vllm-peer-estimate",
]


@pytest.fixture(params=ENGINES)
def fresh_engine(request, random_loaded, tmp_path) -> Iterator[Callable[[], CompletionEngine]]:
    """Makes an engine nothing was asked of yet (its cache empty)."""
    name = request.param
    peers: list[VllmPeer] = []

    def make() -> CompletionEngine:
        if name == "transformers":
            return Engine(backend_from_loaded(random_loaded), window=WINDOW)
        if name == "llama.cpp":
            return Engine(load_backend("random:santacoder", "llama.cpp", device="cpu",
                                       slots=1), window=WINDOW)
        exact = name == "vllm-peer-exact"
        folder = tmp_path / "random-santacoder"
        hf = backend_from_loaded(random_loaded).tokenizer.hf
        if exact:
            hf.save_pretrained(folder)
        peer = VllmPeer(tokenizer=hf if exact else None, model=str(folder), window=WINDOW,
                        middle="a + b").start()
        peers.append(peer)
        engine = VllmEngine.connect(peer.url)
        assert engine.features.exact_tokens is exact
        return engine

    yield make
    for peer in peers:
        peer.stop()


@pytest.mark.parametrize("check", CHECKS, ids=[c.__name__ for c in CHECKS])
def test_every_engine_keeps_the_contract(fresh_engine, check) -> None:
    check(fresh_engine(), REQUEST)
