"""python_language.FimLanguage: exactness against CPython's parser, scopes, windows, bad input."""

from __future__ import annotations

import random
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lexer.cpython import parses  # ast.parse, warnings silenced
from python_language import FimLanguage
from quotient import Constraint, ConstraintState, LanguageMode, Scope
from tests.python_language.grammar._harness import python312_verdicts

MODES = {"exact", "window", "prefix", "none"}

SHORT_FILES = [
    "import os\n\n\ndef f(a, b=1):\n    if a:\n        return os.path.join(a, 'x')\n"
    "    for i in range(b):\n        print(i, end='')\n    return None\n\n\nx = f(1)\n",
    "class A:\n    def m(self, x):\n        try:\n            y = {k: v for k, v in x}\n"
    "        except (KeyError, ValueError) as e:\n            raise RuntimeError from e\n"
    "        else:\n            return [y[k] ** 2 for k in y if k]\n\n"
    "    @property\n    def p(self):\n        return self._p\n",
    "def g(xs):\n    total = 0\n    while xs:\n        x = xs.pop()\n"
    "        total += x if x > 0 else -x\n    s = f'{total:>{10}}'\n    return s\n",
    "values = [\n    1,\n    2,\n]\nmapping = {'a': (1, 2), 'b': [3, 4]}\n"
    "with open('f') as fh, open('g') as gh:\n    data = fh.read() + gh.read()\n",
]

# Top-level blocks longer than the left window's inner-cut minimum, so that cursors deep in
# them are parsed from the block's last statement under a synthetic header. No top-level
# `try`: a middle that adds `except:` at column 0 is the synthetic header's documented
# approximation (the decoder's final `ast.parse` covers it).
LONG_FILES = [
    "import os\n\n\nclass Store:\n    \"\"\"Keeps values.\"\"\"\n\n"
    "    def __init__(self, root):\n        self.root = root\n        self.items = {}\n\n"
    "    def get(self, key, default=None):\n        if key in self.items:\n"
    "            return self.items[key]\n        return default\n\n"
    "    def put(self, key, value):\n        for k in list(self.items):\n"
    "            if k == key:\n                del self.items[k]\n"
    "        self.items[key] = value\n\n"
    "    def load(self, name):\n        try:\n"
    "            with open(os.path.join(self.root, name)) as fh:\n"
    "                return fh.read()\n        except OSError as err:\n"
    "            raise KeyError(name) from err\n\n"
    "    @property\n    def size(self):\n        return len(self.items)\n\n\n"
    "store = Store('/tmp')\nprint(store.size)\n",
    "import sys\n\nif sys.argv[1:]:\n    mode = sys.argv[1]\n"
    "    values = [int(a) for a in sys.argv[2:]]\n    total = 0\n    for v in values:\n"
    "        if v > 0:\n            total += v\n        else:\n            total -= v\n"
    "    print(mode, total)\n    while total > 10:\n        total //= 2\n"
    "    result = {'mode': mode, 'total': total}\n    print(result)\n"
    "    names = sorted(result)\n    print(names)\n    width = max(len(n) for n in names)\n"
    "    rows = [n.ljust(width) for n in names]\n    label = f'{mode}: {total:>{8}}'\n"
    "elif sys.stdin.isatty():\n    print('interactive')\nelse:\n    data = sys.stdin.read()\n"
    "    print(len(data))\n",
]
FILES = {"short": SHORT_FILES, "long": LONG_FILES}


def accepts(lang: FimLanguage, middle: str) -> bool:
    state = lang.initial().feed(middle)
    return state is not None and state.is_complete()


def cpython312_parses(text: str) -> bool:
    """CPython's verdict on `text` for the Python version the grammar targets (3.12).

    The running interpreter answers unless it is older and disagrees with 3.12 on a construct
    3.12 changed (a line break inside an f-string's replacement field, PEP 701): the local
    parser's verdict is checked with a 3.12 interpreter when one is installed.
    """
    local = parses(text)
    if sys.version_info >= (3, 12):
        return local
    verdicts = python312_verdicts([text])
    return local if verdicts is None else verdicts[text]


