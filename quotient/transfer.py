"""Moving a built constraint language from one process to another without its grammar.

A language built for a cursor (the right quotient's extension grammar, its charts, the lexed
windows) refers to objects every language over the same grammar shares: the grammar, its
analysis, its lazily built LR(0) automaton and that automaton's states, the tokenizer.  A
process that builds languages for another (``fim.language_processes``: the vLLM engine's
process must not spend its interpreter lock on builds) sends each language as a pickle in
which those shared objects travel as names, and the receiving process puts its own in their
place.  A copy would be wrong, not just large: an automaton's states are compared by
identity, and the receiver's rows go on extending the receiver's automaton.

What is shared is registered by name (``register``) by the module that makes it, in every
process that imports that module: a root grammar (with it its analysis, its automaton and the
automaton's states, each state named by its key in the automaton: a kernel state by its items,
a prediction state by its nonterminals) or any other object (a tokenizer).  Both processes make
their grammars from the same text, and a grammar numbers its symbols and rules the same way in
every process (``Grammar.from_lark`` sorts what lark gives in a hash-dependent order), so a
name and a state's key mean the same in both; each name carries its grammar's fingerprint, and
a receiver whose grammar differs refuses the pickle rather than misread it.
"""

from __future__ import annotations

import hashlib
import io
import pickle
import threading
from collections.abc import Callable

from .grammar import Grammar
from .lr0 import Automaton, DfaState, automaton

__all__ = ["TransferError", "dumps", "fingerprint", "loads", "register"]

#: name -> the function that gives the shared object (made on first use in each process)
_SHARED: dict[str, Callable[[], object]] = {}
_LOCK = threading.Lock()


class TransferError(ValueError):
    """A pickle names a shared object this process has not registered, or a state its
    automaton cannot make."""


def register(name: str, getter: Callable[[], object]) -> None:
    """Share what ``getter`` gives under ``name`` (a ``Grammar`` shares its analysis,
    automaton and states too).  Registering the same name again replaces the getter."""
    with _LOCK:
        _SHARED[name] = getter


#: (name, id of the grammar) -> its fingerprint (the shared grammars live as long as the process)
_FINGERPRINTS: dict[tuple[str, int], str] = {}


def fingerprint(grammar: Grammar) -> str:
    """A digest of how ``grammar`` numbers its symbols and rules."""
    a = grammar.analysis
    text = repr((list(a.symbol_names), a.n_terminals, list(a.rule_table), a.start_id))
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def _fingerprint(name: str, grammar: Grammar) -> str:
    key = (name, id(grammar))
    got = _FINGERPRINTS.get(key)
    if got is None:
        got = _FINGERPRINTS[key] = fingerprint(grammar)
    return got


def _names() -> dict[int, tuple]:
    """Persistent ids of the shared objects this process has, by ``id``."""
    out: dict[int, tuple] = {}
    with _LOCK:
        items = list(_SHARED.items())
    for name, getter in items:
        obj = getter()
        if isinstance(obj, Grammar):
            sign = (name, _fingerprint(name, obj))
            out[id(obj)] = ("object", *sign)
            out[id(obj.analysis)] = ("analysis", *sign)
            out[id(automaton(obj))] = ("automaton", *sign)
        else:
            out[id(obj)] = ("object", name, "")
    return out


class _Pickler(pickle.Pickler):
    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._names = _names()
        #: the shared automata, to name their states: id -> (name, fingerprint)
        self._automata = {id_: pid[1:] for id_, pid in self._names.items()
                          if pid[0] == "automaton"}

    def persistent_id(self, obj: object) -> tuple | None:
        if type(obj) is DfaState:
            sign = self._automata.get(id(obj.auto))
            if sign is None:
                return None  # an extension's own state: it travels with its automaton
            if obj.nts is not None:
                return ("prediction", *sign, obj.nts)
            return ("kernel", *sign, obj.items)
        return self._names.get(id(obj))


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file)
        self._got: dict[str, object] = {}

    def _shared(self, name: str, sign: str) -> object:
        got = self._got.get(name)
        if got is None:
            with _LOCK:
                getter = _SHARED.get(name)
            if getter is None:
                raise TransferError(f"the pickle names {name!r}, which this process does not "
                                    "share (its module was not imported)")
            got = getter()
            if isinstance(got, Grammar) and _fingerprint(name, got) != sign:
                raise TransferError(f"the pickle's {name!r} numbers its symbols otherwise than "
                                    "this process's")
            self._got[name] = got
        return got

    def persistent_load(self, pid: tuple) -> object:
        kind, name = pid[0], pid[1]
        obj = self._shared(name, pid[2])
        if kind == "object":
            return obj
        if not isinstance(obj, Grammar):
            raise TransferError(f"{name!r} is not a grammar here")
        if kind == "analysis":
            return obj.analysis
        auto: Automaton = automaton(obj)
        if kind == "automaton":
            return auto
        if kind == "kernel":
            return auto.kernel_state(pid[3])
        if kind == "prediction":
            return auto.prediction_state(pid[3])
        raise TransferError(f"unknown shared kind {kind!r}")


def dumps(obj: object) -> bytes:
    """``obj`` pickled, the registered shared objects named rather than copied."""
    buf = io.BytesIO()
    _Pickler(buf).dump(obj)
    return buf.getvalue()


def loads(data: bytes) -> object:
    """What :func:`dumps` pickled, with this process's shared objects in the named places."""
    return _Unpickler(io.BytesIO(data)).load()
