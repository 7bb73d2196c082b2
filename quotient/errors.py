"""Exceptions raised by the quotient engine."""


class GrammarError(ValueError):
    """A grammar is malformed: an undefined symbol, an unknown start symbol, a bad lark file."""
