"""The Python fill-in-the-middle language: Seam's Python grammar, its windows and scopes, and
`FimLanguage`, the constraint `fim` decodes with.

Built on the language-neutral engine (`quotient`) and the Python lexer (`lexer`); implements
the engine's `Constraint` protocol, so `fim` depends on that protocol and on `for_python` only.
"""

from quotient import LanguageMode, Scope

from .grammar import lex_python, python_grammar, python_tokenizer
from .language import FimLanguage
from .state import FimState

__all__ = [
    "FimLanguage", "FimState", "LanguageMode", "Scope", "lex_python", "python_grammar",
    "python_tokenizer",
]
