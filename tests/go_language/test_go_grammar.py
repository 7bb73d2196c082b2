"""go_language's grammar: it accepts the Go standard library and agrees with gofmt -e on
constructs and on mutated files."""

from __future__ import annotations

import random
import re

import pytest

from go_language.grammar import parses
from tests.go_language._gofmt import gofmt_accepts, needs_gofmt, needs_sources

#: Snippets (after `package p`) on which Seam and gofmt must agree: the composite-literal
#: restriction in headers, parameter lists, const groups, switch and select forms, generics.
AGREE = """\
func f() { if x == T{} {} }
func f() { if x == (T{}) {} }
func f() { if x == []int{} {} }
func f() { for _, x := range T{} {} }
func f() { for _, x := range []T{} {} }
func f() { switch T{} {} }
func f() { if f(T{}) {} }
func f() { if a[T{}] {} }
func f() { if x := T[int]{}; true {} }
func f() { if func() bool { return T{} == x }() {} }
func f() { x := (T){} }
func f() { x := a.b.c{} }
func f() { x := T[int]{} }
func f() { go (f()) }
func f() { go f() + 1 }
func f() { defer recover() }
func f() { switch x := 1 {} }
func f() { switch x := 1; {} }
func f() { switch ; {} }
func f() { switch x := y.(type) { case int, []T: default: } }
func f() { switch y.(type) { case *T: } }
func f() { if ; x {} }
func f() { if x; {} }
func f() { for a, b, c := range x {} }
func f() { for ;; {} }
func f() { for range x {} }
func f() { select { case a, b, c := <-x: } }
func f() { select { case a.b := <-x: } }
func f() { select { case x <- 1: case y = <-c: default: } }
func f(a int, string) {}
func f(a, b ...int) {}
func f(a ...int) {}
func f(int, ...string) {}
func (a, b T) f() {}
func (r T) f[P any]() {}
func f[T ~int | float64, S ~[]T](x S) {}
type T[P any] interface{ M[Q any]() }
type T interface { ~int | ~string; M(); io.Reader }
type T struct { a, b int "tag"; *C `x`; pkg.D; E[int] }
type A = B
const x
const (x; y)
const (x = 1; y)
const (x = 1; y int)
const (x, y = 1, 2; z, w)
var x
var (x int; y = 2)
func f() { L: }
func f() { switch { case 1: L: case 2: } }
func f() { x := 1; ; ; y := 2 }
;
func f() { type T[P any] int }
func f() { x := [...]int{1} }
func f() { f(a..., b) }
func f() { f(a, b...,) }
func f() { x := a[1:2:] }
func f() { x := a[:2:3] }
func f() { x := a[::3] }
func f() { x = y = z }
func f() { a, b++ }
func f() { x := map[string]int{"a": 1}; y := []T{{1}, {2}}; z := m[k]{} }
func f() { x := (*T).M; y := ([]int)(nil); z := interface{}(1); w := <-chan int(nil) }
func f() { x := func() int { return 1 }() }
func f() { x := 'ab' }
func f() { x := '\\'' + "\\'" }
func f() { fallthrough; goto L; break L; continue }
import "x"
import ("a/b"; c "d"; . "e"; _ "f")
import "a b"
import ":x"
import ""
import `raw/path`
func f() (a, b int, c string) { return }
func f() (a int, string) { return }
func f() { if x { } else if y { } else { } }
func f() { if x { } else y() }
func f() { var x chan<- chan int; var y <-chan <-chan int }
func f() { x.y(z)[1].w++ }
func f() { x := struct{ a int }{1} }
func f() { if x == struct{}{} {} }
""".split("\n")

#: Go code gofmt's parser takes although the spec does not (go/parser leaves these to the
#: type checker); Seam's grammar follows the spec here, which keeps it within gofmt's
#: language (a middle Seam calls complete still passes gofmt).
GOFMT_WIDER = [
    "func f() { x := ~1 }",
    "func f() { x.(type) }",
    "func f(a ...int, b int) {}",
    "func f() { for i := 0; i < n; j := 1 {} }",
    "func f() { var x [...]int }",
    "func f() { goto }",
    "type T struct { (a.B) }",
    "type A[P any] = B",
]


@needs_gofmt
@pytest.mark.parametrize("snippet", [s for s in AGREE if s])
def test_agrees_with_gofmt(snippet: str) -> None:
    text = f"package p\n{snippet}\n"
    assert parses(text) == gofmt_accepts(text)


@needs_gofmt
@pytest.mark.parametrize("snippet", GOFMT_WIDER)
def test_where_gofmt_is_wider_seam_rejects(snippet: str) -> None:
    text = f"package p\n{snippet}\n"
    assert gofmt_accepts(text) and not parses(text)


def test_the_standard_library_parses() -> None:
    files = needs_sources()
    rnd = random.Random(19)
    sample = [p for p in rnd.sample(files, 120) if p.stat().st_size < 40_000][:60]
    failed = [str(p) for p in sample if not parses(p.read_text("utf-8"))]
    assert not failed


_TOKEN = re.compile(r"[A-Za-z_]\w*|\d\w*|\"[^\"\n]*\"|`[^`]*`|'[^'\n]*'|\S")
_INSERTS = ["\n", "{", "}", "(", ")", ";", ",", "T{}", "`", '"', "/*", "'", ":", "..."]


def mutate(text: str, rnd: random.Random) -> str:
    """One random edit at a token: delete it, double it, replace it, or insert a fragment."""
    toks = list(_TOKEN.finditer(text))
    m = rnd.choice(toks)
    op = rnd.randrange(4)
    if op == 0:
        return text[:m.start()] + text[m.end():]
    if op == 1:
        return text[:m.start()] + m.group() + " " + text[m.start():]
    if op == 2:
        return text[:m.start()] + rnd.choice(toks).group() + text[m.end():]
    return text[:m.start()] + rnd.choice(_INSERTS) + text[m.start():]


@needs_gofmt
def test_mutated_files_as_gofmt_judges_them() -> None:
    files = [p for p in needs_sources() if p.stat().st_size < 12_000]
    rnd = random.Random(7)
    wrong = []
    for _ in range(120):
        text = mutate(rnd.choice(files).read_text("utf-8"), rnd)
        if parses(text) != gofmt_accepts(text):
            wrong.append(text)
    assert not wrong
