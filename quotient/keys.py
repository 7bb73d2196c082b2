"""How both recognizers pack an Earley item into one int: ``origin << SHIFT | local``.

``origin`` is where the item's left side started (a chart number, or an automaton state in the
NFA parse) and ``local`` names what is being recognized (a dotted item in the reference
recognizer, a DFA state in the fast one). Ints keep charts free of small objects, which the
cyclic garbage collector would otherwise re-walk on long inputs. One definition for both
recognizers, so that a test or a debugging session reads keys the same way everywhere; the hot
loops pack and unpack inline (``key >> SHIFT``, ``key & MASK``).
"""

from __future__ import annotations

#: Bits of the ``local`` part. 2**20 dotted items or DFA states is far more than Python needs
#: (its grammar has about 1,800 items, a request's quotient a few thousand more, and a request
#: uses a few hundred DFA states), and keys of origin < 1024 stay one-digit Python ints, the
#: cheapest to hash. Both recognizers refuse a grammar or request that would overflow it.
SHIFT = 20
MASK = (1 << SHIFT) - 1

