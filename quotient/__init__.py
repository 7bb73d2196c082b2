"""Context-free grammars, the Earley recognizer over NFAs, and left/right quotients."""

from .earley import EarleyState
from .errors import GrammarError
from .grammar import Grammar, TerminalDef
from .nfa import Nfa

__all__ = ["EarleyState", "Grammar", "GrammarError", "Nfa", "TerminalDef"]
