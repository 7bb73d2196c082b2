"""Differential test: on token-level mutations of real code, the grammar agrees with CPython.

Pieces of standard-library modules (runs of lines that parse on their own) are mutated by
deleting, inserting, replacing or duplicating one token; wherever CPython's tokenizer can still
lex the result, the grammar must accept exactly the mutants `ast.parse` accepts. Seeded, so a
failure is reproducible; the mutants cover the near misses no hand-written table thinks of.
"""

from __future__ import annotations

import io
import random
import sysconfig
import textwrap
import tokenize
from pathlib import Path

import pytest

from tests.python_language.grammar._harness import accepts, lexers, local_ast_accepts

MODULES = ("textwrap.py", "argparse.py", "dataclasses.py", "asyncio/tasks.py", "re/_parser.py",
           "json/decoder.py", "inspect.py", "typing.py")
SKIPPED_KINDS = (tokenize.ENDMARKER, tokenize.INDENT, tokenize.DEDENT, tokenize.NL,
                 tokenize.COMMENT, tokenize.NEWLINE)


def _pieces(rng: random.Random, count: int) -> list[str]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    sources = [(stdlib / m).read_text(encoding="utf-8") for m in MODULES if (stdlib / m).exists()]
    if not sources:
        pytest.skip("standard library sources not found")
    out: list[str] = []
    for _ in range(count * 50):
        if len(out) == count:
            break
        lines = rng.choice(sources).splitlines(keepends=True)
        i = rng.randrange(len(lines))
        piece = textwrap.dedent("".join(lines[i : i + rng.randint(1, 12)]))
        if piece.strip() and local_ast_accepts(piece):
            out.append(piece)
    return out


def _offset(lines: list[str], pos: tuple[int, int]) -> int:
    return sum(len(line) for line in lines[: pos[0] - 1]) + pos[1]


def _mutant(rng: random.Random, source: str) -> str | None:
    try:
        toks = [t for t in tokenize.generate_tokens(io.StringIO(source).readline)
                if t.type not in SKIPPED_KINDS]
    except (tokenize.TokenError, SyntaxError):
        return None
    if not toks:
        return None
    lines = source.splitlines(keepends=True)
    tok = rng.choice(toks)
    start, end = _offset(lines, tok.start), _offset(lines, tok.end)
    other = rng.choice(toks).string
    kind = rng.randrange(4)
    if kind == 0:
        return source[:start] + source[end:]
    if kind == 1:
        return source[:start] + other + " " + source[start:]
    if kind == 2:
        return source[:start] + other + source[end:]
    return source[:end] + " " + other + source[end:]


@pytest.mark.parametrize("seed", range(4))
def test_grammar_agrees_with_cpython_on_mutants(seed: int) -> None:
    rng = random.Random(seed)
    pieces = _pieces(rng, 40)
    lex = lexers()["tokenize"]
    checked = disagreements = 0
    examples: list[str] = []
    for _ in range(150):
        mutant = _mutant(rng, rng.choice(pieces))
        if mutant is None:
            continue
        try:
            got = accepts(mutant, lex)
        except (tokenize.TokenError, SyntaxError):
            continue  # not lexable by CPython's tokenizer: nothing for the grammar to decide
        checked += 1
        if got != local_ast_accepts(mutant):
            disagreements += 1
            examples.append(mutant)
    assert checked > 75
    assert disagreements == 0, examples[:3]
