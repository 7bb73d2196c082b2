"""How both recognizers pack an Earley item into one int: ``origin << SHIFT | local``.

``origin`` is where the item's left side started (a chart number, or an automaton state in the
NFA parse) and ``local`` names what is being recognized (a dotted item in the reference
recognizer, a DFA state in the fast one). Ints keep charts free of small objects, which the
cyclic garbage collector would otherwise re-walk on long inputs. One definition for both
recognizers, so that a test or a debugging session reads keys the same way everywhere.
"""

from __future__ import annotations

#: Bits of the ``local`` part. 2**20 dotted items or DFA states per grammar or request is far
#: more than Python needs (a few thousand items; a request builds a few thousand DFA states),
#: and keys of origin < 1024 stay one-digit Python ints, the cheapest to hash.
SHIFT = 20
MASK = (1 << SHIFT) - 1


def pack(origin: int, local: int) -> int:
    """The key of `local` started at `origin` (hot loops inline this)."""
    return origin << SHIFT | local


def origin_of(key: int) -> int:
    return key >> SHIFT


def local_of(key: int) -> int:
    return key & MASK
