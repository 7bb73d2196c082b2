"""The Python tokenizer against CPython's, batch and incremental."""

from __future__ import annotations

import io
import keyword
import random
import sysconfig
import tokenize
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lexer.layout import Layout, line_start
from lexer.tokenizer import LexError, SymbolicLexed, Token, Until
from python_language.grammar import lex_python, python_tokenizer

SOFT = {"match", "case", "type", "_"}
NUMBERS = {"DEC_NUMBER", "HEX_NUMBER", "OCT_NUMBER", "BIN_NUMBER", "FLOAT_NUMBER", "IMAG_NUMBER"}
STRINGS = {"STRING", "LONG_STRING", "BYTES", "LONG_BYTES", "FSTRING"}


def ours(src: str) -> list[str]:
    by_name = {name: text for text, name in python_tokenizer().table.literals.items()}
    out = []
    for name in lex_python(src):
        if name in NUMBERS:
            out.append("NUM")
        elif name in STRINGS:
            out.append("STR")
        else:
            out.append(by_name.get(name, name))
    return out


def cpython(src: str) -> list[str]:
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type in (tokenize.NL, tokenize.COMMENT, tokenize.ENDMARKER):
            continue
        if tok.type == tokenize.NAME:
            word = tok.string
            out.append(word if keyword.iskeyword(word) or word in SOFT else "NAME")
        elif tok.type == tokenize.OP:
            out.append(tok.string)
        elif tok.type == tokenize.NUMBER:
            out.append("NUM")
        elif tok.type == tokenize.STRING:
            out.append("STR")
        else:
            out.append(tokenize.tok_name[tok.type])
    return out


def stdlib_sample(n: int, seed: int = 0) -> list[Path]:
    files = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
    return random.Random(seed).sample(files, min(n, len(files)))


@pytest.mark.parametrize("path", stdlib_sample(25), ids=lambda p: p.name)
def test_matches_cpython_tokenize_on_stdlib(path: Path) -> None:
    src = path.read_text(encoding="utf-8")
    assert ours(src) == cpython(src)


@pytest.mark.parametrize(
    "src, expected",
    [
        ("1if x else y\n", ["NUM", "if", "NAME", "else", "NAME", "NEWLINE"]),
        ("x = a.b\n", ["NAME", "=", "NAME", ".", "NAME", "NEWLINE"]),
        ("x = ...\n", ["NAME", "=", "...", "NEWLINE"]),
        ("x **= 2\n", ["NAME", "**=", "NUM", "NEWLINE"]),
        ("f(*a, **k)\n", ["NAME", "(", "*", "NAME", ",", "**", "NAME", ")", "NEWLINE"]),
        ("x = (1,\n     2)\n", ["NAME", "=", "(", "NUM", ",", "NUM", ")", "NEWLINE"]),
        ("x = 1 + \\\n    2\n", ["NAME", "=", "NUM", "+", "NUM", "NEWLINE"]),
        ("if x:\n    y\n", ["if", "NAME", ":", "NEWLINE", "INDENT", "NAME", "NEWLINE", "DEDENT"]),
        ("match = 1\n", ["match", "=", "NUM", "NEWLINE"]),
        ("x = 1_000.5e-3j\n", ["NAME", "=", "NUM", "NEWLINE"]),
        ("x = rb'a' Rb\"b\" f'{x!r:>{w}}'\n", ["NAME", "=", "STR", "STR", "STR", "NEWLINE"]),
        ("x = f'{f\"{y}\"}'\n", ["NAME", "=", "STR", "NEWLINE"]),
        ("x = f'{a['k']}'\n", ["NAME", "=", "STR", "NEWLINE"]),  # PEP 701: same quotes
        ("x = 1  # comment\n\n# only a comment\n", ["NAME", "=", "NUM", "NEWLINE"]),
        ("x = 1\r\ny = 2\r\n", ["NAME", "=", "NUM", "NEWLINE", "NAME", "=", "NUM", "NEWLINE"]),
        ("x = 1\ry = 2\r", ["NAME", "=", "NUM", "NEWLINE", "NAME", "=", "NUM", "NEWLINE"]),
        ("\x0cif x:\n\x0c    y\n", ["if", "NAME", ":", "NEWLINE", "INDENT", "NAME", "NEWLINE",
                                     "DEDENT"]),
        ("x = 1", ["NAME", "=", "NUM", "NEWLINE"]),
    ],
)
def test_token_streams(src: str, expected: list[str]) -> None:
    assert ours(src) == expected


@pytest.mark.parametrize(
    "src",
    [
        "0or 1\n",  # CPython commits to an octal literal
        "0x\n",
        "1abc\n",  # invalid decimal literal
        "x = 1\x00\n",
        "x = '\\uffe'\n",  # truncated escape
        "x = b'\u00e9'\n",  # non-ASCII bytes
        "if x:\n        y\n    z\n",  # unindent matches no level
        "if x:\n    y\n\tz\n",  # tabs and spaces mixed inconsistently
        "x = (1\n",  # end of file inside brackets
        "x = 'abc\n",  # unterminated string
        "x = 1 \\ y\n",  # character after line continuation
        "x = f'{}'\n",  # empty expression in an f-string
        ")\n",
    ],
)
def test_lexical_errors(src: str) -> None:
    with pytest.raises(LexError):
        lex_python(src)


def incremental(src: str, cuts: list[int]) -> list[str]:
    """Lex `src` in chunks the way the FIM recognizer does, committing only certain lexemes."""
    tok = python_tokenizer()
    layout, pending, out = Layout(), "", []
    prev = 0
    for cut in sorted(set(cuts)) + [len(src)]:
        pending += src[prev:cut]
        prev = cut
        lexed = tok.lex(pending, 0, len(pending), layout, Until.CERTAIN)
        out += lexed.terminals
        layout, pending = lexed.layout, pending[lexed.tail:]
    out += tok.lex(pending, 0, len(pending), layout, Until.EOF).terminals
    return out


