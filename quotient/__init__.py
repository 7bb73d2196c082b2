"""The language-neutral engine: grammars, Earley recognizers over strings and automata,
left and right quotients, and the constraint protocol decoders rely on.

Nothing here knows Python or any lexer: a language package (`python_language`) builds its
grammar and automata and implements `Constraint` on top of this engine.
"""

from .constraint import Constraint, ConstraintState, LanguageMode, Scope
from .errors import GrammarError
from .fast import State as RecognizerState
from .fast import recognizer
from .grammar import Grammar, TerminalDef
from .nfa import Nfa
from .quotients import left_quotient, right_quotient, right_quotient_split

__all__ = [
    "Constraint", "ConstraintState", "Grammar", "GrammarError", "LanguageMode", "Nfa",
    "RecognizerState", "Scope", "TerminalDef", "left_quotient", "recognizer", "right_quotient",
    "right_quotient_split",
]
