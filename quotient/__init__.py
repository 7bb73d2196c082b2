"""Context-free grammars, the Earley recognizer over NFAs, and left/right quotients."""

from .earley import EarleyState
from .errors import GrammarError
from .fim_language import FimLanguage, FimState
from .grammar import Grammar, TerminalDef
from .nfa import Nfa

__all__ = [
    "EarleyState", "FimLanguage", "FimState", "Grammar", "GrammarError", "Nfa", "TerminalDef",
]