SNIPPETS = [
    "def f(a, b=1, *c, **d):\n    return a if b else c  # note\n",
    "x = [1, 2.5e-3, 0x1f, 1_000j]\ns = 'a' \"b\" '''c\nd''' rb'e' f'{x!r:>{w}}'\n",
    "class A(B):\n    @dec\n    async def g(self):\n        await h()\n\n\nprint(A)\n",
    "if a:\n\tpass\nelif b:\n  x = (1,\n       2)\nelse:\n    y = a \\\n        + b\n",
    "x = 1if y else 2\nz = a<<=b>>c**d//e\nw = f(*a, **k)[::2]\n",
    "try:\n    pass\nexcept* E as e:\n    raise X from e\nfinally:\n    ...\n",
]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(SNIPPETS), st.lists(st.integers(0, 200), max_size=12))
def test_incremental_lexing_matches_batch(src: str, cuts: list[int]) -> None:
    cuts = [c for c in cuts if c <= len(src)]
    assert incremental(src, cuts) == lex_python(src)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(SNIPPETS), st.integers(0, 300))
def test_committed_tokens_are_a_prefix(src: str, cut: int) -> None:
    cut = min(cut, len(src))
    tok = python_tokenizer()
    lexed = tok.lex(src, 0, cut, Layout(), Until.CERTAIN)
    assert lex_python(src)[: len(lexed.terminals)] == lexed.terminals


@pytest.mark.parametrize(
    "src",
    [
        'f"{x:{y:{z}}}"\n',  # format specs nested two levels
        "f'''{x # comment\n}'''\n",  # comments inside a field
        'f"{f"{f"{1}"}"}"\n',  # the outer quote reused inside fields
        'f"{3!s  }" f"{3.14!s  :10.10}"\n',  # white space after a conversion
        'f"{1 + 1 =  :{1 + 1:1d}f}"\n',  # self-documenting with a spec
        'f"{1+2 = # c\n  }"\n',
    ],
)
def test_pep701_fstrings(src: str) -> None:
    assert lex_python(src)[0] == "FSTRING"


@pytest.mark.parametrize(
    "src",
    ['f"{}"\n', 'f"{x!z}"\n', 'f"{x!r=}"\n', 'f"{a b}"\n', 'f"{x:{y:{z:{w}}}}"\n', 'f"{x}}"\n'],
)
def test_invalid_fstrings(src: str) -> None:
    with pytest.raises(LexError):
        lex_python(src)


@pytest.mark.parametrize(
    "text, complete, grows",
    [
        ("if", True, True),  # may still become a name such as "iffy"
        ("1", True, True),  # 1.5, 1e3, 10
        ("=", True, True),  # ==
        ("==", True, False),
        (")", True, False),
        ("'abc'", True, False),
        ("'abc", False, True),
        ("1e", False, True),  # only a prefix of 1e5
        ("...", True, False),
    ],
)
def test_complete_versus_growing_lexemes(text: str, complete: bool, grows: bool) -> None:
    table = python_tokenizer().table
    assert table.is_complete_lexeme(text) == complete
    assert table.can_grow(text) == grows


def test_until_says_what_the_end_of_the_text_means() -> None:
    tok = python_tokenizer()
    src = "if x:\n    y = ab"
    certain = tok.lex(src, until=Until.CERTAIN)
    assert src[certain.tail:] == "ab"  # "ab" may still grow into "abc"
    assert certain.terminals == ["IF", "NAME", "COLON", "NEWLINE", "INDENT", "NAME", "EQUAL"]
    boundary = tok.lex(src, until=Until.BOUNDARY)  # "ab" ends here, the file goes on
    assert boundary.tail == len(src) and boundary.terminals[-1] == "NAME"
    assert boundary.layout.stack == ((0, 0), (4, 4)) and not boundary.layout.bol
    eof = tok.lex(src, until=Until.EOF)  # the last line ends and the block closes
    assert eof.terminals == boundary.terminals + ["NEWLINE", "DEDENT"]
    tokens = eof.tokens()
    assert [t.name for t in tokens] == eof.terminals
    assert all(src.startswith(src[t.start:t.start + 1], t.start) for t in tokens)
    assert tokens[5] == Token("NAME", src.index("y"))


def _render(sym: SymbolicLexed) -> list[str]:
    """The symbolic stream with each line's indentation rendered from an empty stack."""
    layout_terminals = python_tokenizer().layout_terminals
    stack = ((0, 0),)
    indents = {ind.index: ind.level for ind in sym.indents}
    out = []
    for k, name in enumerate(sym.terminals):
        if k in indents:
            change, stack = line_start(stack, indents[k])
            out += layout_terminals.for_change(change)
        out.append(name)
    return out + [layout_terminals.dedent] * (len(stack) - 1)


@pytest.mark.parametrize("src", SNIPPETS)
def test_symbolic_lexing_renders_to_the_same_stream(src: str) -> None:
    """Indentation left symbolic, then rendered against the stack lexing would have kept,
    gives exactly the stream of ordinary lexing; the symbolic stream has no INDENT/DEDENT."""
    sym = python_tokenizer().lex_symbolic(src)
    assert not {"INDENT", "DEDENT"} & set(sym.terminals)
    assert len(sym.indents) == sym.terminals.count("NEWLINE")  # one per logical line
    assert _render(sym) == lex_python(src)
