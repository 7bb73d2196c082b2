"""Two things the editor needs from the Python language beyond feed/is_complete:

* a cursor in a comment right after a broken statement still gets a constrained completion
  (the window resynchronises at the comment, mode ``window``), where it fell back to ``none``;
* ``check_region`` names a part of the file on which a middle's validity is decided exactly,
  so a 5 MB file is not re-parsed for every middle.
"""

from __future__ import annotations

import random
import sysconfig
from pathlib import Path

import pytest

from fim.decoding import parses
from python_language import FimLanguage
from quotient.constraint import LanguageMode

BROKEN = "import os\n\ndef broken(:\n"
AFTER = "more words\n\ndef ok():\n    return 1\n"


@pytest.mark.parametrize("comment", ["# a note: ", "# first line\n# second: ",
                                     "\n# after a blank line: "])
def test_a_comment_after_a_broken_statement_is_still_constrained(comment):
    lang = FimLanguage.for_python(BROKEN + comment, AFTER, scope="free")
    assert lang.mode is LanguageMode.WINDOW  # exact about the window, outside is broken
    state = lang.initial()
    assert state.feed(" and more").is_complete()  # the true middle continues the comment
    assert state.feed(" words\n# and another line\n# x") is not None
    closed = state.feed(" text\nx = (")  # leaves a bracket open before the right context
    assert closed is None or not closed.is_complete()


def test_clean_files_do_not_resynchronise_at_comments():
    """The fallback is a last resort: a file that parses keeps its exact window."""
    lang = FimLanguage.for_python("import os\n\ndef fine():\n    pass\n# note: ", AFTER,
                                  scope="free")
    assert lang.mode is LanguageMode.EXACT


def _cuts(text: str, rng: random.Random, n: int) -> list[int]:
    lines = [0]
    for i, ch in enumerate(text):
        if ch == "\n":
            lines.append(i + 1)
    return [rng.choice(lines) + rng.randrange(0, 20) for _ in range(n)]


@pytest.mark.parametrize("name", ["textwrap.py", "shlex.py", "fnmatch.py"])
def test_the_check_region_decides_exactly_as_the_whole_file(name):
    text = (Path(sysconfig.get_paths()["stdlib"]) / name).read_text(encoding="utf-8")
    rng = random.Random(name)
    middles = ["", "x", "(", ")", "\n", "\nreturn 1", "  # note", "pass\n", "'", "1 +",
               "\ndef g():\n    pass\n", "else:\n"]
    decided = 0
    for cut in _cuts(text, rng, 12):
        cut = min(cut, len(text))
        left, right = text[:cut], text[cut:]
        region = FimLanguage.for_python(left, right, scope="free").check_region()
        if region is None:
            continue
        a, b = region
        assert 0 <= a <= len(left) and 0 <= b <= len(right)
        for middle in middles:
            assert parses(left[a:] + middle + right[:b]) == parses(left + middle + right), \
                (name, cut, middle)
            decided += 1
        assert a > 0 or b < len(right)  # the region really is smaller than the file
    assert decided >= 60
