"""Project context in the prompt: the family's repository format, the budget, the order."""

from __future__ import annotations

from fim.api import CompletionRequest, Engine
from fim.engines.transformers_engine import HFTokenizer, backend_from_loaded
from fim.templates import TEMPLATES, ContextFile, build_prompt, project_context
from tests.support.tiny_tokenizers import bpe_tokenizer

QWEN_SPECIALS = ["<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
                 "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"]
FILES = (ContextFile("pkg/util.py", "def helper(x):\n    return x + 1\n"),
         ContextFile("pkg/consts.py", "LIMIT = 10\nNAME = 'seam'\n"))


def qwen() -> HFTokenizer:
    return HFTokenizer(bpe_tokenizer(QWEN_SPECIALS, eos="<|endoftext|>"))


def test_repository_format_in_order_with_the_current_file_last():
    tok = qwen()
    ids = project_context(tok, TEMPLATES["qwen2.5-coder"], FILES, 400, "demo", "pkg/main.py")
    text = tok.decode(ids)
    sep, repo = tok.token_id("<|file_sep|>"), tok.token_id("<|repo_name|>")
    assert ids[0] == repo and ids.count(sep) == 3
    assert text.index("pkg/util.py") < text.index("pkg/consts.py") < text.index("pkg/main.py")
    assert "def helper(x):" in text and "LIMIT = 10" in text
    assert tok.decode(ids[ids.index(sep, ids.index(sep, ids.index(sep) + 1) + 1) + 1:]) == \
        "pkg/main.py\n"


def test_the_budget_leaves_out_later_files_and_keeps_the_current_header():
    tok = qwen()
    full = project_context(tok, TEMPLATES["qwen2.5-coder"], FILES, 400, "demo", "pkg/main.py")
    small = project_context(tok, TEMPLATES["qwen2.5-coder"], FILES, len(full) - 5, "demo",
                            "pkg/main.py")
    assert len(small) <= len(full) - 5
    assert "pkg/consts.py" not in tok.decode(small) and tok.decode(small).endswith(
        "pkg/main.py\n")
    assert project_context(tok, TEMPLATES["qwen2.5-coder"], FILES, 0, "demo", "x.py") == []


def test_families_without_repository_tokens_get_plain_headers(random_loaded):
    tok = HFTokenizer(random_loaded.tokenizer)
    ids = project_context(tok, TEMPLATES["santacoder"], FILES, 400)
    text = tok.decode(ids)
    assert text.startswith("# pkg/util.py\ndef helper(x):") and "# pkg/consts.py\n" in text


def test_the_context_goes_first_and_counts_against_the_window(random_loaded):
    tok = HFTokenizer(random_loaded.tokenizer)
    ctx = project_context(tok, TEMPLATES["santacoder"], FILES, 400)
    left = "".join(f"v{i} = {i}\n" for i in range(300)) + "x = "
    plain = build_prompt(tok, TEMPLATES["santacoder"], left, "\n", window=300, reserve=20)
    with_ctx = build_prompt(tok, TEMPLATES["santacoder"], left, "\n", window=300, reserve=20,
                            context=ctx)
    assert with_ctx.ids[:len(ctx)] == ctx and with_ctx.project_tokens == len(ctx)
    assert len(with_ctx.ids) <= 300 - 20 and len(plain.ids) <= 300 - 20
    assert with_ctx.left_chars_dropped > plain.left_chars_dropped  # the file gave up room


def test_engine_requests_carry_the_context_and_share_its_cache(random_loaded):
    engine = Engine(backend_from_loaded(random_loaded))
    common = dict(mode="unconstrained", max_tokens=2, context_files=FILES,
                  context_budget=200, path="pkg/main.py")
    first = engine.prompt_for(CompletionRequest("import os\nx = ", "\n", **common))
    second = engine.prompt_for(CompletionRequest("import sys\ny = ", "\n", **common))
    n = first.project_tokens
    assert n > 0 and first.ids[:n] == second.ids[:n]
    engine.complete(CompletionRequest("import os\nx = ", "\n", **common))
    engine.complete(CompletionRequest("import sys\ny = ", "\n", **common))
    assert engine.step_model.reused >= n  # the context came from the cache the second time


def test_uncached_counts_what_a_prefill_would_run(random_loaded):
    engine = Engine(backend_from_loaded(random_loaded))
    common = dict(mode="unconstrained", max_tokens=2, context_files=FILES,
                  context_budget=200, path="pkg/main.py")
    req = CompletionRequest("import os\nx = ", "\n", **common)
    total = len(engine.prompt_for(req).ids)
    assert engine.uncached(req) == total  # nothing cached yet
    engine.warm(req)
    assert engine.uncached(req) == 0
    # Another cursor in the same file: only what follows the shared beginning would run.
    moved = CompletionRequest("import os\nx = 1\ny = ", "\n", **common)
    assert 0 < engine.uncached(moved) < len(engine.prompt_for(moved).ids)
    plain = CompletionRequest("import os\nx = ", "\n", mode="unconstrained", max_tokens=2)
    assert engine.uncached(plain) == len(engine.prompt_for(plain).ids)


def test_context_ids_are_remembered_by_content_and_tokenized_once():
    """``ContextIds`` (shared by the local engines and the vLLM client): the same files give
    the same ids without tokenizing again; other files or no budget are not served from it."""
    from fim.templates import ContextIds

    class Counting:
        def __init__(self, tok):
            self.tok, self.calls = tok, 0

        def __getattr__(self, name):
            return getattr(self.tok, name)

        def encode(self, text):
            self.calls += 1
            return self.tok.encode(text)

    tok, template = Counting(qwen()), TEMPLATES["qwen2.5-coder"]
    memory = ContextIds()
    first = memory.get(tok, template, FILES, 400, "demo", "pkg/main.py")
    calls = tok.calls
    assert calls > 0 and first == project_context(qwen(), template, FILES, 400, "demo",
                                                  "pkg/main.py")
    assert memory.get(tok, template, list(FILES), 400, "demo", "pkg/main.py") == first
    assert tok.calls == calls  # from memory
    assert memory.get(tok, template, FILES[:1], 400, "demo", "pkg/main.py") != first
    assert memory.get(tok, template, FILES, 0, "demo", "pkg/main.py") == []
    memory.clear()
    memory.get(tok, template, FILES, 400, "demo", "pkg/main.py")
    assert tok.calls > calls + 1
