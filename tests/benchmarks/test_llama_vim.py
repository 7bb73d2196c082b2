"""The llama.vim client of the benchmarks (``benchmarks.llama_vim``): the request it shapes,
its ring of extra context and what it shows of an answer, checked against llama.vim's rules
without a server."""

from __future__ import annotations

import random

import pytest

from benchmarks.llama_vim import (
    ChunkRing,
    LlamaVimClient,
    LlamaVimSettings,
    around,
    chunk_similarity,
    local_context,
    render,
    request_body,
    skipped,
)

DEFAULT = LlamaVimSettings()


def _doc(lines: list[str], row: int, col: int) -> tuple[str, int]:
    text = "\n".join(lines)
    return text, sum(len(x) + 1 for x in lines[:row]) + col


# ----- the request ------------------------------------------------------------------------------

def test_mid_line_cursor_sends_the_line_before_it_as_prompt_and_the_rest_in_the_suffix() -> None:
    text, offset = _doc(["a = 1", "def f(x):", "    return g(x, y)", "b = 2"], 2, 13)
    ctx = local_context(text, offset, DEFAULT)
    assert ctx.prefix == "a = 1\ndef f(x):\n"
    assert ctx.middle == "    return g("
    assert ctx.suffix == "x, y)\nb = 2\n"
    assert ctx.indent == 4


def test_whitespace_only_line_is_left_out_and_its_indentation_is_zero() -> None:
    text, offset = _doc(["def f(x):", "    ", "    return x"], 1, 4)
    ctx = local_context(text, offset, DEFAULT)
    assert (ctx.middle, ctx.line_suffix, ctx.indent) == ("", "", 0)
    assert ctx.suffix == "\n    return x\n"


def test_window_is_n_prefix_lines_above_and_n_suffix_below() -> None:
    lines = [f"x{i} = {i}" for i in range(10)]
    text, offset = _doc(lines, 5, 2)
    ctx = local_context(text, offset, LlamaVimSettings(n_prefix=2, n_suffix=3))
    assert ctx.prefix == "x3 = 3\nx4 = 4\n"
    assert ctx.suffix == " = 5\nx6 = 6\nx7 = 7\nx8 = 8\n"


def test_first_line_prefix_is_a_lone_line_end() -> None:
    ctx = local_context("print(1)", 6, DEFAULT)
    assert (ctx.prefix, ctx.middle, ctx.suffix) == ("\n", "print(", "1)\n\n")


def test_offset_outside_the_text_is_a_clear_error() -> None:
    with pytest.raises(ValueError):
        local_context("abc", 4, DEFAULT)


def test_automatic_completion_skips_more_than_eight_characters_after_the_cursor() -> None:
    short = local_context("f(a, bcdefgh)", 2, DEFAULT)  # 11 characters after the cursor
    ok = local_context("f(abc, x)", 2, DEFAULT)  # 7 after it
    assert skipped(short, DEFAULT)
    assert not skipped(ok, DEFAULT)
    assert not skipped(short, LlamaVimSettings(auto=False))


def test_request_body_is_llama_vims() -> None:
    ctx = local_context("def f():\n    ret", 16, DEFAULT)
    extra = [{"text": "x = 1\n", "time": [1, 2], "filename": "a.py"}]
    body = request_body(ctx, extra, DEFAULT, seed=7)
    assert body["prompt"] == "    ret"
    assert body["input_extra"] == extra
    assert body["n_predict"] == 128 and body["n_indent"] == 4
    assert (body["top_k"], body["top_p"]) == (40, 0.90)
    assert body["samplers"] == ["top_k", "top_p", "infill"]
    assert body["cache_prompt"] is True and body["stream"] is False
    # the first request at a place: 250 ms of generation (the setting's 1000 ms is for the
    # speculative follow-up)
    assert (body["t_max_prompt_ms"], body["t_max_predict_ms"]) == (500, 250)
    assert body["seed"] == 7
    lifted = request_body(ctx, [], LlamaVimSettings(time_limits=False))
    assert (lifted["t_max_prompt_ms"], lifted["t_max_predict_ms"]) == (0, 0)
    assert "seed" not in lifted


# ----- the ring ---------------------------------------------------------------------------------

def test_chunk_similarity_counts_shared_words() -> None:
    assert chunk_similarity(["a b c"], ["a b c"]) == 1.0
    assert chunk_similarity(["a b"], ["c d"]) == 0.0
    assert chunk_similarity(["a b"], ["a c"]) == pytest.approx(0.5)


def test_around_takes_half_a_chunk_on_each_side() -> None:
    lines = [str(i) for i in range(100)]
    got = around(lines, 50, DEFAULT)
    assert got[0] == "18" and got[-1] == "82"  # lines 50 - 32 .. 50 + 32
    assert around(lines, 0, DEFAULT)[-1] == "32"


def _ring(**kw) -> ChunkRing:
    return ChunkRing(LlamaVimSettings(**kw), random.Random(0), clock=lambda: 12.5)


def test_short_text_is_one_chunk_long_text_a_half_size_window() -> None:
    ring = _ring()
    ring.pick([f"line {i} w{i}" for i in range(10)], "a.py")
    assert len(ring.queued) == 1 and len(ring.queued[0].lines) == 10
    ring.pick([f"other {i} v{i}" for i in range(200)], "b.py")
    assert len(ring.queued[1].lines) == 33
    assert ring.queued[0].extra() == {"text": "\n".join(ring.queued[0].lines) + "\n",
                                      "time": [12, 500000], "filename": "a.py"}


