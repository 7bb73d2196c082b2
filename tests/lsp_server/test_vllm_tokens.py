"""The ``vllm`` engine's prompt in the model's own tokens: with the served model's tokenizer at
hand it is the in-process engine's prompt for that tokenizer (the same cut, the same project
context first, the same token healing), sent as ids; the healed characters the processor makes
the model re-type are taken off the answer; a tokenizer that is not the server's is not used.

The peer (``tests.support.vllm_peer``) tokenizes with the random model's tokenizer, saved to a
directory that is the served model's id, as ``seam team-server`` names the bundled model.
"""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from fim.api import CompletionRequest, Engine
from fim.engines.transformers_engine import backend_from_loaded, load_model
from fim.options import Mode, Scope, StopReason
from fim.templates import ContextFile, PromptOrder
from fim.vllm.client import VllmEngine
from fim.vllm.tokens import CACHE_BLOCK, EstimatedTokenizer, PrefixRecord
from tests.support.seam_lsp_client import lsp_session
from tests.support.tiny_tokenizers import bpe_tokenizer
from tests.support.vllm_peer import VllmPeer

WINDOW = 256
LINES = "".join(f"value_{k} = compute(value_{k - 1}, {k})\n" for k in range(1, 60))
CONTEXT = (ContextFile("pkg/util.py", "def compute(a, b):\n    return a * b + 1\n" * 6),
           ContextFile("pkg/names.py", "NAMES = ['alpha', 'beta', 'gamma']\n" * 4))


@pytest.fixture(scope="module")
def local():
    """The in-process engine over the random model, with the window the peer reports."""
    return Engine(backend_from_loaded(load_model("random:santacoder", device="cpu",
                                                 dtype="fp32")), window=WINDOW)


@pytest.fixture
def peer(local, tmp_path):
    folder = tmp_path / "random-santacoder"
    local.tokenizer.hf.save_pretrained(folder)
    running = VllmPeer(tokenizer=local.tokenizer.hf, model=str(folder), window=WINDOW,
                       middle="b").start()
    yield running
    running.stop()


