"""The Go fill-in-the-middle language: Seam's Go lexer (semicolon insertion as its layout
rule), its Go grammar, windows and scopes, and `FimLanguage`, the constraint `fim` decodes with.

Built on the language-neutral engine (`quotient`) only; implements the engine's `Constraint`
protocol exactly as `python_language` does, so a decoder needs nothing Go-specific but
`FimLanguage.for_go`.
"""

from quotient import LanguageMode, Scope

from .grammar import go_grammar, parses
from .language import FimLanguage
from .lexer import LexError, lex
from .state import GoState

__all__ = [
    "FimLanguage", "GoState", "LanguageMode", "LexError", "Scope", "go_grammar", "lex", "parses",
]
