"""The engine contract (``tests/support/engine_contract.py``) run against every engine the main
environment has: the in-process engine over each tiny step model (transformers and llama.cpp
over the same random model, as ``tests/fim/engines/test_step_model_contract.py`` builds them),
and the vLLM client against the local vLLM peer (``tests/support/vllm_peer.py``), counting
tokens with the served model's tokenizer and by the estimate.  The real vLLM server's turn is
in ``tests/team/test_vllm_server.py``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from pathlib import Path

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

ROOT = Path(__file__).resolve().parents[2]
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


#: Where engines are held outside ``lsp_server``'s service code (``model_host.py`` included):
#: each reads what an engine can do from its ``features`` and ``runtime``, never by probing.
HOLDERS = ("fim", "benchmarks", "lsp_server/model_host.py")
ENGINE_WORDS = ("engine", "step_model")


def probes(root: Path) -> list[str]:
    """``getattr``/``hasattr`` calls whose object is an engine or a part of one, and engine
    parameters typed ``Any``, under ``HOLDERS``."""
    found = []
    for holder in HOLDERS:
        top = root / holder
        for path in [top] if top.is_file() else sorted(top.rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            rel = path.relative_to(root).as_posix()
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                        and node.func.id in ("getattr", "hasattr") and node.args:
                    target = ast.unparse(node.args[0])
                    if any(w in target.lower() for w in ENGINE_WORDS):
                        found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
                if isinstance(node, ast.arg) and "engine" in node.arg.lower() \
                        and node.annotation is not None \
                        and ast.unparse(node.annotation) in ("Any", "typing.Any"):
                    found.append(f"{rel}:{node.lineno}: {node.arg}: Any")
                if isinstance(node, ast.AnnAssign) and "engine" in ast.unparse(
                        node.target).lower() and ast.unparse(node.annotation) == "Any":
                    found.append(f"{rel}:{node.lineno}: {ast.unparse(node.target)}: Any")
    return found


def test_no_engine_is_probed_with_getattr_or_typed_any() -> None:
    assert probes(ROOT) == []


def test_the_probe_finder_sees_a_probe(tmp_path: Path) -> None:
    (tmp_path / "fim").mkdir()
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "lsp_server").mkdir()
    (tmp_path / "fim" / "a.py").write_text(
        "def f(engine):\n    return getattr(engine.backend, 'threads', None)\n")
    (tmp_path / "benchmarks" / "b.py").write_text("def g(engine: Any):\n    pass\n")
    (tmp_path / "lsp_server" / "model_host.py").write_text(
        "engine: Any = None\nok = getattr(settings, 'x', None)\n")
    assert [p.split(":")[0] for p in probes(tmp_path)] == [
        "fim/a.py", "benchmarks/b.py", "lsp_server/model_host.py"]
