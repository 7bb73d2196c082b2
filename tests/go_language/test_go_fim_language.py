"""go_language.FimLanguage: true middles accepted, exactness and soundness against gofmt -e,
windows, scopes and fallbacks."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from go_language import FimLanguage
from go_language.grammar import parses
from quotient import Constraint, ConstraintState, LanguageMode, Scope
from tests.go_language._gofmt import gofmt_accepts, needs_gofmt, needs_sources

MODES = {"exact", "window", "prefix", "none"}

FILE = """package demo

import (
\t"fmt"
\t"strings"
)

// Pair holds two values.
type Pair[K comparable, V any] struct {
\tKey   K
\tValue V `json:"value"`
}

const (
\tA = iota
\tB
)

func (p *Pair[K, V]) String() string {
\treturn fmt.Sprintf("%v=%v", p.Key, p.Value)
}

func join(xs []string, sep rune) (out string, err error) {
\tfor i, x := range xs {
\t\tif i > 0 && x != "" {
\t\t\tout += string(sep)
\t\t}
\t\tswitch {
\t\tcase strings.HasPrefix(x, "#"):
\t\t\tcontinue
\t\tdefault:
\t\t\tout += x
\t\t}
\t}
\tm := map[string]int{"a": 1, 'b': 2}
\tif v, ok := m["a"]; ok {
\t\tout += fmt.Sprint(v, 0x1F, 1.5e3, `raw
text`)
\t}
\treturn
}
"""


def feed_all(lang: FimLanguage, middle: str, rnd: random.Random) -> ConstraintState | None:
    state: ConstraintState | None = lang.initial()
    pos = 0
    while state is not None and pos < len(middle):
        step = rnd.randrange(1, 7)
        state = state.feed(middle[pos:pos + step])
        pos += step
    return state


def spans(text: str, rnd: random.Random, n: int) -> list[tuple[int, int]]:
    """Random character spans and whole-line spans (the paper's RandSpan and Boundary)."""
    out = []
    for k in range(n):
        a = rnd.randrange(len(text))
        b = min(len(text), a + rnd.randrange(1, 100))
        if k % 2:
            a = text.rfind("\n", 0, a) + 1
            b = text.find("\n", b)
            b = len(text) if b < 0 else b + 1
        out.append((a, b))
    return out


def test_it_is_a_constraint() -> None:
    lang = FimLanguage.for_go("package p\nfunc f() {\n\tx := ", "\n}\n")
    assert isinstance(lang, Constraint) and isinstance(lang.initial(), ConstraintState)
    assert lang.mode == "exact" and lang.reason == ""
    state = lang.initial().feed("1 + f(2)")
    assert state is not None and state.is_complete()
    assert lang.initial().feed("1 +") is not None and not lang.initial().feed("1 +").is_complete()
    assert lang.initial().feed("1 )") is None
    with pytest.raises(ValueError, match="scope"):
        FimLanguage.for_go("", "", scope="everything")


def test_true_middles_of_a_small_file_are_accepted() -> None:
    rnd = random.Random(3)
    for a, b in spans(FILE, rnd, 60):
        lang = FimLanguage.for_go(FILE[:a], FILE[b:])
        state = feed_all(lang, FILE[a:b], rnd)
        assert state is not None and state.is_complete(), (FILE[:a][-30:], FILE[a:b])
        assert lang.mode == "exact"


def test_true_middles_of_the_standard_library_are_accepted() -> None:
    files = [p for p in needs_sources() if p.stat().st_size < 30_000]
    rnd = random.Random(11)
    for path in rnd.sample(files, 40):
        text = path.read_text("utf-8")
        for a, b in spans(text, rnd, 2):
            lang = FimLanguage.for_go(text[:a], text[b:])
            state = feed_all(lang, text[a:b], rnd)
            assert state is not None and state.is_complete(), (str(path), a, b, lang.reason)


def variants(middle: str, rnd: random.Random) -> list[str]:
    """The true middle and corruptions of it: cut short, a character dropped, a fragment added."""
    k = rnd.randrange(len(middle) + 1)
    out = [middle, middle[:k], middle[:k] + middle[k + 1:]]
    out.append(middle[:k] + rnd.choice(["}", "{", "(", ")", "\n", ";", ",", "x", "`", "\"", "/*",
                                        ":=", "if", "1."]) + middle[k:])
    return out


@needs_gofmt
def test_complete_exactly_when_gofmt_parses() -> None:
    """In mode exact, is_complete is gofmt's verdict on the whole file; a prefix the language
    rejects is not completed by the rest of the true middle either."""
    files = [p for p in needs_sources() if p.stat().st_size < 20_000]
    rnd = random.Random(5)
    checked = 0
    for path in rnd.sample(files, 25):
        text = path.read_text("utf-8")
        for a, b in spans(text, rnd, 2):
            left, right, true_middle = text[:a], text[b:], text[a:b]
            lang = FimLanguage.for_go(left, right)
            for middle in variants(true_middle, rnd):
                state = feed_all(lang, middle, rnd)
                verdict = gofmt_accepts(left + middle + right)
                if state is None:
                    assert not verdict, (str(path), middle)
                    continue
                if lang.mode in ("exact", "none"):
                    assert state.is_complete() == verdict, (str(path), middle)
                    checked += 1
    assert checked > 60


def test_small_window_brute_force() -> None:
    """Every middle of up to three fragments: `is_complete` is Seam's parse of the whole
    file, and every prefix of a complete middle is viable (no valid middle is cut off)."""
    left, right = "package p\n\nfunc f() {\n\tx := ", "\n\ty()\n}\n"
    parts = ["x", "1", " ", "\n", "(", ")", "{", "}", "+", ";", "\"", "`", "/", "*", ".", "]"]
    lang = FimLanguage.for_go(left, right)
    assert lang.mode == "exact"
    frontier: list[tuple[str, ConstraintState | None]] = [("", lang.initial())]
    for _ in range(3):
        nxt = []
        for middle, state in frontier:
            for part in parts:
                m = middle + part
                fed = state.feed(part) if state is not None else None
                whole = parses(left + m + right)
                if fed is None:
                    assert not whole, m
                else:
                    assert fed.is_complete() == whole, m
                nxt.append((m, fed))
        frontier = nxt


@needs_gofmt
def test_brute_force_agrees_with_gofmt_on_a_sample() -> None:
    left, right = "package p\n\nfunc f() {\n\tif ", " {\n\t\treturn\n\t}\n}\n"
    parts = ["x", "T", "{", "}", "(", ")", "==", "1", ";", ":=", " "]
    lang = FimLanguage.for_go(left, right)
    rnd = random.Random(2)
    for _ in range(150):
        middle = "".join(rnd.choice(parts) for _ in range(rnd.randrange(1, 6)))
        state = lang.initial().feed(middle)
        verdict = gofmt_accepts(left + middle + right)
        assert (state is not None and state.is_complete()) == verdict, middle


def test_scopes() -> None:
    left, right = "package p\n\nfunc f() {\n\tx := ", "\n\ty()\n}\n"

    def fed(scope: Scope, text: str) -> ConstraintState | None:
        return FimLanguage.for_go(left, right, scope).initial().feed(text)

    assert fed(Scope.LINE, "1\n") is None
    assert fed(Scope.LINE, "1 + 2") is not None
    assert fed(Scope.STATEMENT, "1\n\tz := 2") is None  # the newline inserts a `;`
    assert fed(Scope.STATEMENT, "func() {\n") is not None  # braces it opens may hold lines
    assert fed(Scope.BLOCK, "1\n\tz := 2\n\tw := 3") is not None
    assert fed(Scope.BLOCK, "1\n}\n\nfunc g() {") is None  # closes the cursor's block
    state = fed(Scope.FREE, "1\n}\n\nfunc g() {\n\tx := 2")
    assert state is not None and state.is_complete()


LONG = "package p\n\nfunc big() {\n" + "".join(
    f"\tv{k} := f({k}, \"s{k}\")\n\tif v{k} > 0 {{\n\t\tg(v{k})\n\t}}\n" for k in range(80)) \
    + "}\n\nfunc after() {}\n"


LONG_SWITCH = "package p\n\nfunc op(v int) int {\n\tx := 0\n\tswitch v {\n" + "".join(
    f"\tcase {k}:\n\t\tx = f({k})\n\t\tif x > {k} {{\n\t\t\treturn x\n\t\t}}\n"
    for k in range(90)) + "\tdefault:\n\t}\n\tswitch y := g().(type) {\n" + "".join(
    f"\tcase T{k}, []int:\n\t\tx += {k}\n" for k in range(90)) + "\t}\n\treturn x\n}\n"


#: Labels of nested loops: gofmt puts each one a level out (``\tinner:`` labels a loop two
#: levels in), so a label line is not a statement line of the body and no cut may fall there.
LONG_LABELS = "package p\n\nfunc scan(n, m int) {\n" + "".join(
    f"\tfor i := 0; i < n; i++ {{\n\tinner{k}:\n\t\tfor j := 0; j < m; j++ {{\n"
    f"\t\t\t// skip the first {k} columns\n\t\t\tif j < {k} {{\n\t\t\t\tcontinue inner{k}\n"
    f"\t\t\t}}\n\t\t\tg(i, j)\n\t\t}}\n\t}}\n" for k in range(30)) + "}\n\nfunc g(i, j int) {}\n"


@pytest.mark.parametrize("text", [LONG, LONG_SWITCH, LONG_LABELS])
def test_windows_inside_a_long_function_are_exact(text: str) -> None:
    rnd = random.Random(8)
    for a, b in spans(text, rnd, 20):
        left, right = text[:a], text[b:]
        lang = FimLanguage.for_go(left, right)
        whole = FimLanguage.for_go(left, right, windowing=False)
        if a > 2000:  # cut inside the body, near the cursor (in a switch: at its last clause)
            assert lang.left_top < lang.left_start and a - lang.left_start < 400
        for middle in variants(text[a:b], rnd) + ["\t}\n\tx++\n", "\tcase 1:\n"]:
            state = feed_all(lang, middle, rnd)
            ref = feed_all(whole, middle, random.Random(0))
            got = state is not None and state.is_complete()
            assert got == (ref is not None and ref.is_complete()) == parses(left + middle + right)
        assert lang.mode == "exact"


LONG_GROUPS = (
    "package p\n\nconst (\n\tA = iota\n"
    + "".join(f"\tC{k}\n" if k % 3 else f"\tC{k} = {k} // c\n" for k in range(150))
    + ")\n\nvar (\n"
    + "".join(f"\tv{k} = []int{{\n\t\t{k},\n\t}}\n\tw{k} int\n" for k in range(60))
    + ")\n\nvar table = map[string][]int{\n"
    + "".join(f"\t\"k{k}\": {{{k}, 2}},\n\t\"m{k}\": {{\n\t\t3,\n\t}},\n" for k in range(60))
    + "}\n\nfunc f() {}\n")


def test_windows_inside_long_groups_are_exact() -> None:
    rnd = random.Random(4)
    cut = 0
    for a, b in spans(LONG_GROUPS, rnd, 36):
        left, right = LONG_GROUPS[:a], LONG_GROUPS[b:]
        lang = FimLanguage.for_go(left, right)
        cut += lang.left_start > lang.left_top or lang.right_inner is not None
        for middle in variants(LONG_GROUPS[a:b], rnd) + ["\tX\n", "X = 1\n", ")\nvar (\n",
                                                         "}\nvar t = x{\n", "\"a\": {},\n"]:
            state = feed_all(lang, middle, rnd)
            got = state is not None and state.is_complete()
            assert got == parses(left + middle + right), (left[-30:], middle, right[:30])
        assert lang.mode == "exact"
    assert cut >= 5


@pytest.mark.parametrize("text", [LONG, LONG_GROUPS])
def test_held_windows_are_sound(text: str) -> None:
    """In scope "block", R's window is cut inside the cursor's declaration: a middle it
    calls complete makes the whole file parse, and the true middles of lines are accepted."""
    rnd = random.Random(6)
    held = 0
    for a, b in spans(text, rnd, 30):
        a = text.rfind("\n", 0, a) + 1
        b = text.find("\n", a) + 1  # one whole line inside a block, closing none of it
        if not text.startswith("\t", a) or text[a:b].strip()[:1] in ("}", ")"):
            continue
        left, right = text[:a], text[b:]
        lang = FimLanguage.for_go(left, right, Scope.BLOCK)
        held += lang.right_inner is not None
        state = feed_all(lang, text[a:b], rnd)
        assert state is not None and state.is_complete()
        for middle in variants(text[a:b], rnd) + [")\nvar (\n", "}\n\nfunc g() {\n"]:
            state = feed_all(lang, middle, rnd)
            if state is not None and state.is_complete():
                assert parses(left + middle + right), middle
        assert lang.mode == "exact"
    assert held > 0


def test_fallback_modes() -> None:
    assert FimLanguage.for_go("package p\nvar s = '\x00", "").mode == "none"
    # No middle can end before `+` and a newline then `}` (a line comment ends at R's first
    # line break, a raw string or general comment never closes).
    broken_right = FimLanguage.for_go("package p\n\nfunc f() {\n\tx := ", "\n\t1 +\n}\n")
    assert broken_right.mode == "prefix" and broken_right.reason
    assert broken_right.initial().feed("1") is not None
    outside = "package p\n\nfunc g() { ( }\n\nfunc f() {\n\tx := "
    windowed = FimLanguage.for_go(outside, "1\n}\n")
    assert windowed.mode == "window" and windowed.reason
    state = windowed.initial().feed("2 +")  # exact within the windows: `2 +1` there parses
    assert state is not None and state.is_complete() and not parses(outside + "2 +1\n}\n")
    assert windowed.initial().feed("2 )") is None
    none = FimLanguage.for_go("package p\nvar s = '\x00", "")
    assert none.initial().feed("anything )))").is_complete() is False
    assert FimLanguage.for_go("\ufeffpackage p\n\nvar x = ", "1\n").mode == "exact"
    # Deep nesting on either side: a clear fallback, not an engine overflow.
    for left, right in [("package p\nvar x = " + "(" * 3000, ")" * 3000 + "\n"),
                        ("package p\nfunc f() {\n\tx := ", ")" * 3000 + "\n}\n")]:
        lang = FimLanguage.for_go(left, right)
        assert lang.mode in ("none", "prefix") and lang.reason


@settings(max_examples=120, deadline=None)
@given(st.text(max_size=60), st.text(max_size=60), st.text(max_size=20),
       st.sampled_from(list(Scope)))
def test_never_raises(left: str, right: str, middle: str, scope: Scope) -> None:
    lang = FimLanguage.for_go(left, right, scope)
    assert lang.mode in MODES
    state = lang.initial().feed(middle)
    if state is not None:
        assert state.is_complete() in (True, False)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, len(FILE)), st.integers(0, 40), st.text("x1(){};\n\"` /*.", max_size=8))
def test_window_agrees_with_the_whole_file(a: int, n: int, middle: str) -> None:
    left, right = FILE[:a], FILE[min(len(FILE), a + n):]
    lang = FimLanguage.for_go(left, right)
    state = lang.initial().feed(middle)
    if lang.mode is LanguageMode.EXACT:
        assert (state is not None and state.is_complete()) == parses(left + middle + right)
