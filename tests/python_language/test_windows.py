"""python_language.windows and the right window's cut checks, tested directly.

The boundaries are the soundness argument of windowing: a clean top-level boundary splits a
valid module into two valid modules. The property tests build modules from statements of every
kind (compound statements with clauses, decorated definitions, continued lines, comments) and
check that exact claim at every boundary found, and that every statement start that is a clean
boundary is found.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lexer.cpython import parses
from lexer.tokenizer import Until
from python_language import python_grammar, python_tokenizer
from python_language.right_window import clean_cut
from python_language.windows import (
    InnerCut,
    inner_cut,
    left_boundaries,
    right_boundaries,
    right_inner_end,
)
from quotient import recognizer

# Top-level statements; the flag says whether the statement's first line is a clean boundary
# (every statement here is, unless the one before it leaves it attached: see `_attached`).
STATEMENTS = [
    "x = 1\n",
    "import os\n",
    "total += 2\n",
    "def f(a, b=1):\n    return a + b\n",
    "@decorator\ndef g():\n    pass\n",
    "@first\n@second(1)\nclass K(Base):\n    attr: int = 0\n",
    "if x:\n    pass\nelif y:\n    y = 2\nelse:\n    z = 3\n",
    "try:\n    pass\nexcept ValueError as err:\n    raise\nfinally:\n    done = 1\n",
    "for i in range(3):\n    print(i)\nelse:\n    print('none')\n",
    "while x:\n    x -= 1\n",
    "with open(p) as fh:\n    data = fh.read()\n",
    "value = compute(1,\n    2)\n",
    "longer = 1 + \\\n    2\n",
    "# a comment at column 0\n",
    "\n",
    "class C:\n    def m(self):\n        return 1\n",
    "async def h():\n    await g()\n",
    "assert x, 'message'\n",
]


def _module(indices: list[int]) -> tuple[str, list[int]]:
    """The module of the chosen statements and the offsets where clean boundaries start."""
    text = ""
    starts = []
    for k in indices:
        stmt = STATEMENTS[k]
        if stmt.strip() and not stmt.startswith("#"):
            starts.append(len(text))
        text += stmt
    return text, starts


modules = st.lists(st.integers(0, len(STATEMENTS) - 1), min_size=1, max_size=12).map(_module)


@settings(max_examples=150, deadline=None)
@given(modules)
def test_left_boundaries_split_a_module_into_two_valid_modules(module) -> None:
    text, starts = module
    assert parses(text)
    found = left_boundaries(text, limit=len(starts) + 1)
    # Nearest first, the file's start last, and exactly the clean statement starts.
    assert found[-1] == 0 and found[:-1] == sorted((s for s in starts if s > 0), reverse=True)
    for b in found:
        assert parses(text[:b]) and parses(text[b:]), b


@settings(max_examples=150, deadline=None)
@given(modules)
def test_right_boundaries_split_a_module_into_two_valid_modules(module) -> None:
    text, starts = module
    ambiguous: list[int] = []
    found = right_boundaries(text, limit=len(starts) + 1, ambiguous=ambiguous)
    assert found[-1] == len(text)
    first_line_end = text.find("\n")
    assert found[:-1] == sorted(found[:-1]) and all(b > first_line_end for b in found[:-1])
    assert set(found[:-1]) | set(ambiguous) == {s for s in starts if s > first_line_end}
    for b in found + ambiguous:
        assert parses(text[:b]) and parses(text[b:]), b
    for b in ambiguous:  # only definitions wait for a column-0 line before them
        assert text[b] == "@" or text.startswith(("def", "class", "async"), b)


def test_continuations_and_decorated_definitions_are_not_boundaries() -> None:
    text = "if x:\n    pass\nelse:\n    y = 1\n@dec\ndef f():\n    pass\nz = 1 + \\\n2\n"
    found = left_boundaries(text)
    assert text.index("else") not in found  # the clause continues the `if`
    assert text.index("def") not in found  # the decorator above belongs to it
    assert text.index("@dec") in found
    assert text.index("2\n") not in found  # continues the line before (and is no statement)


def test_a_definition_first_in_the_right_context_is_ambiguous() -> None:
    # The middle may itself be a decorator line ending at the cursor: `@dec` then decorates
    # R's `def`, so the line before it is not yet a clean boundary.
    right = " + 1\n@dec\ndef f():\n    pass\ny = 2\n"
    ambiguous: list[int] = []
    found = right_boundaries(right, ambiguous=ambiguous)
    assert found == [right.index("y = 2"), len(right)]
    assert ambiguous == [right.index("@dec")]


def test_a_cut_inside_a_string_is_rejected_by_the_lexer_check() -> None:
    """Found line by line, a boundary can lie inside a triple-quoted string; the right
    window's check (lexing R up to the cut) refuses it."""
    right = ' + 1\ns = """\nname = value\n"""\nz = 2\n'
    inside = right.index("name = value")
    assert inside in right_boundaries(right)
    tok = python_tokenizer()
    assert not clean_cut(tok, right, inside, right.index("z = 2"))
    assert clean_cut(tok, right, right.index("z = 2"), None)
    # R may also begin inside a string the middle opens: the statement after the cut must
    # then lex closed too.
    right = 'abc"""\nx = 1\ny = """\n'
    assert not clean_cut(tok, right, right.index("x = 1"), right.index("y = "))