@pytest.mark.parametrize("kind", sorted(FILES))
@settings(max_examples=40, deadline=None)
@given(data=st.data(), a=st.integers(0, 10**6), length=st.integers(0, 60))
def test_true_middle_accepted_at_every_character(kind: str, data, a: int, length: int) -> None:
    src = data.draw(st.sampled_from(FILES[kind]))
    i = a % (len(src) + 1)
    j = min(len(src), i + length)
    left, middle, right = src[:i], src[i:j], src[j:]
    lang = FimLanguage.for_python(left, right)
    assert lang.mode == "exact"
    state = lang.initial()
    for k, ch in enumerate(middle):
        state = state.feed(ch)
        assert state is not None, f"rejected after {middle[:k + 1]!r}"
    assert state.is_complete()


ALPHABET = "ab1 ()[]{}:.,='\"\n#\\"


@pytest.mark.parametrize("kind", sorted(FILES))
@settings(max_examples=60, deadline=None)
@given(data=st.data(), a=st.integers(0, 10**6), length=st.integers(0, 40),
       edits=st.lists(st.tuples(st.integers(0, 100), st.sampled_from(ALPHABET)), max_size=3))
def test_is_complete_agrees_with_cpython(kind: str, data, a: int, length: int, edits) -> None:
    src = data.draw(st.sampled_from(FILES[kind]))
    i = a % (len(src) + 1)
    j = min(len(src), i + length)
    left, middle, right = src[:i], src[i:j], src[j:]
    for pos, ch in edits:
        pos = min(pos, len(middle))
        middle = middle[:pos] + ch + middle[pos + 1:]
    lang = FimLanguage.for_python(left, right)
    ours = accepts(lang, middle)
    if ours != parses(left + middle + right):
        assert ours == cpython312_parses(left + middle + right)


@pytest.mark.parametrize("src, anchor", [(LONG_FILES[0], "return len(self.items)"),
                                         (LONG_FILES[1], "label = ")], ids=["class", "if"])
def test_long_files_are_cut_inside_their_block(src: str, anchor: str) -> None:
    """The property tests above reach the inner cut: a cursor deep in a long file's block is
    parsed under a synthetic header, and the answers stay exact there."""
    cursor = src.index(anchor)
    line_end = src.index("\n", cursor) + 1
    left, right = src[:cursor], src[line_end:]
    lang = FimLanguage.for_python(left, right)
    assert lang.mode == "exact"
    assert lang.left_window.startswith(("class _:\n", "if 1:\n", "while 1:\n"))
    assert len(lang.left_window) < cursor - lang.left_start
    indent = left[left.rindex("\n") + 1:]
    for middle in [src[cursor:line_end], "pass\n", "", "x = (\n", f"print(1)\n{indent}pass\n"]:
        assert accepts(lang, middle) == parses(left + middle + right), middle
    assert accepts(lang, src[cursor:line_end])


def test_viability_rejects_dead_prefixes() -> None:
    lang = FimLanguage.for_python("x = foo(a, ", ")\n")
    st0 = lang.initial()
    assert st0.feed("b") is not None
    assert st0.feed("b)") is not None  # "b) + (c" can still close R's bracket
    assert st0.feed("b=2, def") is not None  # may still become a name like "default"
    assert st0.feed("b=2, def ") is None  # the keyword cannot be an argument
    assert st0.feed("]") is None


def test_states_are_persistent() -> None:
    lang = FimLanguage.for_python("def f(x):\n    return x", "\n")
    s0 = lang.initial()
    a = s0.feed(" + 1")
    b = s0.feed(" * (")
    assert a is not None and b is not None
    assert a.is_complete() and not b.is_complete()
    assert s0.feed(" + 1") is a  # memoised
    assert s0.is_complete()


def test_middle_may_end_inside_a_right_context_lexeme() -> None:
    lang = FimLanguage.for_python("result = comp", "ute(1)\n")
    assert lang.initial().is_complete()
    assert accepts(lang, "")
    assert not accepts(lang, " ")  # "comp ute(1)" is two names in a row
    lang = FimLanguage.for_python("s = 'abc", "def'\n")
    assert accepts(lang, "") and accepts(lang, " x ")
    assert not accepts(lang, "'")


def test_right_context_layout_follows_the_middle() -> None:
    left, right = "def f(x):\n    if x:\n        ", "\n    return 3\n"
    lang = FimLanguage.for_python(left, right)
    for middle in ["return 1", "return 1\n    else:\n        return 2", "pass\n"]:
        assert accepts(lang, middle) == parses(left + middle + right)
    assert not accepts(lang, "return 1\nelse:\n    return 2")


