"""The constraint languages built lately, kept by their contexts and reused: one cache for every
place that constrains a middle.

Building the Python FIM language for a cursor lexes the whole file left and right of it and
starts the right quotient: milliseconds for a small file, far more for a large one.  Editors ask
again and again at nearly the same place, so both constrained paths keep the last few languages
here: the in-process engine (``fim.api.Engine``: one per request) and the vLLM server's
processor (``fim.vllm.processor``: one per constrained row of the batch).

A request at the same ``(left, right, scope)`` takes the cached language as it is.  A request
whose left text extends a cached one's by typed characters (same right text and scope) takes
that language too, with the state after feeding the typed characters
(``FeedCache.feed(initial, typed)``) instead of a rebuild: what keeps as-you-type completion
cheap.  When the typed characters cannot be fed (the user typed something the language refuses
there, or wrote past a place where the language would be built differently), the language is
built anew.

The cache is per language (``fim.languages``): a request names its language, and only a
language with a grammar is built and kept; an unchecked one (``fim.languages.Unchecked``) costs
nothing to make and is not kept, so it never evicts a grammar's language.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fim.languages import PYTHON, Language, python_grammar
from fim.options import Scope
from fim.stopping import FeedCache
from quotient.constraint import Constraint, ConstraintState

#: Builds the constraint for ``(left, right, scope)``; :func:`python_language` by default.
LanguageFactory = Callable[[str, str, Scope], Constraint]

#: The Python FIM language (``python_language``) for these texts.  Imported on first use, for
#: startup speed: the lexer and grammar modules (``regex`` included) take tens of
#: milliseconds that ``seam serve`` would otherwise spend before answering ``initialize``; the
#: server imports them on its grammar thread while the model loads.
python_language = python_grammar


@dataclass
class CachedLanguage:
    """A built language, the texts it was built for, its initial state and the memo of its
    feeds (shared by every request that uses it)."""

    left: str
    right: str
    scope: Scope
    language: Constraint
    initial: ConstraintState
    cache: FeedCache = field(default_factory=FeedCache)
    #: the file's language (``fim.languages``) it was built for
    of: Language = PYTHON


@dataclass(frozen=True)
class LanguageHit:
    """What :meth:`LanguageCache.get` gives: the language and the state after the request's
    left text (the initial state, or the state after the characters typed since the cached
    language's left text)."""

    language: CachedLanguage
    state: ConstraintState
    #: whether a cached language served the request (else it was built for it)
    reused: bool


class LanguageCache:
    """The last ``size`` languages, least recently used dropped first.

    Not locked: each owner calls it from one thread at a time (the engine under its request
    lock, the vLLM processor on the engine's step).
    """

    def __init__(self, size: int = 4, factory: LanguageFactory | None = None) -> None:
        if size < 1:
            raise ValueError("a language cache holds at least one language")
        self.size = size
        self.factory: LanguageFactory = factory or python_language
        #: languages built since the cache was made (tests and benchmarks count them)
        self.built = 0
        self._entries: list[CachedLanguage] = []  # least recently used first

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, left: str, right: str, scope: Scope | str,
            of: Language = PYTHON) -> LanguageHit:
        """The language for the request at ``(left, right, scope)`` in a file of language
        ``of``, reused or built (``factory`` builds Python's, the record's grammar any other
        one's; a language without a grammar gets a new unchecked constraint, not kept)."""
        scope = Scope(scope)
        if not of.checked:
            unchecked = of.constraint(left, right, scope)
            return LanguageHit(CachedLanguage(left, right, scope, unchecked,
                                              unchecked.initial(), of=of),
                               unchecked.initial(), reused=False)
        for entry in reversed(self._entries):
            if (entry.of != of or entry.right != right or entry.scope != scope
                    or not left.startswith(entry.left)):
                continue
            typed = left[len(entry.left):]
            state = entry.cache.feed(entry.initial, typed) if typed else entry.initial
            if state is not None:
                self._entries.remove(entry)
                self._entries.append(entry)
                return LanguageHit(entry, state, reused=True)
        language = (self.factory(left, right, scope) if of == PYTHON
                    else of.constraint(left, right, scope))
        entry = CachedLanguage(left, right, scope, language, language.initial(), of=of)
        self.built += 1
        self._entries.append(entry)
        del self._entries[:-self.size]
        return LanguageHit(entry, entry.initial, reused=False)

    def clear(self) -> None:
        self._entries.clear()
