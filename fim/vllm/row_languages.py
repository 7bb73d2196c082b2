"""Where the vLLM processor's rows get their languages: the cache and who builds for it.

Two ways to build a newcomer's language off the engine step, chosen by the server's device:

* **On a GPU** (any device but the CPU), in child processes (``fim.language_processes``): the
  step's critical path is its Python (the scheduler, the model runner between kernel launches,
  the processor) while the device computes, and a build on a thread would hold the GIL
  against it, longer the larger the newcomer's file; a child holds none of it, and the host's
  spare cores build at full speed.
* **On the CPU**, on threads of the engine's process: the model's kernels take every core
  for most of the step, so the builds run in its gaps; children would take cores from the
  model instead.  Measured on a 2-core CPU server (docs/team.md, the step benchmark's
  admission runs): 0.37 ms per request per token with threads against 0.93 ms with children,
  whose builds competed with the prefills they overlapped.

``SEAM_LANGUAGE_PROCESSES`` overrides the choice: a number of child processes, or 0 for
threads.  Rows made outside a server (tests, benchmarks) build on threads.
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


def server_languages(device: str = "cuda") -> LanguageCache:
    """The rows' language cache in a server whose model runs on ``device`` (vLLM's device
    type): ``SEAM_LANGUAGE_PROCESSES`` child processes when that is set, else
    ``LANGUAGE_PROCESSES`` of them on a GPU and threads on the CPU (see the module)."""
    raw = os.environ.get(PROCESSES_ENV, "").strip()
    default = 0 if device == "cpu" else LANGUAGE_PROCESSES
    try:
        processes = default if not raw else int(raw)
        if processes < 0:
            raise ValueError
    except ValueError:
        raise ValueError(f"{PROCESSES_ENV} must be a whole number of processes (0: threads), "
                         f"not {raw!r}") from None
    log.info("Seam builds its rows' languages in %s (device %s%s)",
             f"{processes} child processes" if processes
             else f"{LANGUAGE_WORKERS} threads of the engine's process", device,
             f", {PROCESSES_ENV}={raw}" if raw else "")
    if not processes:
        return thread_languages()
    return LanguageCache(ROW_LANGUAGES, processes=processes)
