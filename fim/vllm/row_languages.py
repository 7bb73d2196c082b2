"""Where the vLLM processor's rows get their languages: the cache and who builds for it.

A server builds its rows' languages in child processes (``fim.language_processes``): a build
there holds none of the engine's GIL, so a running request's steps do not wait on a newcomer's
build, whatever its file's size.  Rows made outside a server (tests, benchmarks) build on
threads of their own process, which start nothing.  ``SEAM_LANGUAGE_PROCESSES`` sets how many
child processes a server starts; 0 builds on threads of the engine's process (the design
before, docs/DESIGN.md "Admitting a request").
"""

from __future__ import annotations

import logging
import os

from fim.language_cache import LanguageCache

#: Languages the rows keep built (``fim.language_cache``): a preempted request that comes back,
#: the same question asked twice, or a request typed on from an earlier one's left text takes
#: a kept one instead of a rebuild.
ROW_LANGUAGES = 16
#: Threads that build the rows' languages where no child process does.  Builds are Python and
#: hold the GIL, so more threads do not build faster; two let a small file's build pass a huge
#: one's.
LANGUAGE_WORKERS = 2
#: Child processes that build a server's rows' languages; two let a small file's build pass a
#: huge one's.
LANGUAGE_PROCESSES = 2
PROCESSES_ENV = "SEAM_LANGUAGE_PROCESSES"

log = logging.getLogger("vllm.seam")


def thread_languages() -> LanguageCache:
    """The rows' language cache outside a server: built on threads of this process."""
    return LanguageCache(ROW_LANGUAGES, workers=LANGUAGE_WORKERS)


def server_languages() -> LanguageCache:
    """The rows' language cache in a server: built in ``SEAM_LANGUAGE_PROCESSES`` child
    processes (``LANGUAGE_PROCESSES`` by default), or on threads when that is 0."""
    raw = os.environ.get(PROCESSES_ENV, "").strip()
    try:
        processes = LANGUAGE_PROCESSES if not raw else int(raw)
        if processes < 0:
            raise ValueError
    except ValueError:
        raise ValueError(f"{PROCESSES_ENV} must be a whole number of processes (0: threads), "
                         f"not {raw!r}") from None
    log.info("Seam builds its rows' languages in %s", f"{processes} child processes"
             if processes else f"{LANGUAGE_WORKERS} threads of the engine's process")
    if not processes:
        return thread_languages()
    return LanguageCache(ROW_LANGUAGES, processes=processes)
