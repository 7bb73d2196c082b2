"""From a cursor in a document to the completion request the model gets: the one place that
decides it, shared by the server and the benchmarks that measure the server's policy.

A request is the cursor's policy (``settings.policy_for``: scope and budgets by the kind of
cursor), the prompt's stable start in the document (``context_plan``), and the project
context (``project_context``), whose tokens come out of the left context's share of the
window: the context's budget is fixed per settings, so the prompt's start stays put whatever
the context holds, and the left context never has to be cut again to make room (a cut that
moved with every keystroke would empty the model's cache each time).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from fim.api import CompletionRequest, Engine
from fim.editor_policy import (
    EMPTY_LINE,
    LEFT_FIRST_TOKENS,
    MID_LINE,
    EditorPolicy,
    cursor_line,
)
from lsp_server import text as model_text
from lsp_server.project.sources import (
    ContextCollector,
    ContextSources,
    OpenDocument,
    ProjectContext,
    TokenCounter,
)
from lsp_server.prompt_anchors import AnchorPlanner
from lsp_server.settings import (
    MIN_CONTEXT_BUDGET_TOKENS,
    Settings,
    context_sources,
    policy_for,
)
from lsp_server.suggestions import digest


@dataclass(frozen=True)
class Planned:
    """A planned request, its policy, the key under which identical requests share one
    decode, and the project context it carries."""

    request: CompletionRequest
    policy: EditorPolicy
    share_key: tuple
    context: ProjectContext

    def without_context(self) -> CompletionRequest:
        """The same request with no project context (the prompt's start stays)."""
        return dataclasses.replace(self.request, context_files=(), context_budget=0,
                                   repo="", path=None)


def device_type(engine: Engine) -> str:
    """``"cpu"``, ``"cuda"`` or ``"metal"``: where the engine's model runs."""
    return engine.backend.device


def _room(policy: EditorPolicy) -> int | None:
    """Prompt tokens of the window left for the file and the project context: the window
    less the longest middle of either kind of cursor (one budget for both, so that both
    share a document's prompt start), the right context and the sentinels."""
    if policy.context_tokens is None:
        return None
    longest = max(MID_LINE.max_tokens, EMPTY_LINE.max_tokens, policy.max_tokens)
    return max(16, policy.context_tokens - longest - (policy.right_tokens or 0) - 4)


def context_budget(policy: EditorPolicy, sources: ContextSources,
                   left_first: int = LEFT_FIRST_TOKENS) -> int:
    """Tokens of project context a request gets: the setting, but never so many that the
    left context would hold fewer than ``left_first`` tokens (and none when what is left is
    less than ``MIN_CONTEXT_BUDGET_TOKENS``: a small window is better spent on the file)."""
    if not sources.active:
        return 0
    room = _room(policy)
    if room is None:
        return sources.budget
    budget = min(sources.budget, room - left_first)
    return budget if budget >= MIN_CONTEXT_BUDGET_TOKENS else 0


class RequestPlanner:
    """Plans requests for one session; it keeps each document's prompt start.

    ``left_first`` and ``right_tokens`` are the server's constants (``LEFT_FIRST_TOKENS``,
    the policy's ``right_tokens``); benchmarks that measure other values pass them here.
    """

    def __init__(self, collector: ContextCollector | None = None, *,
                 left_first: int = LEFT_FIRST_TOKENS, right_tokens: int | None = None) -> None:
        self.collector = collector
        self.left_first = left_first
        self.right_tokens = right_tokens
        self._anchors: AnchorPlanner | None = None
        self._anchors_for: tuple | None = None  # (engine, left budget) they were made for
        self._counter: tuple[int, TokenCounter] | None = None  # per engine

    def forget(self, uri: str) -> None:
        if self._anchors is not None:
            self._anchors.forget(uri)
        if self.collector is not None:
            self.collector.forget(uri)

    def anchors(self, engine: Engine, policy: EditorPolicy, extra: int) -> AnchorPlanner | None:
        """The per-document prompt starts for this engine, context and extra budget."""
        room = _room(policy)
        if room is None:
            return None
        budget = max(16, room - extra)
        key = (id(engine), budget)
        if self._anchors is None or self._anchors_for != key:
            tokenizer = engine.tokenizer
            self._anchors = AnchorPlanner(lambda t: len(tokenizer.encode(t)), budget,
                                           min(budget, self.left_first))
            self._anchors_for = key
        return self._anchors

    def _count_with(self, engine: Engine) -> TokenCounter:
        """The engine's token counter, with its memory of counted texts."""
        if self._counter is None or self._counter[0] != id(engine):
            tokenizer = engine.tokenizer
            self._counter = (id(engine), TokenCounter(lambda t: len(tokenizer.encode(t))))
        return self._counter[1]

    def policy(self, engine: Engine, settings: Settings, text: str, offset: int) -> EditorPolicy:
        line_before, line_after = cursor_line(text, offset)
        policy = policy_for(settings, line_before, line_after,
                            device_type=device_type(engine),
                            model_window=engine.window)
        if self.right_tokens is not None:
            policy = dataclasses.replace(policy, right_tokens=self.right_tokens)
        return policy

    def plan(self, engine: Engine, settings: Settings, uri: str, text: str, offset: int,
             documents: Sequence[OpenDocument] = (), *, left_start: int | None = None
             ) -> Planned:
        """The request a completion at ``offset`` of ``text`` (document ``uri``) makes.

        ``documents`` are the open documents for the open-files source, in the order they
        were opened.  ``left_start`` overrides the prompt's start (a widened anchor being
        warmed); by default it is the document's anchor.
        """
        policy = self.policy(engine, settings, text, offset)
        sources = context_sources(settings, device_type(engine))
        extra = context_budget(policy, sources, self.left_first)
        # The model gets the text without lone surrogates and with \n line breaks; the
        # document keeps its own text (see `text`).
        left = model_text.for_model(text[:offset])
        right = model_text.for_model(text[offset:])
        anchors = self.anchors(engine, policy, extra)
        if left_start is None:
            left_start = anchors.left_start(uri, left, len(left)) if anchors is not None else 0
        context = ProjectContext()
        if self.collector is not None:
            def widest_line() -> int:  # where the server would widen this prompt to
                if anchors is None:
                    return 0
                return left.count("\n", 0, anchors.fit(left, len(left), anchors.left_max))

            context = self.collector.collect(
                uri, text, left.count("\n", 0, left_start),
                dataclasses.replace(sources, budget=extra), documents,
                self._count_with(engine), cursor=offset, widest_line=widest_line)
        request = policy.request(
            left, right, left_start=left_start, context_files=context.files,
            context_budget=context.budget if extra else 0, repo=context.repo,
            path=context.path)
        return Planned(request, policy, (uri, digest(left), digest(right), policy), context)