@pytest.mark.parametrize("scope, middle, ok", [
    ("line", "a + b", True),
    ("line", "a\nb = 1", False),
    ("statement", "a + (b\n + c)", True),
    ("statement", "a\nb = 1", False),
    ("block", "a\n    z = 2", True),
    ("block", "a\nz = 2", False),
    ("free", "a\nz = 2", True),
])
def test_scopes(scope: str, middle: str, ok: bool) -> None:
    lang = FimLanguage.for_python("def f():\n    y = ", "\n", scope=scope)
    assert accepts(lang, middle) == ok


def test_the_language_implements_the_constraint_protocol() -> None:
    lang = FimLanguage.for_python("x = ", "\n", scope=Scope.STATEMENT)
    assert isinstance(lang, Constraint) and isinstance(lang.initial(), ConstraintState)
    assert lang.mode is LanguageMode.EXACT and lang.mode == "exact" and lang.reason == ""
    assert lang.scope is Scope.STATEMENT
    assert FimLanguage.for_python("x = ", "\n", scope="statement").scope is Scope.STATEMENT
    broken = FimLanguage.for_python(*BAD["cursor in a broken statement"])
    assert broken.mode is LanguageMode.NONE and isinstance(broken.initial(), ConstraintState)


def test_unknown_scope_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="scope"):
        FimLanguage.for_python("", "", scope="paragraph")  # type: ignore[arg-type]


def padded(n: int) -> str:
    return "".join(f"def pad{k}(a):\n    return a + {k}\n\n\n" for k in range(n))


def test_windowing_gives_the_same_answers() -> None:
    core_left = "def target(x):\n    y = x"
    core_right = " * 2\n    return y\n\n\n"
    left, right = padded(40) + core_left, core_right + padded(40)
    windowed = FimLanguage.for_python(left, right)
    whole = FimLanguage.for_python(left, right, windowing=False)
    assert len(windowed.left_window) < 100 and len(windowed.right_window) < 100
    rng = random.Random(0)
    for _ in range(40):
        middle = "".join(rng.choice(" +*(1)x\n") for _ in range(rng.randint(0, 6)))
        assert accepts(windowed, middle) == accepts(whole, middle)


def test_broken_code_elsewhere_is_ignored() -> None:
    left = "def broken(:\n    pass\n\n\ndef g(x):\n    return x"
    right = " + 1\n\n\ndef h(:\n"
    lang = FimLanguage.for_python(left, right)
    assert lang.mode == "window"
    assert accepts(lang, " * 2") and not accepts(lang, " * (")


def test_cut_inside_a_large_class() -> None:
    methods = "".join(f"    def m{k}(self):\n        return {k}\n\n" for k in range(60))
    left = "class Big:\n" + methods + "    def target(self, x):\n        y = x"
    right = " * 2\n        return y\n\n" + methods + "\nprint(Big)\n"
    lang = FimLanguage.for_python(left, right)
    assert lang.mode == "exact"
    # The left window is the method; the right one runs to the end of the class, since a
    # middle may leave the method and the class (free scope) ...
    assert len(lang.left_window) < 200 and lang.right_window.endswith("return 59\n\n\n")
    for middle in [" + 1", " +", "\n    def other(self):\n        z = 1",
                   "\n\nprint(1)\nif x:\n    pass"]:
        assert accepts(lang, middle) == parses(left + middle + right)
    # ... but a middle held inside its block lets the right window stop at the next method.
    lang = FimLanguage.for_python(left, right, scope="block")
    assert len(lang.left_window) < 200 and len(lang.right_window) < 200
    for middle in [" + 1", " +", "\n        z = 1"]:
        assert accepts(lang, middle) == parses(left + middle + right)