def test_tiny_duplicate_and_similar_chunks() -> None:
    ring = _ring()
    ring.pick(["a", "b"], "a.py")
    assert not ring.queued  # fewer than three lines
    chunk = [f"alpha{i} beta{i}" for i in range(5)]
    ring.pick(chunk, "a.py")
    ring.pick(chunk, "a.py")
    assert len(ring.queued) == 1
    ring.pick([*chunk, "alpha0"], "b.py")  # > 0.9 similar: replaces the queued one
    assert [c.filename for c in ring.queued] == ["b.py"] and ring.evicted == 1
    ring.pick([*chunk, "beta0"], "c.py", do_evict=False)  # similar, no eviction: not added
    assert [c.filename for c in ring.queued] == ["b.py"]


def test_queue_moves_into_a_bounded_ring_oldest_out() -> None:
    ring = _ring(ring_n_chunks=2)
    for n in range(3):
        ring.pick([f"f{n}_{i} g{n}_{i}" for i in range(4)], f"{n}.py")
    assert ring.update() and not ring.chunks[1:]
    ring.settle()
    assert not ring.queued
    assert [c.filename for c in ring.chunks] == ["1.py", "2.py"]
    assert [e["filename"] for e in ring.extra()] == ["1.py", "2.py"]


def test_chunks_like_the_text_around_the_cursor_are_dropped_before_a_request() -> None:
    ring = _ring()
    near = [f"value_{i} = compute({i})" for i in range(5)]
    ring.pick(near, "here.py")
    ring.pick([f"other{i} thing{i}" for i in range(5)], "there.py")
    ring.settle()
    ring.evict_near(near)
    assert [c.filename for c in ring.chunks] == ["there.py"]


# ----- what is shown ----------------------------------------------------------------------------

def test_shown_is_the_content_without_trailing_empty_lines() -> None:
    text, offset = _doc(["def f(x):", "    return ", "y = 1"], 1, 11)
    assert render("x + 1\n\n", text, offset).text == "x + 1"
    assert render("x\n    z = 2\n", text, offset).text == "x\n    z = 2"


def test_empty_or_whitespace_content_shows_nothing() -> None:
    text, offset = _doc(["def f(x):", "    return ", "y = 1"], 1, 11)
    assert render("", text, offset).text is None
    assert render("\n\n", text, offset).text is None
    assert render("   ", text, offset).reason == "whitespace"


def test_repeating_the_rest_of_the_line_shows_nothing() -> None:
    text, offset = _doc(["f(a, b)", "z = 1"], 0, 2)
    assert render("a, b)", text, offset).reason == "repeats the suffix"
    assert render("a, c)", text, offset).text == "a, c)"


def test_repeating_the_next_non_blank_line_shows_nothing() -> None:
    text, offset = _doc(["    x = ", "", "    x = 1", "    y = 2", "    z = 3"], 0, 8)
    assert render("1", text, offset).reason == "repeats the next line"
    assert render("1\n    y = 2", text, offset).reason == "repeats the next line"
    assert render("1\n    y = 2\n    z = 3", text, offset).reason == "repeats the next lines"
    assert render("1\n    w = 2", text, offset).text == "1\n    w = 2"
    assert render("2", text, offset).text == "2"


def test_an_empty_first_line_then_the_next_lines_shows_nothing() -> None:
    text, offset = _doc(["a = 1", "b = 2", "c = 3"], 0, 5)
    assert render("\nb = 2", text, offset).reason == "repeats the next lines"
    assert render("\nb = 3", text, offset).text == "\nb = 3"


def test_on_a_whitespace_line_the_models_indentation_becomes_the_lines() -> None:
    text, offset = _doc(["def f(x):", "    ", "    return x"], 1, 4)
    assert render("    y = x", text, offset).text == "y = x"
    assert render("        y = x", text, offset).text == "    y = x"
    assert render("    return x", text, offset).reason == "repeats the next line"


# ----- the client ---------------------------------------------------------------------------------

class _Recorder:
    """Stands in for llama-server's HTTP endpoint: keeps the bodies, answers ``content``."""

    def __init__(self, content: str) -> None:
        self.content = content
        self.bodies: list[dict] = []

    def __call__(self, url: str, body: dict) -> dict:
        self.bodies.append(body)
        return {"content": self.content, "timings/prompt_n": 10, "timings/predicted_n": 3,
                "tokens_cached": 0, "truncated": False}


def test_client_sends_the_visited_buffers_chunks_and_shows_the_rendered_answer() -> None:
    post = _Recorder("x + 1\n")
    client = LlamaVimClient("http://x", seed=1, post=post)
    other = "\n".join(f"def helper_{i}(a):\n    return a * {i}" for i in range(4))
    client.visit("pkg/other.py", other)
    client.rest()
    text, offset = _doc(["def f(x):", "    return ", "y = 1"], 1, 11)
    answer = client.complete("pkg/f.py", text, offset)
    assert answer.requested and answer.shown == "x + 1"
    assert answer.prompt_tokens == 10 and answer.predicted_tokens == 3
    (body,) = post.bodies
    assert [e["filename"] for e in body["input_extra"]] == ["pkg/other.py"]
    assert body["input_extra"][0]["text"] == other + "\n"
    assert body["prompt"] == "    return "


def test_client_does_not_ask_where_automatic_completion_would_not() -> None:
    post = _Recorder("1")
    client = LlamaVimClient("http://x", post=post)
    answer = client.complete("f.py", "g(a, bcdefghij)\n", 2)
    assert not answer.requested and answer.shown is None and not post.bodies
    manual = LlamaVimClient("http://x", LlamaVimSettings(auto=False), post=post)
    assert manual.complete("f.py", "g(a, bcdefghij)\n", 2).requested
