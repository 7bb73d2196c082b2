"""From a cursor in a document to the completion request the model gets: the one planner of the
server, shared with the benchmarks that measure the server's policy.

A place (a document's text and a cursor in it) is planned once: the :class:`Planned` request is
kept, and the cursor's warm-up, the request there and the prefetch that foresaw it all reuse it
(``RequestPlanner.builds`` counts the plans made). The planner owns everything a plan is made of:

* the **policy** (``policy_for``): the cursor's "auto" policy (``fim.editor_policy.auto_policy``)
  with the user's settings resolved over it; ``settings`` only parses and validates them;
* the **project context**: its sources and budget (``project_sources``, ``project_budget``), the
  collector that picks it (``project.sources``), and the ring of recent edits it reads;
* the prompt's stable start per document (``prompt_anchors``): the project context's tokens come
  out of the left text's share of the window, with a budget fixed per settings, so the start stays
  put whatever the context holds (a cut that moved with every keystroke would empty the model's
  cache each time);
* the **first window** at a new place (``first_window``): as many left tokens as the engine's
  measured prefill speed (``fim.engines.prefill_speed``) runs within ``NEW_PLACE_PREFILL_S``
  (the ``newPlaceMs`` setting: a user who would rather wait longer at a new place for more of
  the file above it), on a ladder of doublings from ``LEFT_FIRST_TOKENS`` (so the noise in the
  speed does not move it): a machine that prefills ten times faster gets the wide window at
  once;
* the **normalisation** of the text the model sees (``text``: no lone surrogates, ``\\n`` line
  breaks); the documents keep their own.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from fim.editor_policy import (
    EMPTY_LINE,
    LEFT_FIRST_TOKENS,
    MID_LINE,
    EditorPolicy,
    auto_policy,
    cursor_line,
)
from fim.engine_interface import CompletionEngine
from fim.engines.prefill_speed import PrefillSpeed
from fim.options import Mode, Scope
from fim.request import CompletionRequest
from lsp_server import text as model_text
from lsp_server.documents import Document, DocumentStore, served
from lsp_server.measures import TokenCount, TokenCounter, WidestLine
from lsp_server.project.recent_edits import EditRing
from lsp_server.project.sources import (
    ContextCollector,
    ContextSources,
    OpenDocument,
    ProjectContext,
)
from lsp_server.prompt_anchors import MAX_CHARS_PER_TOKEN, AnchorPlanner
from lsp_server.settings import (
    CONTEXT_BUDGET_TOKENS,
    GPU_CONTEXT_BUDGET_TOKENS,
    MIN_CONTEXT_BUDGET_TOKENS,
    Settings,
)
from lsp_server.suggestions import digest

#: Seconds of prompt the first request at a new place may run: the rest of the new-place
#: target (p50 1.5 s, docs/latency.md) goes to decoding the middle and checking it.
NEW_PLACE_PREFILL_S = 1.0
#: The first window's rungs: the floor (``LEFT_FIRST_TOKENS``) times a power of this.  A
#: measured speed wavers by a share of itself (the load, the prompts' lengths), so rungs a
#: constant ratio apart are crossed as rarely at any speed; with steps of 64 tokens a quiet
#: two-core machine measured either side of the 128/192 boundary from one session to the next,
#: and two sessions at one cursor ran different windows (docs/usefulness.md, "paired-fresh").
#: Doubling costs a machine between rungs at most half the left tokens it could afford, never
#: latency.
FIRST_WINDOW_RATIO = 2

#: Places whose plan is kept: the cursor's, its widened prompt's, the prefetched next one,
#: and one to spare (each plan holds its request's text: a few, not many, for large files).
PLANS_KEPT = 4


@dataclass(frozen=True)
class Planned:
    """A planned request, its policy, the key under which identical requests share one
    decode, and the project context it carries (``project``)."""

    request: CompletionRequest
    policy: EditorPolicy
    share_key: tuple
    project: ProjectContext

    def without_project(self) -> CompletionRequest:
        """The same request with no project context (the prompt's start stays)."""
        return dataclasses.replace(self.request, context_files=(), context_budget=0,
                                   repo="", path=None)


def device_type(engine: CompletionEngine) -> str:
    """``"cpu"``, ``"cuda"``, ``"metal"`` or ``"remote"``: where the engine's model runs."""
    return engine.runtime.device


def policy_for(settings: Settings, line_before: str, line_after: str,
               device_type: str = "cpu", model_window: int | None = None) -> EditorPolicy:
    """The cursor's "auto" policy (``fim.editor_policy``) with the settings resolved over it,
    for a cursor whose line reads ``line_before|line_after``.

    ``device_type`` is where the model runs (``"cpu"``, ``"cuda"``): it decides the "auto"
    window. An "auto" token budget never crowds the prompt out of a small window.
    """
    auto = auto_policy(line_before, line_after, device_type=device_type,
                       context_tokens=settings.context_tokens, model_window=model_window)
    return replace(
        auto,
        scope=Scope(settings.scope or auto.scope),
        max_tokens=settings.max_tokens or auto.max_tokens,
        time_budget_ms=settings.time_budget_ms or auto.time_budget_ms,
        mode=Mode.CONSTRAINED if settings.constrained else Mode.UNCONSTRAINED,
        top_k=settings.top_k,
    )


def project_sources(settings: Settings, device_type: str = "cpu") -> ContextSources:
    """The project context's sources and budget ("auto" resolved for the device)."""
    budget = settings.context_budget
    if budget is None:
        budget = CONTEXT_BUDGET_TOKENS if device_type == "cpu" else GPU_CONTEXT_BUDGET_TOKENS
    return ContextSources(definitions=settings.context_definitions,
                          open_files=settings.context_open_files,
                          recent_edits=settings.context_recent_edits,
                          similar_code=settings.context_similar_code, budget=budget)


def _room(policy: EditorPolicy) -> int | None:
    """Prompt tokens of the window left for the file and the project context: the window
    less the longest middle of either kind of cursor (one budget for both, so that both
    share a document's prompt start), the right text and the sentinels."""
    if policy.context_tokens is None:
        return None
    longest = max(MID_LINE.max_tokens, EMPTY_LINE.max_tokens, policy.max_tokens)
    return max(16, policy.context_tokens - longest - (policy.right_tokens or 0) - 4)


def project_budget(policy: EditorPolicy, sources: ContextSources,
                   left_first: int = LEFT_FIRST_TOKENS) -> int:
    """Tokens of project context a request gets: the setting, but never so many that the
    left text would hold fewer than ``left_first`` tokens (and none when what is left is
    less than ``MIN_CONTEXT_BUDGET_TOKENS``: a small window is better spent on the file)."""
    if not sources.active:
        return 0
    room = _room(policy)
    if room is None:
        return sources.budget
    budget = min(sources.budget, room - left_first)
    return budget if budget >= MIN_CONTEXT_BUDGET_TOKENS else 0


def first_window(speed: PrefillSpeed | None, right_tokens: int | None, left_max: int,
                 floor: int = LEFT_FIRST_TOKENS, seconds: float = NEW_PLACE_PREFILL_S) -> int:
    """Left tokens of the first request at a new place: the highest rung (``floor`` times a
    power of ``FIRST_WINDOW_RATIO``) within what the measured prefill ``speed`` runs in
    ``seconds`` (the ``newPlaceMs`` setting; "auto": ``NEW_PLACE_PREFILL_S``) less the right
    text and the sentinels, or ``left_max`` (the left share) when the speed affords all of
    it; never fewer than ``floor`` (the constant measured for quality, also used until a
    prefill was measured)."""
    floor = min(floor, left_max)
    runs = speed.tokens_within(seconds) if speed is not None else None
    if runs is None:
        return floor
    affordable = runs - (right_tokens or 0) - 4
    if affordable >= left_max:
        return left_max
    left = floor
    while left * FIRST_WINDOW_RATIO <= affordable:
        left *= FIRST_WINDOW_RATIO
    return left


def new_place_seconds(settings: Settings | None) -> float:
    """The prompt-reading time of a new place's first request: ``newPlaceMs``, or
    ``NEW_PLACE_PREFILL_S`` when "auto"."""
    ms = settings.new_place_ms if settings is not None else None
    return NEW_PLACE_PREFILL_S if ms is None else ms / 1000.0


@dataclass(frozen=True)
class Widening:
    """A higher start for a document's prompt, and the anchors that found it."""

    anchors: AnchorPlanner
    start: int


@dataclass(frozen=True)
class HeldWindow:
    """A document's window from its prompt start to a line end below the cursor
    (``prompt_anchors``' base): the prompt to hold in the model's cache (``request``: no
    right text, unconstrained, never decoded), the anchors it is for and where it lies in
    the model's text."""

    request: CompletionRequest
    anchors: AnchorPlanner
    start: int
    end: int
    #: the request's project context, which every request within the base keeps (a context
    #: chosen again would differ after an edit, and its prompt would share nothing after it)
    project: ProjectContext
    #: the planner's ``workspace`` count when it was planned (``RequestPlanner.hold``)
    workspace: int = 0


def open_documents(documents: Iterable[Document], languages: Sequence[str]
                   ) -> list[OpenDocument]:
    """The open documents of completed languages, as the model sees them, in their order
    (each with its ``fim.languages`` id: the sources keep to the request's language)."""
    return [OpenDocument(d.uri, model_text.for_model(d.text), d.language.id)
            for d in documents if served(languages, d.language_id)]


@dataclass(frozen=True)
class OpenDocuments:
    """A session's open documents of completed languages, listed (as the model sees them)
    only when a plan is made, not when a kept one is reused."""

    store: DocumentStore
    languages: tuple[str, ...]

    def listed(self) -> list[OpenDocument]:
        return open_documents(self.store.all(), self.languages)


#: The open documents of the open-files source, listed or to be listed.
Documents = Sequence[OpenDocument] | OpenDocuments


class RequestPlanner:
    """Plans requests for one session; it keeps each document's prompt start and the plans of
    the last ``PLANS_KEPT`` places.

    ``left_first`` fixes the first window at a new place (by default it follows the engine's
    measured prefill speed: ``first_window``) and ``right_tokens`` the right text's share
    (by default the policy's); benchmarks that measure other values pass them here.
    """

    def __init__(self, collector: ContextCollector | None = None, *,
                 left_first: int | None = None, right_tokens: int | None = None) -> None:
        self.collector = collector
        #: a fixed first window, or ``None``: from the measured speed
        self.fixed_first = left_first
        #: the floor of the first window, and what the project context leaves the left text
        self.left_first = LEFT_FIRST_TOKENS if left_first is None else left_first
        self.right_tokens = right_tokens
        self._anchors: AnchorPlanner | None = None
        self._anchors_for: tuple | None = None  # (engine, left budget) they were made for
        self._counter: tuple[int, TokenCounter] | None = None  # per engine
        self._plans: OrderedDict[tuple, tuple[Settings, CompletionEngine, Planned]] = \
            OrderedDict()
        #: edits and opens per document: a plan is reused only while the other documents
        #: (open files, recent edits) are as they were when it was made
        self._changes: Counter[str] = Counter()
        #: plans made (not reused): what the test of "one plan per place" counts
        self.builds = 0
        #: the base held in the model's cache, and its document (``hold``)
        self._held: tuple[str, HeldWindow] | None = None
        #: workspace changes (``reset``): a base planned before one is not held
        self.workspace = 0

    # ----- what a plan depends on ------------------------------------------------------------

    def forget(self, uri: str) -> None:
        """The document was closed."""
        if self._held is not None and self._held[0] == uri:
            self._held = None
        if self._anchors is not None:
            self._anchors.forget(uri)
        if self.collector is not None:
            self.collector.forget(uri)
        self.changed(uri)

    def changed(self, uri: str) -> None:
        """``uri`` was opened, edited or closed: other documents' plans are made again."""
        self._changes[uri] += 1

    def reset(self) -> None:
        """The workspace changed (a folder came or went): no kept plan is reused, nor the held
        base's project context."""
        self._plans.clear()
        self._held = None
        self.workspace += 1

    def edited(self, ring: EditRing, uri: str, old_text: str, new_text: str,
               first_line: int | None = None, old_end: int | None = None,
               new_text_of_change: str | None = None) -> None:
        """Record an edit of ``uri`` from ``old_text`` to ``new_text`` in the ring of recent
        edits (project context), as the model sees the texts: one ranged change names its
        lines (``first_line``, ``old_end``, the text it put there); else the texts are
        compared."""
        self.changed(uri)
        new = model_text.for_model(new_text)
        if first_line is not None and old_end is not None and new_text_of_change is not None:
            new_end = first_line + len(model_text.for_model(new_text_of_change).split("\n"))
            ring.record(uri, new, first_line, old_end, new_end)
        else:
            ring.record_text_change(uri, model_text.for_model(old_text), new)

    # ----- the parts of a plan ---------------------------------------------------------------

    def anchors(self, engine: CompletionEngine, policy: EditorPolicy, extra: int,
                settings: Settings | None = None) -> AnchorPlanner | None:
        """The per-document prompt starts for this engine, context and extra budget
        (``settings``: the user's, for the new-place time; ``None``: "auto")."""
        room = _room(policy)
        if room is None:
            return None
        budget = max(16, room - extra)
        slides = engine.features.slides_window
        key = (id(engine), budget, slides)
        first = self.first_window(engine, policy, budget, new_place_seconds(settings))
        if self._anchors is None or self._anchors_for != key:
            self._anchors = AnchorPlanner(TokenCount(engine.tokenizer), budget, first,
                                          slides=slides)
            self._anchors_for = key
        else:
            self._anchors.left_first = first  # the anchors placed so far stay
        return self._anchors

    def first_window(self, engine: CompletionEngine, policy: EditorPolicy, left_max: int,
                     seconds: float = NEW_PLACE_PREFILL_S) -> int:
        """Left tokens of the first request at a new place (``first_window`` within
        ``seconds`` of prompt), or the fixed ``left_first`` a benchmark gave."""
        if self.fixed_first is not None:
            return min(left_max, self.fixed_first)
        return first_window(engine.runtime.prefill_speed, policy.right_tokens, left_max,
                            self.left_first, seconds)

    def _count_with(self, engine: CompletionEngine) -> TokenCounter:
        """The engine's token counter, with its memory of counted texts."""
        if self._counter is None or self._counter[0] != id(engine):
            self._counter = (id(engine), TokenCounter(TokenCount(engine.tokenizer)))
        return self._counter[1]

    def policy(self, engine: CompletionEngine, settings: Settings, text: str, offset: int
               ) -> EditorPolicy:
        line_before, line_after = cursor_line(text, offset)
        policy = policy_for(settings, line_before, line_after,
                            device_type=device_type(engine), model_window=engine.window)
        if self.right_tokens is not None:
            policy = dataclasses.replace(policy, right_tokens=self.right_tokens)
        return policy

    def wider(self, engine: CompletionEngine, settings: Settings, uri: str, planned: Planned
              ) -> Widening | None:
        """Where a widened prompt for ``planned`` would start (``prompt_anchors``), or
        ``None`` when it cannot start higher."""
        sources = project_sources(settings, device_type(engine))
        extra = project_budget(planned.policy, sources, self.left_first)
        anchors = self.anchors(engine, planned.policy, extra, settings)
        left = planned.request.left
        start = (anchors.wider(uri, left, len(left), above=planned.request.left_start)
                 if anchors is not None else None)
        return None if anchors is None or start is None else Widening(anchors, start)

    def adopt(self, uri: str, left: str, widening: Widening) -> None:
        """The widened prompt is in the model's cache: requests in ``uri`` start there from
        now on, so its kept plans (made with the narrower start) are made again."""
        widening.anchors.adopt(uri, left, widening.start)
        self._replan(uri)

    def _replan(self, uri: str) -> None:
        for key in [k for k in self._plans if k[0] == uri]:
            del self._plans[key]

    def base(self, engine: CompletionEngine, uri: str, planned: Planned,
             widening: Widening | None = None) -> HeldWindow | None:
        """The document's base to hold after ``planned`` (the widened request, once
        ``widening`` is adopted; without one, the request at the document's start as it is):
        the document from that start on, beyond the cursor, with the request's project context
        (so that the two share their beginning).  ``None`` where the engine holds no prompt,
        nothing follows the cursor, or that base is held already."""
        anchors = widening.anchors if widening is not None else self._anchors
        if not engine.features.holds_prompts or anchors is None:
            return None
        # The request's own texts, as the model sees them (it runs on the event loop: the
        # document is not normalised again), and only the right text a base can reach.
        left = planned.request.left
        model = left + planned.request.right[:anchors.left_max * MAX_CHARS_PER_TOKEN]
        start = planned.request.left_start
        held = anchors.base
        if (widening is None and held is not None and held.uri == uri and held.offset == start
                and model.startswith(held.text, start)):
            return None
        end = anchors.base_end(model, start)
        if end <= len(left):
            return None
        request = dataclasses.replace(planned.request, left=model[:end], right="",
                                      mode=Mode.UNCONSTRAINED, alternatives=1)
        return HeldWindow(request, anchors, start, end, planned.project, self.workspace)

    def hold(self, uri: str, base: HeldWindow) -> None:
        """``base`` is held in the model's cache: a cursor within it keeps its start and its
        project context; not one planned before the workspace changed (its prefill ran
        meanwhile), whose project context may lack a folder that came or read one that
        left."""
        if base.workspace != self.workspace:
            return
        base.anchors.hold(uri, base.request.left, base.start, base.end)
        self._held = (uri, base)
        self._replan(uri)

    def _held_project(self, uri: str, left: str, left_start: int,
                      anchors: AnchorPlanner | None) -> ProjectContext | None:
        """The held base's project context, for a request at the end of ``left`` that
        starts where the base does and whose text is still the base's; else ``None``."""
        if self._held is None or anchors is None:
            return None
        held_uri, base = self._held
        if (held_uri != uri or base.anchors is not anchors or base.start != left_start
                or not anchors.within_base(uri, left, left_start, len(left))):
            return None
        return base.project

    # ----- plans -----------------------------------------------------------------------------

    def _elsewhere(self, uri: str) -> int:
        """Changes to what a plan in ``uri`` reads of other documents (opened, closed, edited,
        visited, their recent edits): a kept plan is reused only while this stays."""
        counts = [self._changes]
        if self.collector is not None:
            counts += [self.collector.changes, self.collector.ring.changes]
        return sum(c.total() - c[uri] for c in counts)

    def plan(self, engine: CompletionEngine, settings: Settings, uri: str, text: str,
             offset: int, documents: Documents = (), *, left_start: int | None = None,
             language: str = "python") -> Planned:
        """The request a completion at ``offset`` of ``text`` (document ``uri``) makes: the
        kept plan of that place when there is one, else a new one (kept).

        ``documents`` are the open documents for the open-files source, in the order they
        were opened.  ``left_start`` overrides the prompt's start (a widened anchor being
        warmed); by default it is the document's anchor.  ``language``: the document's
        (``fim.languages`` id), which the request and the project context keep to.
        """
        key = self._key(engine, settings, uri, text, offset, left_start, language)
        kept = self._plans.get(key)
        if kept is not None and kept[0] is settings and kept[1] is engine:
            self._plans.move_to_end(key)
            return kept[2]
        if isinstance(documents, OpenDocuments):
            documents = documents.listed()
        planned = self._build(engine, settings, uri, text, offset, documents, left_start,
                              language)
        self._plans[key] = (settings, engine, planned)
        while len(self._plans) > PLANS_KEPT:
            self._plans.popitem(last=False)
        return planned

    def is_kept(self, engine: CompletionEngine, settings: Settings, uri: str, text: str,
                offset: int, language: str = "python") -> bool:
        """Whether :meth:`plan` keeps this place's plan (it would cost nothing)."""
        return self._key(engine, settings, uri, text, offset, None, language) in self._plans

    def _key(self, engine: CompletionEngine, settings: Settings, uri: str, text: str,
             offset: int, left_start: int | None, language: str) -> tuple:
        # The text by its length and hash (cached on the string: the document's text is hashed
        # once per edit), so that no old text is kept alive by the key.
        return (uri, len(text), hash(text), offset, left_start, self._elsewhere(uri),
                id(settings), id(engine), language)

    def _build(self, engine: CompletionEngine, settings: Settings, uri: str, text: str,
               offset: int, documents: Sequence[OpenDocument], left_start: int | None,
               language: str = "python") -> Planned:
        self.builds += 1
        policy = self.policy(engine, settings, text, offset)
        sources = project_sources(settings, device_type(engine))
        extra = project_budget(policy, sources, self.left_first)
        # The model gets the text without lone surrogates and with \n line breaks; the
        # document keeps its own text (see `text`).
        left = model_text.for_model(text[:offset])
        right = model_text.for_model(text[offset:])
        anchors = self.anchors(engine, policy, extra, settings)
        if left_start is None:
            left_start = anchors.left_start(uri, left, len(left)) if anchors is not None else 0
        project = self._held_project(uri, left, left_start, anchors)
        if project is None and self.collector is None:
            project = ProjectContext()
        elif project is None:
            # Where the server would widen this prompt to (found only if a source asks).
            widest_line = (WidestLine(anchors.fit, left, anchors.left_max)
                           if anchors is not None else WidestLine(None, left, 0))
            project = self.collector.collect(
                uri, text, left.count("\n", 0, left_start),
                dataclasses.replace(sources, budget=extra), documents,
                self._count_with(engine), cursor=offset, widest_line=widest_line,
                language=language)
        request = policy.request(
            left, right, left_start=left_start, context_files=project.files,
            context_budget=project.budget if extra else 0, repo=project.repo,
            path=project.path, language=language)
        return Planned(request, policy, (uri, digest(left), digest(right), policy), project)
