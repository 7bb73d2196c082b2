"""The outline of a Python document above a prompt's start (``scope_outline``): the lines that
open the scopes around the start and bind names in them, nearest first within a limit."""

from __future__ import annotations

from benchmarks.scope_outline import logical_lines, scope_outline

SOURCE = '''\
import os
from pathlib import Path

LIMIT = 10


def helper(x):
    return x + 1


class Store:
    """A store.

class NotReal:
    """

    kind = "disk"

    def __init__(self, root):
        self.root = Path(root)
        self.items = {}

    def summary(self):
        def line(key):
            return f"{key}"
        text = f"""
total = {len(self.items)}
"""
        for key in self.items:
            text += line(key)
        START
'''


def start_of(text: str, marker: str = "START") -> int:
    return text.index(marker) - len("        ")


def test_the_scopes_around_the_start_and_the_names_bound_in_them():
    text = SOURCE
    outline = scope_outline(text, start_of(text), limit=10_000)
    assert outline.split("\n") == [
        "import os",
        "from pathlib import Path",
        "LIMIT = 10",
        "def helper(x):",
        "class Store:",
        '    kind = "disk"',
        "    def __init__(self, root):",
        "    def summary(self):",
        "        def line(key):",
        '        text = f"""',
        "        for key in self.items:",
    ]


def test_a_strings_lines_are_not_code():
    """``class NotReal:`` and ``total = ...`` are inside strings."""
    outline = scope_outline(SOURCE, start_of(SOURCE), limit=10_000)
    assert "NotReal" not in outline and "total" not in outline


def test_the_limit_keeps_the_headers_and_the_nearest_binders():
    outline = scope_outline(SOURCE, start_of(SOURCE), limit=110)
    assert outline.split("\n") == [
        "class Store:", "    def summary(self):", "        def line(key):",
        '        text = f"""', "        for key in self.items:"]
    # A shorter line further up still fits where a longer nearer one did not.
    assert scope_outline(SOURCE, start_of(SOURCE), limit=120).startswith("import os\n")


def test_an_else_brings_its_if():
    text = ("def f(a):\n    b = 1\n    if a:\n        c = 2\n    else:\n        d = 3\n"
            "        e = 4\n")
    outline = scope_outline(text, text.index("        e = 4"))
    assert outline.split("\n") == ["def f(a):", "    b = 1", "    if a:", "    else:",
                                   "        d = 3"]


def test_nothing_above_the_start():
    assert scope_outline("x = 1\n", 0) == ""


def test_text_that_ends_inside_a_bracket_or_string_keeps_what_was_read():
    text = "import os\nvalues = [\n    1,\n"
    assert logical_lines(text) == [(0, 0), (1, 0)]
    # A start inside a bracket: the statement it lies in opens the outline's innermost scope.
    assert scope_outline(text + "    2]\n", len(text)) == "import os\nvalues = ["
    text = 'import os\nwords = """\nnot code = 1\n'
    assert scope_outline(text, len(text)) == 'import os\nwords = """'  # not its lines


def test_a_long_header_is_cut_to_the_limit():
    text = "def f(" + ", ".join(f"a{i}" for i in range(200)) + "):\n    x = 1\n"
    outline = scope_outline(text, text.index("    x = 1"), limit=50)
    assert outline.startswith("def f(a0, ") and len(outline) == 50


def test_a_name_bound_again_and_again_shows_once_at_its_nearest():
    text = ("def f(values):\n    total = 0\n"
            + "".join(f"    total = total + {i}\n" for i in range(20)) + "    return total\n")
    outline = scope_outline(text, text.index("    return total"), limit=10_000)
    assert outline.split("\n") == ["def f(values):", "    total = total + 19"]
