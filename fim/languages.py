"""The languages Seam knows: one record per language, and the lookups that find it.

Every file gets suggestions; only the languages with a grammar get checked ones.  A record says
what a language is called (its id, the editors' LSP ``languageId`` values, its file
extensions) and, when Seam has a grammar for it, how to build its constraint for a cursor and
which parser judges a finished middle.  A language without a grammar is *unchecked*: the same
engine, prompt, project context and caches serve it, decoding runs with :class:`Unchecked`
(a constraint that accepts every middle and calls every point complete, so the right-context
stop compares text alone: a middle never re-writes what follows the cursor), and the result's
mode is ``LanguageMode.UNCHECKED``, which the editors show.

Lookups never fail: an id, an extension or a JSONL row's ``language`` that no record names is
an unchecked language under that name (:func:`unknown`), so a new file type is served, never
refused.

A language joins with one record in ``LANGUAGES`` (and its grammar's factory below, imported
on first use, as Python's is: the grammar modules take tens of milliseconds to import).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath

from fim.parse_check import parses as python_parses
from quotient.constraint import Constraint, ConstraintState, LanguageMode, Scope

#: Builds a language's constraint for ``(left, right, scope)``.
GrammarFactory = Callable[[str, str, Scope], Constraint]
#: Whether a whole file of the language parses (the final judge of a checked middle).
Parser = Callable[[str], bool]


#: The first import of a grammar's modules from two threads at once can fail (lark's modules
#: import each other; the vLLM processor builds languages on worker threads): it is made under
#: this lock.
IMPORTING = threading.Lock()


def python_grammar(left: str, right: str, scope: Scope | str) -> Constraint:
    """The Python FIM language (``python_language``) for these texts."""
    # Imported on first use, for startup speed (see ``fim.language_cache``).
    with IMPORTING:
        from python_language import FimLanguage

    return FimLanguage.for_python(left, right, scope=scope)


def go_grammar(left: str, right: str, scope: Scope | str) -> Constraint:
    """The Go FIM language (``go_language``) for these texts."""
    with IMPORTING:
        from go_language import FimLanguage

    return FimLanguage.for_go(left, right, scope=scope)


def go_parses(source: str) -> bool:
    """Whether ``source`` is a Go file Seam's Go grammar accepts (the same grammar the
    constraint uses; it follows the Go specification where ``gofmt`` accepts more)."""
    with IMPORTING:
        from go_language import parses

    return parses(source)


@dataclass(frozen=True)
class Language:
    """One language: its id (what ``seam complete``'s JSONL rows and the benchmarks call it),
    the editors' ``languageId`` values for it, its file extensions (lower case, with the dot),
    and for a language with a grammar its constraint's factory and its parser."""

    id: str
    lsp_ids: tuple[str, ...] = ()
    extensions: tuple[str, ...] = ()
    grammar: GrammarFactory | None = None
    parser: Parser | None = None

    @property
    def checked(self) -> bool:
        """Whether Seam has a grammar for it (suggestions exact, else unchecked)."""
        return self.grammar is not None

    @property
    def check(self) -> str:
        """How its suggestions are labelled: ``"exact"`` or ``"unchecked"``."""
        return "exact" if self.checked else LanguageMode.UNCHECKED.value

    def constraint(self, left: str, right: str, scope: Scope | str) -> Constraint:
        """The constraint of a middle between ``left`` and ``right``: the grammar's, or
        :class:`Unchecked` for a language without one."""
        if self.grammar is None:
            return UNCHECKED
        return self.grammar(left, right, Scope(scope))

    def parses(self, source: str) -> bool | None:
        """Whether ``source`` is a valid file of the language; ``None``: nothing can tell."""
        return None if self.parser is None else self.parser(source)


class _AnyState:
    """The state of :class:`Unchecked`: every text may follow, every point is complete."""

    def feed(self, text: str) -> ConstraintState | None:
        return self

    def is_complete(self) -> bool:
        return True


class Unchecked:
    """The constraint of a language without a grammar: every middle, complete anywhere.

    Decoding with it is unconstrained decoding that still runs the constrained loop's
    stopping rules: the right-context stop (by text alone, every point being complete), line
    stops and the early first line."""

    mode = LanguageMode.UNCHECKED
    reason = "no grammar for this language: suggestions are not checked"
    _state = _AnyState()

    def initial(self) -> ConstraintState:
        return self._state

    def check_region(self) -> tuple[int, int] | None:
        return None


UNCHECKED = Unchecked()

PYTHON = Language("python", ("python",), (".py", ".pyi", ".pyw"), python_grammar,
                  python_parses)

#: The languages by id.  The unchecked ones are here for their names (the editors' ids, the
#: extensions ``seam complete`` reads): any other is served unchecked too, under its own name.
LANGUAGES: dict[str, Language] = {lang.id: lang for lang in (
    PYTHON,
    Language("javascript", ("javascript", "javascriptreact"),
             (".js", ".mjs", ".cjs", ".jsx")),
    Language("typescript", ("typescript", "typescriptreact"), (".ts", ".mts", ".cts", ".tsx")),
    Language("go", ("go",), (".go",), go_grammar, go_parses),
    Language("rust", ("rust",), (".rs",)),
    Language("c", ("c",), (".c", ".h")),
    Language("cpp", ("cpp",), (".cc", ".cpp", ".cxx", ".hpp", ".hh")),
    Language("java", ("java",), (".java",)),
    Language("shell", ("shellscript", "sh", "bash", "zsh"), (".sh", ".bash", ".zsh")),
    Language("yaml", ("yaml",), (".yaml", ".yml")),
    Language("toml", ("toml",), (".toml",)),
    Language("json", ("json", "jsonc"), (".json", ".jsonc")),
    Language("markdown", ("markdown",), (".md", ".markdown")),
    Language("html", ("html",), (".html", ".htm")),
    Language("css", ("css", "scss", "less"), (".css", ".scss", ".less")),
    Language("sql", ("sql",), (".sql",)),
    Language("lua", ("lua",), (".lua",)),
    Language("ruby", ("ruby",), (".rb",)),
    Language("text", ("plaintext", "text"), (".txt",)),
)}

_BY_LSP_ID = {lsp: lang for lang in LANGUAGES.values() for lsp in lang.lsp_ids}
_BY_EXTENSION = {ext: lang for lang in LANGUAGES.values() for ext in lang.extensions}


def unknown(name: str) -> Language:
    """A language no record names: unchecked, under its own name (``"text"`` when empty)."""
    return Language(name.strip().lower() or "text")


def by_id(name: str) -> Language:
    """The language a JSONL row's ``language`` or a benchmark names (``"python"``, ``"go"``);
    an editor's ``languageId`` is understood too."""
    key = name.strip().lower()
    return LANGUAGES.get(key) or _BY_LSP_ID.get(key) or unknown(key)


def by_lsp_id(language_id: str) -> Language:
    """The language of an editor's ``languageId`` (``"shellscript"`` is ``shell``)."""
    return _BY_LSP_ID.get(language_id) or by_id(language_id)


def by_path(path: str) -> Language:
    """The language of a file by its extension (a URI's path too); ``text`` when unknown."""
    suffix = PurePosixPath(path.replace("\\", "/")).suffix.lower()
    return _BY_EXTENSION.get(suffix) or unknown("text")


def checked_lsp_ids() -> tuple[str, ...]:
    """The editors' ``languageId`` values whose suggestions are exact (a grammar checks
    them); the ``seam/status`` answer tells the editors, which label the rest unchecked."""
    return tuple(lsp for lang in LANGUAGES.values() if lang.checked for lsp in lang.lsp_ids)


def extensions_of(name: str) -> tuple[str, ...]:
    """The file extensions of the language ``name`` (none for an unknown one)."""
    return by_id(name).extensions
