"""The records that cross ``fim``'s public seam: a fill-in-the-middle request and its result.

They live apart from ``fim.api`` (the in-process engine) because every engine takes and gives
them (``fim.engine_interface``), the engines over model servers included.
"""

from __future__ import annotations

from dataclasses import dataclass

from fim.alternatives import Alternative, Ranking
from fim.decode_options import DecodeOptions
from fim.languages import Language, by_id
from fim.options import MODES, SCOPES, Mode, Scope, StopReason
from fim.stopping import RIGHT_PROBE_CHARS, at_line_start
from fim.templates import ContextFile, PromptOrder
from quotient.constraint import LanguageMode


@dataclass
class CompletionRequest:
    """One fill-in-the-middle question: the text left and right of the cursor and settings."""

    left: str
    right: str
    mode: Mode | str = Mode.CONSTRAINED
    max_tokens: int = 64
    top_k: int = 50
    scope: Scope | str = Scope.STATEMENT
    temperature: float = 0.0
    time_budget_ms: float | None = None
    seed: int = 0
    #: Prompt plus generation budget in tokens (``None``: the engine's window).  Editors on a
    #: CPU keep it small: prefill costs grow with it, and typing re-runs the right context.
    context_tokens: int | None = None
    #: Cap on the right context's prompt tokens (``None``: share the window by ``left_share``).
    right_tokens: int | None = None
    #: Prompt order (see ``fim.templates.PromptOrder``).
    order: PromptOrder = PromptOrder.PSM
    #: End the middle at the first line end where the file is complete (a mid-line
    #: suggestion that stays on its line); stop reason ``line_end``.
    line_stop: bool = False
    #: Leave the left context before this offset out of the prompt (an editor keeps the
    #: prompt's start stable across requests so the model's cache serves it); 0: fit only.
    left_start: int = 0
    #: Project context before the file (see ``fim.templates.project_context``): files or
    #: parts of files, in the order they go in, at most ``context_budget`` tokens, with the
    #: project's name and the current file's path.
    context_files: tuple[ContextFile, ...] = ()
    context_budget: int = 0
    repo: str = ""
    path: str | None = None
    #: Constrained decoding ends the middle where the model's next tokens would re-write
    #: the right context and the file is complete there (stop ``right_context``), instead
    #: of forcing the model on until something connects (issue 18).
    stop_at_right: bool = True
    #: ... also where the model writes the next line's text on to the cursor's line.
    right_wraps: bool = True
    #: Up to this many distinct complete middles, best first (``CompletionResult.
    #: alternatives``; constrained greedy decoding only): the greedy one and branches off it
    #: where another token was nearly as likely, ranked by ``ranking`` (``fim.alternatives``).
    #: 1: greedy only.  ``middle`` is then the best-ranked one.
    alternatives: int = 1
    ranking: Ranking = Ranking.SUM
    #: The file's language (``fim.languages``: an id such as ``"python"``, ``"go"``; an
    #: editor's ``languageId`` is understood too).  Only a language with a grammar is
    #: constrained and parse-checked; any other is decoded unchecked (mode ``unchecked``).
    language: str = "python"

    @property
    def file_language(self) -> Language:
        """The record of :attr:`language` (an unknown name is an unchecked language)."""
        return by_id(self.language)

    def validate(self) -> None:
        if not isinstance(self.left, str) or not isinstance(self.right, str):
            raise TypeError("left and right must be str")
        if self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r}; expected one of {', '.join(MODES)}")
        if self.scope not in SCOPES:
            raise ValueError(f"unknown scope {self.scope!r}; expected one of {', '.join(SCOPES)}")
        self.mode, self.scope = Mode(self.mode), Scope(self.scope)
        if not isinstance(self.max_tokens, int) or self.max_tokens < 0:
            raise ValueError("max_tokens must be a non-negative integer")
        if not isinstance(self.top_k, int) or self.top_k < 1:
            raise ValueError("top_k must be a positive integer")
        if not self.temperature >= 0:
            raise ValueError("temperature must be >= 0")
        if self.time_budget_ms is not None and not self.time_budget_ms > 0:
            raise ValueError("time_budget_ms must be positive (or None)")
        if self.context_tokens is not None and (
                not isinstance(self.context_tokens, int) or self.context_tokens < 1):
            raise ValueError("context_tokens must be a positive integer (or None)")
        if not isinstance(self.left_start, int) or not 0 <= self.left_start <= len(self.left):
            raise ValueError("left_start must be an offset into left")
        if not isinstance(self.context_budget, int) or self.context_budget < 0:
            raise ValueError("context_budget must be a non-negative integer")
        self.context_files = tuple(self.context_files)
        if self.right_tokens is not None and (
                not isinstance(self.right_tokens, int) or self.right_tokens < 0):
            raise ValueError("right_tokens must be a non-negative integer (or None)")
        self.order = PromptOrder(self.order)
        if not isinstance(self.alternatives, int) or self.alternatives < 1:
            raise ValueError("alternatives must be a positive integer")
        if self.ranking not in tuple(Ranking):
            raise ValueError(f"unknown ranking {self.ranking!r}; expected one of "
                             f"{', '.join(r.value for r in Ranking)}")
        self.ranking = Ranking(self.ranking)
        if not isinstance(self.language, str):
            raise ValueError("language must be a string, e.g. \"python\"")

    @property
    def ranked(self) -> bool:
        """Whether this request searches for alternatives (greedy constrained, more than 1)."""
        return (self.alternatives > 1 and self.mode == Mode.CONSTRAINED
                and self.temperature == 0)

    def decode_options(self, deadline: float | None = None) -> DecodeOptions:
        """The decoding loop's share of this request (``deadline``: a ``time.monotonic()``
        instant, from ``time_budget_ms`` when the request starts)."""
        return DecodeOptions(mode=self.mode, max_tokens=self.max_tokens, top_k=self.top_k,
                             temperature=self.temperature, seed=self.seed,
                             line_stop=self.line_stop, deadline=deadline,
                             right_context=self.right[:RIGHT_PROBE_CHARS]
                             if self.stop_at_right else "",
                             right_wraps=self.right_wraps,
                             right_start=self.right[:RIGHT_PROBE_CHARS],
                             line_start=at_line_start(self.left), trace=self.ranked)


@dataclass
class CompletionResult:
    """The middle (``None`` on failure) and how it was obtained."""

    middle: str | None
    stop: StopReason
    tokens: int
    setup_ms: float
    model_ms: float
    constraint_ms: float
    mode: LanguageMode  # the constraint language's mode; ``NONE`` without a constraint
    decoding: Mode = Mode.CONSTRAINED  # the request's mode
    raw: str = ""  # everything generated (after the healed prefix), before any cut
    parses: bool | None = None  # ast.parse(left + middle + right); None when middle is None
    prompt_tokens: int = 0
    project_tokens: int = 0  # of ``prompt_tokens``: project context before the file
    left_chars_dropped: int = 0
    right_chars_dropped: int = 0
    healed: str = ""
    error: str | None = None
    #: With ``alternatives > 1``: the distinct middles found, best first (``middle`` is the
    #: first); ``tokens``, ``model_ms`` and ``constraint_ms`` then count all the runs.
    alternatives: tuple[Alternative, ...] = ()

    def to_dict(self) -> dict:
        return dict(self.__dict__)
