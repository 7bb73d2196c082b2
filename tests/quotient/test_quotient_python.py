"""The engine on a real grammar: lark's python.lark and standard-library terminal streams."""

import pytest

from benchmarks.py_terminals import (
    PYTHON_START,
    file_terminals,
    python_lark_text,
    stdlib_file,
)
from quotient import Grammar, Nfa, left_quotient, right_quotient, right_quotient_split
from quotient.earley import recognizer


@pytest.fixture(scope="module")
def py() -> Grammar:
    return Grammar.from_lark(python_lark_text(), PYTHON_START)


@pytest.fixture(scope="module")
def terms() -> list[str]:
    with open(stdlib_file("textwrap.py"), encoding="utf-8") as f:
        return file_terminals(f.read())


def _complete(g: Grammar, word: list[str]) -> bool:
    st = recognizer(g).scan_many(word)
    return st is not None and st.is_complete()


def test_loaded_python_grammar(py):
    assert {"DEF", "LPAR", "NAME", "_NEWLINE", "__ANON_0"} <= py.terminals
    assert {"_INDENT", "_DEDENT"} == py.declared
    assert "COMMENT" in py.ignored
    assert py.terminal_defs["DEF"].pattern == "def"
    assert py.pruned() is py  # lark already drops unused rules; all are productive


def test_whole_file_and_corruptions(py, terms):
    assert _complete(py, terms)
    i = terms.index("RPAR")
    assert not _complete(py, terms[:i] + terms[i + 1:])
    assert not _complete(py, terms[:-1] + ["COLON"])
    st = recognizer(py).scan_many(terms[:100])
    assert st is not None and st.scan("RPAR") is None  # textwrap.py has no ")" there
    assert recognizer(py).scan_many(["RPAR"]) is None


@pytest.mark.parametrize("cut", [10, 333, 900])
def test_right_and_left_quotients_of_real_file(py, terms, cut):
    prefix, suffix = terms[:cut], terms[cut:]
    rq_full = right_quotient(py, suffix)
    assert _complete(rq_full, prefix)
    assert not _complete(rq_full, prefix + ["LPAR"])  # unbalanced whatever the cut
    assert recognizer(rq_full).scan_many(prefix + ["RPAR", "RPAR", "RPAR"]) is None
    lq = left_quotient(py, prefix)
    assert _complete(lq, suffix)
    assert not _complete(lq, ["LPAR"] + suffix)


def test_split_on_real_suffix(py, terms):
    prefix, suffix = terms[:600], terms[600:]
    common = Nfa.from_symbols(suffix[:2:-1])
    rev = common.concat(Nfa.union(*(Nfa.from_symbols(suffix[k:3][::-1]) for k in range(3))))
    q, starts = right_quotient_split(py, rev)
    # Each final f: branch k skips the first k terminals of the suffix; prefix + those k
    # terminals must complete it.
    for k, f in enumerate(sorted(starts)):
        name = starts[f]
        assert name is not None
        g = q.with_rules([], start=name)
        assert _complete(g, prefix + suffix[:k])
        assert not _complete(g, prefix + suffix[: k + 1] + ["RPAR"])