def _requests() -> list[CompletionRequest]:
    c = Mode.CONSTRAINED
    return [
        CompletionRequest("def add(a, b):\n    return a", " + b\n", mode=c, max_tokens=16),
        # Both sides longer than the window: cut at line starts and ends, by real tokens.
        CompletionRequest(LINES + "total = value_", "\n" + LINES, mode=c, max_tokens=32),
        CompletionRequest(LINES + "x = ", "\n", mode=c, max_tokens=8, right_tokens=4),
        CompletionRequest(LINES + "y = val", LINES, mode=c, max_tokens=8,
                          left_start=len(LINES) // 2),
        CompletionRequest(LINES + "z = ", "\n" + LINES, mode=c, max_tokens=8,
                          order=PromptOrder.PSM_LINE, context_tokens=200),
        # The project context goes first and counts against the window.
        CompletionRequest(LINES[:400] + "w = comp", "\n", mode=c, max_tokens=8,
                          context_files=CONTEXT, context_budget=120, repo="demo",
                          path="pkg/main.py"),
    ]


def test_the_prompt_is_the_local_engines_prompt_for_the_same_tokenizer(local, peer):
    engine = VllmEngine.connect(peer.url)
    assert engine.exact_tokens and str(engine.info.tokens).startswith(peer.model)
    assert "tokens counted with" in engine.backend.description
    healed = 0
    for req in _requests():
        mine, theirs = engine.prompt_for(req), local.prompt_for(req)
        assert mine.text is None  # sent as ids
        assert (mine.ids, mine.left_chars_dropped, mine.right_chars_dropped, mine.healed,
                mine.project_tokens) == (theirs.ids, theirs.left_chars_dropped,
                                         theirs.right_chars_dropped, theirs.healed,
                                         theirs.project_tokens), req
        healed += bool(mine.healed)
    assert healed >= 4  # healing is on for constrained requests
    cut = [engine.prompt_for(r) for r in _requests()[1:3]]
    assert all(p.left_chars_dropped > 0 for p in cut) and cut[0].right_chars_dropped > 0
    assert engine.prompt_for(_requests()[-1]).project_tokens > 20


def test_an_unconstrained_request_is_not_healed(peer):
    # Only the server's processor makes the middle re-type healed characters.
    engine = VllmEngine.connect(peer.url)
    req = CompletionRequest("def add(a, b):\n    return a", " + b\n",
                            mode=Mode.UNCONSTRAINED, max_tokens=8)
    prompt = engine.prompt_for(req)
    assert prompt.healed == ""
    assert engine.prompt_for(CompletionRequest(req.left, req.right)).healed


def test_a_healed_request_sends_ids_and_the_heal_and_takes_the_heal_off_the_answer(peer):
    engine = VllmEngine.connect(peer.url)
    req = CompletionRequest("def add(a, b):\n    return a + ", "\n", mode=Mode.CONSTRAINED,
                            scope=Scope.STATEMENT, max_tokens=16)
    prompt = engine.prompt_for(req)
    assert prompt.healed and req.left.endswith(prompt.healed)
    res = engine.complete(req, prompt=prompt)
    sent = peer.log.completions[-1]
    assert sent["prompt"] == prompt.ids
    assert sent["vllm_xargs"]["seam_heal"] == prompt.healed
    assert sent["vllm_xargs"]["seam_left"] == req.left  # the constraint sees the whole left
    assert (res.middle, res.stop, res.healed) == ("b", StopReason.EOS, prompt.healed)
    assert res.prompt_tokens == len(prompt.ids)


def test_the_project_context_is_cached_once_a_prompt_with_it_ran(peer):
    engine = VllmEngine.connect(peer.url)
    first, later = (CompletionRequest(left, "\n", mode=Mode.CONSTRAINED, max_tokens=8,
                                      context_files=CONTEXT, context_budget=120, repo="demo",
                                      path="pkg/main.py")
                    for left in ("a = comp", "b = 2\nc = val"))
    p1, p2 = engine.prompt_for(first), engine.prompt_for(later)
    assert p1.project_tokens == p2.project_tokens > 2 * CACHE_BLOCK
    assert p1.ids[:p1.project_tokens] == p2.ids[:p2.project_tokens]
    assert engine.uncached(later, p2) == len(p2.ids)  # nothing ran yet
    assert engine.warm(first, prompt=p1)
    sent = peer.log.completions[-1]["prompt"]
    assert sent[:p1.project_tokens] == p1.ids[:p1.project_tokens]
    # The context (in whole cache blocks) is what the later request need not prefill.
    assert engine.uncached(later, p2) <= len(p2.ids) - (p2.project_tokens - CACHE_BLOCK)
    res = engine.complete(later, prompt=p2)
    assert res.project_tokens == p2.project_tokens
    assert engine.step_model.reused >= p2.project_tokens - CACHE_BLOCK


def test_a_tokenizer_that_is_not_the_servers_is_not_used(peer, tmp_path):
    other = tmp_path / "other"
    bpe_tokenizer(["<|endoftext|>", "<fim-prefix>", "<fim-middle>", "<fim-suffix>"],
                  "<|endoftext|>").save_pretrained(other)
    peer.model = "served-elsewhere"  # the model's id names no local directory
    engine = VllmEngine.connect(peer.url, tokenizer=str(other))
    assert not engine.exact_tokens and isinstance(engine.tokenizer, EstimatedTokenizer)
    assert "tokens estimated" in engine.backend.description
    prompt = engine.prompt_for(CompletionRequest("x = 1\ny = ", "\n"))
    assert prompt.text is not None and prompt.healed == ""


def test_the_estimate_round_trips_text_and_prefixes_count_in_whole_blocks():
    est = EstimatedTokenizer(["<fim-prefix>"])
    text = "naïve = '😀'\n\tx"
    assert est.decode(est.encode(text)) == text and est.decode([-1]) == "<fim-prefix>"
    assert len(est.encode("abcdefg")) == 3
    record = PrefixRecord(size=2)
    a = list(range(40))
    record.ran(a)
    assert record.cached(a + [99]) == 32 and record.cached([7] + a) == 0
    record.ran([1])
    record.ran([2])  # a is forgotten: only two prompts are remembered
    assert record.cached(a) == 0


@pytest.mark.asyncio
@pytest.mark.timeout(300)
async def test_serve_sends_the_project_context_to_vllm_once_it_is_cached(local, tmp_path):
    """Through ``seam serve``: the planner's project context goes to the server, first
    answered without it and warmed (as with the in-process engines), then carried."""
    from tests.support.seam_lsp_client import inline, open_doc, status

    folder = tmp_path / "served" / "random-santacoder"
    local.tokenizer.hf.save_pretrained(folder)
    peer = VllmPeer(tokenizer=local.tokenizer.hf, model=str(folder), window=1024).start()
    project = tmp_path / "project"
    project.mkdir()
    (project / "helpers.py").write_text('def scale(value, factor):\n    """Multiply."""\n'
                                        "    return value * factor\n")
    main = ("from helpers import scale\n\n\ndef compute(values):\n    total = 0\n"
            "    for v in values:\n        total = total + scale(v, 2)\n    return total\n")
    (project / "main.py").write_text(main)
    uri = (project / "main.py").as_uri()
    settings = {"seam": {"engine": "vllm", "vllmServer": peer.url, "maxTokens": 4,
                         "contextBudgetTokens": 256, "timeBudgetMs": 20000}}

    async def entry(line: int, character: int) -> dict:
        await inline(lc, uri, line, character)
        return [r for r in (await status(lc))["recent"] if r["source"] == "model"][-1]

    async def idle() -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 120
        while True:
            st = await status(lc)
            if not st["running"] and st.get("idle", True):
                return
            assert loop.time() < deadline, st
            await asyncio.sleep(0.05)

    try:
        async with lsp_session(project, settings) as lc:
            await _ready(lc)
            open_doc(lc, uri, main)
            first = await entry(6, 30)
            assert first["context_files"] == ["helpers.py"] and first["context_deferred"]
            # The context is warmed on the server when the worker is idle (a warm the
            # prefetch interrupts still finishes its one token there): a later request
            # carries it.
            for line, character in itertools.islice(itertools.cycle(((7, 16), (6, 30))), 20):
                await idle()
                second = await entry(line, character)
                if not second["context_deferred"]:
                    break
            assert second["context_files"] == ["helpers.py"]
            assert second["context_deferred"] is False and second["context_tokens"] > 0
            assert second["cached_tokens"] > 0
            sent = [b for b in peer.log.completions if "vllm_xargs" in b
                    and "seam_warm" not in b["vllm_xargs"]][-1]["prompt"]
            context = local.tokenizer.decode(sent[:second["context_tokens"]])
            assert "helpers.py" in context and "def scale" in context
    finally:
        peer.stop()


async def _ready(lc) -> None:
    from tests.support.seam_lsp_client import status

    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while (st := await status(lc))["state"] != "ready":
        assert loop.time() < deadline and st["state"] != "error", st
        await asyncio.sleep(0.1)


def test_a_warm_cancelled_once_sent_still_fills_the_cache(peer):
    """The service cancels a warm-up when other work comes; remotely the one-token request is
    left to finish (the editor stops waiting), so its prompt counts as cached."""
    engine = VllmEngine.connect(peer.url)
    req = CompletionRequest(LINES[:600] + "v = ", "\n", mode=Mode.CONSTRAINED, max_tokens=8)
    prompt = engine.prompt_for(req)
    assert engine.uncached(req, prompt) == len(prompt.ids) > 2 * CACHE_BLOCK
    sent = len(peer.log.completions)
    peer.delay_s = 0.5  # the answer comes after the client stopped waiting
    assert not engine.warm(req, cancel=lambda: len(peer.log.completions) > sent,
                           prompt=prompt)
    deadline = time.monotonic() + 60
    while engine.uncached(req, prompt) == len(prompt.ids):
        assert time.monotonic() < deadline, "the cancelled warm never finished"
        time.sleep(0.05)
    assert engine.uncached(req, prompt) < CACHE_BLOCK
