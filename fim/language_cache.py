"""The constraint languages built lately, kept by their contexts and reused: one cache for every
place that constrains a middle, with builds that can run on worker threads.

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

Off the caller's thread (``workers``): the vLLM processor learns of a request when the engine
admits it, inside an engine step, and must not build there (every running request would wait).
:meth:`LanguageCache.begin` starts the build on a worker thread and returns a
:class:`PendingLanguage` at once; the row joins it when its first mask is due, by then usually
built while the forward pass ran.  A request for a language still being built shares that
build (an editor's warm-up request builds the language its next request takes).  With no
workers, :meth:`begin` builds on the caller's thread, as before.

Threads: the cache's own tables are locked.  A built language is handed to whoever joins it
and is then used by one thread at a time (its feed memo and recognizer charts are not locked):
the worker only builds it and its initial state, and the typed characters of a reuse are fed by
the joining thread.  What every language shares, the grammar and its lazily built automata, is
safe to extend from several threads (``quotient.lr0``, ``python_language.grammar``).

The cache is per language (``fim.languages``): a request names its language, and only a
language with a grammar is built and kept; an unchecked one (``fim.languages.Unchecked``) costs
nothing to make and is not kept, so it never evicts a grammar's language.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from fim.language_processes import Built, LanguageProcesses
from fim.languages import IMPORTING, PYTHON, Language
from fim.options import Scope
from fim.stopping import FeedCache
from quotient.constraint import Constraint, ConstraintState

#: Builds the constraint for ``(left, right, scope)``; :func:`python_language` by default.
LanguageFactory = Callable[[str, str, Scope], Constraint]

def python_language(left: str, right: str, scope: Scope | str) -> Constraint:
    """The Python FIM language (``python_language``) for these texts."""
    # Imported on first use, for startup speed: the lexer and grammar modules (``regex``
    # included) take tens of milliseconds that ``seam serve`` would otherwise spend before
    # answering ``initialize``; the server imports them on its grammar thread while the
    # model loads.
    with IMPORTING:
        from python_language import FimLanguage

    return FimLanguage.for_python(left, right, scope=scope)


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


@dataclass
class _Slot:
    """A language of the cache, built or being built."""

    left: str
    right: str
    scope: Scope
    built: Future[CachedLanguage]
    of: Language = PYTHON


class PendingLanguage:
    """A request's language, maybe still being built: :meth:`join` gives it."""

    def __init__(self, owner: LanguageCache, slot: _Slot, left: str, reused: bool) -> None:
        self._owner, self._slot, self._left, self._reused = owner, slot, left, reused
        self._hit: LanguageHit | None = None
        #: the join built the language itself (the shared one refused the typed characters)
        self.built_here = False

    def done(self) -> bool:
        """Whether :meth:`join` would return without waiting for a build."""
        return self._hit is not None or self._slot.built.done()

    def join(self) -> LanguageHit:
        """The language and the request's state, waiting for the build if it is not done.

        Raises what the build raised.  When the request's typed characters cannot be fed into
        the language it shares (known only once that is built), its own is built here."""
        if self._hit is None:
            entry = self._slot.built.result()
            typed = self._left[len(entry.left):]
            state = entry.cache.feed(entry.initial, typed) if typed else entry.initial
            if state is None:
                self.built_here = True
                self._hit = self._owner.build_here(self._left, entry.right, entry.scope,
                                                   entry.of)
            else:
                self._hit = LanguageHit(entry, state, self._reused)
        return self._hit


