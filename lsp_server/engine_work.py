"""The one module of the server that calls the engine, on the worker thread only.

Everything the server asks of a model goes through here: deciding what to run for a planned
request (``prompt_for`` and ``uncached``: whether its project context is in the model's cache
yet), the decode of a request (:class:`Decode`, which ``jobs`` runs on its worker), and the
background work's runs (``warm``, ``complete``). Calls to the engine happen on the worker and
nowhere else, so no question about the model's cache is asked while a decode changes it, and
no prompt is tokenized on the event loop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace

from fim.alternatives import Ranking
from fim.engine_interface import CompletionEngine, EnginePrompt
from fim.request import CompletionRequest, CompletionResult
from lsp_server.request_plan import Planned

#: Extra prompt tokens a request may run to include the project context; when the context
#: would cost more (it is not in the model's cache yet), the request goes without it and the
#: context is run into the cache in the background, so it never delays a suggestion.
CONTEXT_SLACK_TOKENS = 16


@dataclass(frozen=True)
class Runnable:
    """The request to run now, and its prompt when it was built to decide that (handed on to
    the engine, which builds it only when it is ``None``); with the planned request and its
    prompt when its project context was deferred (not cached yet: warmed after)."""

    request: CompletionRequest
    prompt: EnginePrompt | None = None
    deferred: CompletionRequest | None = None
    deferred_prompt: EnginePrompt | None = None


def ranked(request: CompletionRequest, alternatives: int, first_line: bool = False
           ) -> CompletionRequest:
    """``request`` asking for the place's ``alternatives`` best middles, greedy's first
    (``first_line``: each ending with its line where the file is complete)."""
    if first_line:
        request = replace(request, line_stop=True)
    if alternatives <= 1:
        return request
    return replace(request, alternatives=alternatives, ranking=Ranking.GREEDY_FIRST)


def runnable(engine: CompletionEngine, planned: Planned, alternatives: int = 1,
             first_line: bool = False) -> Runnable:
    """What to run for ``planned``: without its project context when that context is not in
    the model's cache yet (it would cost more than ``CONTEXT_SLACK_TOKENS``).

    Each prompt built to decide it is built once and kept for the engine; the one without
    context only when the one with it is not cached (a cached one runs whatever the other
    costs), and none for a request without context (the engine builds it).
    """
    request = ranked(planned.request, alternatives, first_line)
    if not request.context_budget:
        return Runnable(request)
    prompt = engine.prompt_for(request)
    uncached = engine.uncached(request, prompt)
    if uncached > CONTEXT_SLACK_TOKENS:
        bare = ranked(planned.without_project(), alternatives, first_line)
        bare_prompt = engine.prompt_for(bare)
        if uncached > engine.uncached(bare, bare_prompt) + CONTEXT_SLACK_TOKENS:
            return Runnable(bare, bare_prompt, request, prompt)
    return Runnable(request, prompt)


class Decode:
    """A request's decode, run by ``jobs`` on its worker: what to run for the plan (decided
    there, against the model's cache as it is then), then the engine's decode of it.

    ``run`` is what ran, once it has (the service warms a deferred project context after)."""

    def __init__(self, engine: CompletionEngine, planned: Planned, alternatives: int = 1,
                 first_line: bool = False) -> None:
        self.engine = engine
        self.planned = planned
        self.alternatives = alternatives
        self.first_line = first_line
        self.run: Runnable | None = None

    def __call__(self, cancel: Callable[[], bool],
                 on_partial: Callable[[str], None] | None = None) -> CompletionResult:
        self.run = runnable(self.engine, self.planned, self.alternatives, self.first_line)
        return self.engine.complete(self.run.request, cancel=cancel, on_partial=on_partial,
                                    prompt=self.run.prompt)


def complete(engine: CompletionEngine, run: Runnable, cancel: threading.Event
             ) -> CompletionResult:
    """Background work's decode of ``run`` (a prefetch, the ranked alternatives)."""
    return engine.complete(run.request, cancel=cancel.is_set, prompt=run.prompt)


def warm(engine: CompletionEngine, request: CompletionRequest, cancel: threading.Event, *,
         prompt: EnginePrompt | None = None, keep_cached: bool = False,
         hold: bool = False) -> bool:
    """Run ``request``'s prompt into the model's cache (``hold``: and keep it there whole);
    whether it finished."""
    return engine.warm(request, cancel.is_set, keep_cached=keep_cached, prompt=prompt,
                       hold=hold)
