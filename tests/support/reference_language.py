"""A slow, exact reference language for the decoding tests: every text is viable while it is
fed, and completeness is ``ast.parse`` of the whole file (what ``LanguageMode.NONE`` promises).

Decoding compared against it shows what the real constraint (``python_language``) adds or
loses, without depending on it.
"""

from __future__ import annotations

from fim.decoding import parses
from quotient.constraint import LanguageMode, Scope


class ReferenceState:
    """Exact but slow: every text is viable, completeness is ``ast.parse`` of the whole file."""

    __slots__ = ("lang", "text")

    def __init__(self, lang: ReferenceLanguage, text: str) -> None:
        self.lang = lang
        self.text = text

    def feed(self, text: str) -> ReferenceState:
        return ReferenceState(self.lang, self.text + text)

    def is_complete(self) -> bool:
        return parses(self.lang.left + self.text + self.lang.right)


class ReferenceLanguage:
    # Nothing is rejected while feeding and completeness is the parser's answer: what
    # ``NONE`` promises (exact completeness, no early rejection).
    mode = LanguageMode.NONE

    def __init__(self, left: str, right: str, scope: Scope = Scope.FREE) -> None:
        self.left, self.right, self.scope = left, right, scope
        self.built = 1

    @classmethod
    def for_python(cls, left: str, right: str, scope: Scope = Scope.FREE) -> ReferenceLanguage:
        return cls(left, right, scope)

    def check_region(self) -> None:
        return None  # decide on the whole text

    def initial(self) -> ReferenceState:
        return ReferenceState(self, "")