class LanguageCache:
    """The last ``size`` languages, least recently used dropped first; ``workers`` threads
    build them (0: the caller's thread does)."""

    def __init__(self, size: int = 4, factory: LanguageFactory | None = None,
                 workers: int = 0, processes: int = 0) -> None:
        if size < 1:
            raise ValueError("a language cache holds at least one language")
        self.size = size
        self.factory: LanguageFactory = factory or python_language
        #: languages built (or started) since the cache was made (tests and benchmarks)
        self.built = 0
        self._slots: list[_Slot] = []  # least recently used first
        self._lock = threading.RLock()  # a failed inline build forgets its slot under it
        self._pool = (ThreadPoolExecutor(workers, thread_name_prefix="seam-language")
                      if workers > 0 else None)
        self.processes = LanguageProcesses(processes) if processes > 0 else None

    def __len__(self) -> int:
        return len(self._slots)

    def get(self, left: str, right: str, scope: Scope | str,
            of: Language = PYTHON) -> LanguageHit:
        """The language for the request at ``(left, right, scope)`` in a file of language
        ``of``, reused or built (waits for the build)."""
        return self.begin(left, right, scope, of).join()

    def begin(self, left: str, right: str, scope: Scope | str,
              of: Language = PYTHON) -> PendingLanguage:
        """The language for the request at ``(left, right, scope)`` in a file of language
        ``of``: a kept one, one being built that it can share, or a build started now (on a
        worker when there are any).  ``factory`` builds Python's, the record's grammar any
        other one's; a language without a grammar gets a new unchecked constraint, not kept."""
        scope = Scope(scope)
        if not of.checked:
            unchecked = of.constraint(left, right, scope)
            slot = _Slot(left, right, scope, Future(), of)
            slot.built.set_result(CachedLanguage(left, right, scope, unchecked,
                                                 unchecked.initial(), of=of))
            return PendingLanguage(self, slot, left, reused=False)
        with self._lock:
            for slot in reversed(self._slots):
                if (slot.of != of or slot.right != right or slot.scope != scope
                        or not left.startswith(slot.left)):
                    continue
                if slot.built.done() and slot.built.exception() is not None:
                    continue  # failed; forgotten by its callback, which may not have run yet
                if len(left) > len(slot.left) and slot.built.done():
                    entry = slot.built.result()
                    # Built: the typed characters are fed here (by the thread that will use
                    # the language) and a refusal is known now.
                    state = entry.cache.feed(entry.initial, left[len(slot.left):])
                    if state is None:
                        continue
                    pending = PendingLanguage(self, slot, left, reused=True)
                    pending._hit = LanguageHit(entry, state, reused=True)
                else:
                    pending = PendingLanguage(self, slot, left, reused=True)
                self._slots.remove(slot)
                self._slots.append(slot)
                return pending
            slot = self._start(left, right, scope, of)
        return PendingLanguage(self, slot, left, reused=False)

    def _factory(self, of: Language) -> LanguageFactory:
        return self.factory if of == PYTHON else of.constraint

    def build_here(self, left: str, right: str, scope: Scope,
                   of: Language = PYTHON) -> LanguageHit:
        """Build the language on the caller's thread (and keep it)."""
        slot = _Slot(left, right, scope, Future(), of)
        _build_into(slot, self._factory(of))
        with self._lock:
            self._keep(slot)
        return LanguageHit(slot.built.result(), slot.built.result().initial, reused=False)

    def _start(self, left: str, right: str, scope: Scope, of: Language) -> _Slot:
        slot = _Slot(left, right, scope, Future(), of)
        self._keep(slot)
        slot.built.add_done_callback(self._forget_failed)
        factory = self._factory(of)
        if self.processes is not None and (of != PYTHON or self.factory is python_language):
            # A child process builds the language of the record (the default factory's); the
            # dispatcher builds it itself if the child cannot.
            self.processes.submit(
                of, left, right, scope, fallback=lambda: _built(factory, left, right, scope)
            ).add_done_callback(lambda done: _settle(slot, done))
        elif self._pool is None:
            _build_into(slot, factory)
        else:
            self._pool.submit(_build_into, slot, factory)
        return slot

    def _keep(self, slot: _Slot) -> None:
        self.built += 1
        self._slots.append(slot)
        del self._slots[:-self.size]

    def _forget_failed(self, built: Future[CachedLanguage]) -> None:
        if built.exception() is not None:
            with self._lock:
                self._slots[:] = [s for s in self._slots if s.built is not built]

    def clear(self) -> None:
        with self._lock:
            self._slots.clear()

    def close(self) -> None:
        """Stop the workers (threads and processes) once the builds started are done."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        if self.processes is not None:
            self.processes.close()


def _built(factory: LanguageFactory, left: str, right: str, scope: Scope) -> Built:
    language = factory(left, right, scope)
    return Built(language, language.initial())


def _settle(slot: _Slot, done: Future[Built]) -> None:
    """Hand a language built in a child process (or the error of its build) to the slot."""
    err = done.exception()
    if err is not None:
        slot.built.set_exception(err)
        return
    built = done.result()
    slot.built.set_result(CachedLanguage(slot.left, slot.right, slot.scope, built.language,
                                         built.initial, of=slot.of))


def _build_into(slot: _Slot, factory: LanguageFactory) -> None:
    """Build ``slot``'s language and its initial state, and set the slot's future."""
    if not slot.built.set_running_or_notify_cancel():
        return
    try:
        language = factory(slot.left, slot.right, slot.scope)
        entry = CachedLanguage(slot.left, slot.right, slot.scope, language, language.initial(),
                               of=slot.of)
    except BaseException as err:  # noqa: BLE001 - the joining thread raises it
        slot.built.set_exception(err)
    else:
        slot.built.set_result(entry)
