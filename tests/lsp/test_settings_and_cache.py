"""Settings validation, the auto policy, and the typing-through cache."""

from __future__ import annotations

from fim.editor_policy import CPU_CONTEXT_TOKENS, EMPTY_LINE, MID_LINE
from lsp_server.settings import (
    Settings,
    merge,
    policy_for,
    section_of,
)
from lsp_server.suggestions import SuggestionCache


def test_merge_keeps_old_value_on_bad_input() -> None:
    s, problems = merge(Settings(), {"maxTokens": 12, "topK": "many", "constrained": "yes",
                                     "languages": ["python", "cython"], "bogus": 1})
    assert s.max_tokens == 12
    assert s.top_k == Settings().top_k and s.constrained is True
    assert s.languages == ("python", "cython")
    assert len(problems) == 2  # unknown keys (a client's own settings) are not problems
    assert {p.key for p in problems} == {"constrained", "topK"}


def test_auto_values_and_section_extraction() -> None:
    s, problems = merge(Settings(max_tokens=5), {"maxTokens": "auto", "scope": "auto"})
    assert not problems and s.max_tokens is None and s.scope is None
    s, problems = merge(Settings(max_tokens=5, time_budget_ms=9),
                        {"maxTokens": 0, "timeBudgetMs": None, "model": "bundled"})
    assert not problems and s.max_tokens is None and s.time_budget_ms is None
    assert s.model.startswith("bundled:")
    assert section_of({"seam": {"model": "x"}}) == {"model": "x"}
    assert section_of({"model": "x"}) == {"model": "x"}
    assert section_of({"other": 1}) is None and section_of(None) is None


def test_policy_mid_line_vs_empty_line() -> None:
    s = Settings()
    mid = policy_for(s, "    x = foo(", ")")
    empty = policy_for(s, "    ", "")
    assert (mid.scope, mid.max_tokens, mid.time_budget_ms) == \
        (MID_LINE.scope, MID_LINE.max_tokens, MID_LINE.time_budget_ms)
    assert (empty.scope, empty.max_tokens, empty.time_budget_ms) == \
        (EMPTY_LINE.scope, EMPTY_LINE.max_tokens, EMPTY_LINE.time_budget_ms)
    assert mid.line_stop and not mid.early and empty.early and not empty.line_stop
    fixed = policy_for(Settings(scope="block", max_tokens=7, constrained=False), "x", "")
    assert (fixed.scope, fixed.max_tokens, fixed.mode) == ("block", 7, "unconstrained")


def test_context_tokens_auto_depends_on_the_device() -> None:
    s, problems = merge(Settings(), {"contextTokens": "auto"})
    assert not problems and s.context_tokens is None
    assert policy_for(s, "x", "").context_tokens == CPU_CONTEXT_TOKENS
    assert policy_for(s, "x", "", device_type="cuda").context_tokens is None  # whole window
    s, problems = merge(s, {"contextTokens": 300})
    assert policy_for(s, "x", "", device_type="cuda").context_tokens == 300
    s, problems = merge(s, {"contextTokens": -5})
    assert problems and s.context_tokens == 300  # a bad value keeps the previous one


def test_typing_through_returns_the_rest() -> None:
    cache = SuggestionCache()
    cache.put("u", "def f(", "):\n", "a, b")
    assert cache.lookup("u", "def f(", "):\n") == "a, b"
    assert cache.lookup("u", "def f(a", "):\n") == ", b"
    assert cache.lookup("u", "def f(a,", "):\n") == " b"
    assert cache.lookup("u", "def f(x", "):\n") is None      # typed something else
    assert cache.lookup("u", "def f(a", ")\n") is None       # right context changed
    assert cache.lookup("v", "def f(a", "):\n") is None      # other document
    assert cache.lookup("u", "def f(a, b", "):\n") is None   # fully typed: nothing left
    assert cache.lookup("u", "xdef f(a", "):\n") is None     # earlier text changed


def test_cache_is_bounded_and_forgets() -> None:
    cache = SuggestionCache(capacity=2)
    for i in range(3):
        cache.put("u", f"l{i}", "r", "mid")
    assert len(cache) == 2 and cache.lookup("u", "l0", "r") is None
    cache.forget("u")
    assert len(cache) == 0