BAD = {
    "nul byte": ("x = 1\x00\ny = ", "\nz = 3\n"),
    "lone surrogate": ("s = '\ud800'\nx = ", "\n"),
    "byte order mark": ("\ufeffimport os\nx = ", "\n"),
    "crlf": ("def f():\r\n    x = ", "\r\n    return x\r\n"),
    "lone cr": ("def f():\r    x = ", "\r    return x\r"),
    "form feed": ("\x0cdef f():\n\x0c    x = ", "\n    return x\n"),
    "mixed tabs and spaces": ("def f():\n\tif x:\n\t    y = ", "\n\treturn y\n"),
    "100000-character line": ("x = [" + "1, " * 33_000, "]\n"),
    "1000 nested brackets": ("x = " + "(" * 1000, ")" * 1000 + "\n"),
    "unterminated triple-quoted string": ('x = 1\ns = """abc\n', "def f():\n    pass\n" * 50),
    "cursor inside a string": ("s = 'abc", "def'\n"),
    "cursor inside a comment": ("x = 1  # comm", "ent\ny = 2\n"),
    "broken left context": ("def f(:\n    pass\n\ndef g():\n    return ", "\n"),
    "broken right context": ("def g():\n    return ", "\n\ndef h(:\n    pass\n"),
    "cursor in a broken statement": ("x = = ", "\n"),
    "empty file": ("", ""),
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name", list(BAD))
def test_bad_input_never_raises(name: str) -> None:
    left, right = BAD[name]
    lang = FimLanguage.for_python(left, right)
    assert lang.mode in MODES
    state = lang.initial()
    for text in ("1", "\n", ")", "'", "#"):
        nxt = state.feed(text)
        assert nxt is None or isinstance(nxt.is_complete(), bool)


def test_bad_input_modes() -> None:
    assert FimLanguage.for_python(*BAD["1000 nested brackets"]).mode == "none"
    assert FimLanguage.for_python(*BAD["100000-character line"]).mode == "none"
    lang = FimLanguage.for_python(*BAD["cursor in a broken statement"])
    assert lang.mode == "none" and lang.reason
    assert FimLanguage.for_python(*BAD["byte order mark"]).mode == "exact"
    lang = FimLanguage.for_python(*BAD["cursor inside a string"])
    assert lang.mode == "exact" and accepts(lang, "") and not accepts(lang, "\n")


def test_new_blocks_indent_by_the_files_width() -> None:
    lang = FimLanguage.for_python("def f(x):\n    if x:\n        y = 1\n    ", "\n    return 2\n")
    assert lang.indent_width == 4
    state = lang.initial()
    assert state.feed("if y:\n        z = 1\n    ") is not None
    assert state.feed("if y:\n      z = 1\n    ") is None  # a 2-space block in a 4-space file
    assert state.feed("if y:\n          z") is None


def test_irregular_files_are_not_held_to_a_width() -> None:
    lang = FimLanguage.for_python("def f(x):\n  if x:\n       y = 1\n  ", "\n  return 2\n")
    assert lang.indent_width is None
    assert accepts(lang, "if y:\n   z = 1")


def test_indentation_split_between_middle_and_right_context() -> None:
    # The middle ends one space into a line whose indentation R completes; that line then
    # dedents three levels, inside a class large enough to be cut.
    methods = "".join(f"    def m{k}(self):\n        return {k}\n\n" for k in range(20))
    left = "class A:\n" + methods + "    def f(self, x):\n        for a in x:\n            if a:\n"
    right = "       return a\n\n    def g(self):\n        return 2\n"
    lang = FimLanguage.for_python(left, right)
    for middle in ["                print(a)\n ", "                print(a)\n", "    pass\n "]:
        assert accepts(lang, middle) == parses(left + middle + right)
    assert accepts(lang, "                print(a)\n ")


def test_outside_text_is_parsed_once_per_content():
    from python_language import fallback

    body = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(400))
    left = body + "def g(y):\n    z = y"
    fallback.outside_parses.cache_clear()
    modes = []
    for tail in ("\n    return z\n", "\n    return -z\n"):  # two right contexts, two languages
        lang = FimLanguage.for_python(left, tail + body, scope="statement")
        assert lang.left_start > len(body) // 2  # a window: most of the file lies outside
        modes.append(lang.mode)
    info = fallback.outside_parses.cache_info()
    assert modes == ["exact", "exact"]
    assert info.hits >= 1 and info.misses <= 2


@pytest.mark.parametrize("left, middle, right, complete", [
    ("x = 'a' ", "b'c'", "\n", False),
    ("x = b'a' ", "'c'", "\n", False),
    ("x = b'a' ", "rb'c'", "\n", True),
    ("x = 'a' ", "f'c'", "\n", True),
])
def test_bytes_never_concatenate_with_text(left, middle, right, complete):
    lang = FimLanguage.for_python(left, right, scope="free")
    state = lang.initial().feed(middle)
    assert (state is not None and state.is_complete()) == complete
    assert parses(left + middle + right) == complete
