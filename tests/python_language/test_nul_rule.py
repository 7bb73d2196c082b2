"""A NUL is refused wherever CPython refuses it, which is everywhere in a source: inside a
string, a bytes literal, an f-string or a comment too (issue 28, finding 8).  The grammar took
a NUL inside a string, so a middle next to ``"\\x00"`` in the right window was "complete"
while CPython refused the file, and the user read "constrained middle does not parse ...
please report this case"."""

from __future__ import annotations

import pytest

from lexer.cpython import parses
from python_language import FimLanguage

CASES = [
    ("x = f(", ', "a\x00b")\n'),
    ("x = f(", ", b'\x00')\n"),
    ("x = f(", ', """\x00""")\n'),
    ("x = f(", ', f"{1}\x00")\n'),
    ("x = f(", ")  # note \x00\n"),
]


@pytest.mark.parametrize(("left", "right"), CASES)
def test_no_middle_is_complete_where_cpython_refuses_the_file(left: str, right: str) -> None:
    lang = FimLanguage.for_python(left, right, scope="statement")
    state = lang.initial()
    for middle in ("1", "a", "x, y", "2 + 3"):
        fed = state.feed(middle) if state is not None else None
        complete = fed is not None and fed.is_complete()
        assert complete == parses(left + middle + right) == False  # noqa: E712


@pytest.mark.parametrize("middle", ['"\x00"', "b'\x00'", '"""a\x00"""', 'f"\x00"', "1  # \x00"])
def test_a_middle_with_a_nul_is_refused(middle: str) -> None:
    state = FimLanguage.for_python("x = ", "\n", scope="statement").initial()
    fed = state.feed(middle)
    assert fed is None or not fed.is_complete()
    assert not parses("x = " + middle + "\n")
