"""Pausing Python's cyclic garbage collector around long chart-building loops.

Charts hold only ints and containers of ints, which never form reference cycles, but building
them allocates so many sets and lists that the collector runs full collections whose cost grows
with everything alive (measured: about 2x the parse time on an 11,000-terminal file).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic collector inside the block; its previous state is restored."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