def _cut(text: str, cursor_col: int | None = None) -> InnerCut | None:
    tok = python_tokenizer()
    return inner_cut(text, tok.lex(text, 0, len(text), until=Until.CERTAIN), tok, cursor_col)


BODY = "".join(f"    v{k} = {k}\n" for k in range(3))


def test_inner_cut_header_follows_the_block_kind() -> None:
    headers = {
        "if a:\n": "if 1:\n", "for i in r:\n": "while 1:\n", "while a:\n": "while 1:\n",
        "try:\n": "class _:\n", "with a:\n": "class _:\n", "def f():\n": "class _:\n",
        "class A:\n": "class _:\n",
    }
    for head, header in headers.items():
        text = head + BODY + "    y = "
        cut = _cut(text)
        assert cut == InnerCut(text.index("    y = "), header, 4), head
        # The kept text under the synthetic header is a viable prefix of Python.
        kept = cut.header + text[cut.offset:]
        lexed = python_tokenizer().lex(kept, 0, len(kept), until=Until.CERTAIN)
        assert recognizer(python_grammar()).scan_many(lexed.terminals) is not None


def test_inner_cut_keeps_a_decorator_with_its_definition() -> None:
    text = "class A:\n    x = 1\n    @dec\n    def f(self):\n        return "
    cut = _cut(text)
    assert cut is not None and text[cut.offset:].startswith("    @dec\n")


def test_inner_cut_refuses_match_blocks_and_cursors_outside_the_body() -> None:
    assert _cut("match a:\n    case 1:\n" + BODY.replace("    ", "        ") + "        y = ") \
        is None
    text = "class A:\n" + BODY
    assert _cut(text + "  ", cursor_col=2) is None  # the cursor's line left the body
    assert _cut(text, cursor_col=0) is None
    assert _cut(text + "    ", cursor_col=4) == InnerCut(text.index("    v2"), "class _:\n", 4)
    assert _cut("x = 1\ny = ") is None  # not inside a block at all


def test_right_inner_end_stops_where_the_body_ends_or_at_a_sibling() -> None:
    right = " 1\n    y = 2\n\n    def g(self):\n        pass\nz = 3\n"
    assert right_inner_end(right, 4, siblings=False) == right.index("z = 3")
    assert right_inner_end(right, 4, siblings=True) == right.index("    y = 2")
    # A sibling clause or a line indented with tabs is no place to cut.
    right = " 1\n    else:\n        pass\n"
    assert right_inner_end(right, 4, siblings=True) == len(right)
    assert right_inner_end(" 1\n\ty = 2\nz = 3\n", 4, siblings=False) == len(" 1\n\ty = 2\nz = 3\n")
