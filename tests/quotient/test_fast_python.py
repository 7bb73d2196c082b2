"""The fast recognizer against the reference on lark's Python grammar and the terminal
streams of real standard-library files: whole files, and files with one corrupted terminal
(both must reject at the same position with the same allowed terminals before it)."""

from __future__ import annotations

import functools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.py_terminals import PYTHON_START, file_terminals, python_lark_text, stdlib_file
from quotient import Grammar, earley, fast, right_quotient

FILES = ["keyword.py", "bisect.py", "colorsys.py", "fnmatch.py", "textwrap.py"]


@functools.lru_cache(maxsize=1)
def python_grammar() -> Grammar:
    return Grammar.from_lark(python_lark_text(), PYTHON_START)


@functools.cache
def terminals_of(name: str) -> tuple[str, ...]:
    with open(stdlib_file(name), encoding="utf-8") as f:
        return tuple(file_terminals(f.read()))


def run_both(g: Grammar, word: list[str]) -> int:
    """Scan `word` with both recognizers, comparing at every position; returns the number
    of terminals accepted."""
    ref = earley.recognizer(g)
    got = fast.recognizer(g)
    for i, term in enumerate(word):
        assert got.allowed_terminals() == ref.allowed_terminals(), i
        assert got.is_complete() == ref.is_complete(), i
        ref = ref.scan(term)
        got = got.scan(term)
        assert (got is None) == (ref is None), i
        if ref is None:
            return i
    assert got.is_complete() == ref.is_complete()
    assert got.allowed_terminals() == ref.allowed_terminals()
    return len(word)


@pytest.mark.parametrize("name", FILES)
def test_whole_files_accepted(name: str) -> None:
    g = python_grammar()
    word = list(terminals_of(name))
    state = fast.recognizer(g).scan_many(word)
    assert state is not None and state.is_complete()
    # And with no charts shared with the run above, scan by scan.
    state = fast.recognizer(g)
    for term in word:
        state = state.scan(term)
        assert state is not None
    assert state.is_complete()


def test_whole_file_agrees_at_every_position() -> None:
    g = python_grammar()
    word = list(terminals_of("bisect.py"))
    assert run_both(g, word) == len(word)


def test_truncated_file_is_a_prefix_but_not_complete() -> None:
    g = python_grammar()
    word = list(terminals_of("colorsys.py"))
    cut = fast.recognizer(g).scan_many(word[: len(word) // 2])
    assert cut is not None
    full = fast.recognizer(g).scan_many(word)
    assert full is not None and full.is_complete()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_corrupted_streams_rejected_where_the_reference_rejects(data: st.DataObject) -> None:
    g = python_grammar()
    word = list(terminals_of(data.draw(st.sampled_from(FILES[:4]))))
    pos = data.draw(st.integers(0, len(word) - 1))
    edit = data.draw(st.sampled_from(["replace", "delete", "insert", "swap"]))
    sym = data.draw(st.sampled_from(sorted(g.terminals)))
    if edit == "replace":
        word[pos] = sym
    elif edit == "delete":
        del word[pos]
    elif edit == "insert":
        word.insert(pos, sym)
    elif pos + 1 < len(word):
        word[pos], word[pos + 1] = word[pos + 1], word[pos]
    # Positions before the edit were compared by the whole-file test; start near it.
    start = max(0, pos - 20)
    ref = earley.recognizer(g).scan_many(word[:start])
    got = fast.recognizer(g).scan_many(word[:start])
    assert ref is not None and got is not None
    for i in range(start, len(word)):
        assert got.allowed_terminals() == ref.allowed_terminals(), i
        assert got.is_complete() == ref.is_complete(), i
        ref = ref.scan(word[i])
        got = got.scan(word[i])
        assert (got is None) == (ref is None), i
        if ref is None:
            break
    else:
        assert got.is_complete() == ref.is_complete()


def test_many_branches_from_one_state() -> None:
    """Every terminal of the grammar scanned from one mid-file state: the accepted ones are
    exactly allowed_terminals(), and the state itself is unchanged."""
    g = python_grammar()
    word = list(terminals_of("textwrap.py"))
    state = fast.recognizer(g).scan_many(word[:300])
    ref = earley.recognizer(g).scan_many(word[:300])
    allowed = state.allowed_terminals()
    assert allowed == ref.allowed_terminals()
    accepted = {t for t in sorted(g.terminals) if state.scan(t) is not None}
    assert accepted == allowed
    assert state.allowed_terminals() == allowed
    rest = state.scan_many(word[300:])
    assert rest is not None and rest.is_complete()


def test_right_quotient_of_python_by_a_file_suffix() -> None:
    """The right quotient by a file's last 200 terminals accepts exactly the rest of the file
    as a complete sentence, and both recognizers agree along the way."""
    g = python_grammar()
    word = list(terminals_of("bisect.py"))
    q = right_quotient(g, word[-200:])
    assert q.base is not None  # an extension: the base tables are reused
    assert run_both(q, word[:-200]) == len(word) - 200
    state = fast.recognizer(q).scan_many(word[:-200])
    assert state is not None and state.is_complete()
