"""What an editor asks for at a cursor: the budgets and stopping rules of inline suggestions.

The language server resolves its settings into these requests, and ``seam eval --policy ide``
runs the very same ones over the dev set, so the evaluation measures what users get.

* **Mid-line** (text on the cursor's line): one statement that ends with its line: the decode
  stops where the model ends the line and the file parses, however many tokens are left.
* **Empty line**: a block; the server answers with its first line that parses and goes on
  writing the rest into its suggestion cache, ready when the user accepts.

Budgets suit the bundled 1.5B model on a laptop CPU; a long time budget costs no
responsiveness, since the next keystroke cancels a decode within one step.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Any

from fim.api import CompletionRequest
from fim.options import Mode, Scope

#: "auto" context (prompt plus middle, in tokens) on a CPU; on a GPU the model's whole window.
#: Prompts keep a stable start per document, so most of the left context comes from the
#: model's cache and a long context costs little per request.
CPU_CONTEXT_TOKENS = 2048
#: The right context's share of a prompt, in tokens: what every request, a keystroke's
#: included, runs again after the cached left text.  benchmarks/prompt_layouts.py
#: (docs/latency.md) measured 64 tokens as good as 256 on the dev cases.  32 were as good on
#: fixed prompts but lost empty lines in the server's paired run (docs/usefulness.md, "The
#: right side's share"): kept at 64.
RIGHT_TOKENS = 64
#: Left-context tokens of the first request in a region of a file the cache does not hold
#: (the server widens the window in idle time).  benchmarks/usefulness.py measured 128 as
#: good as 256 on 72 project cases (docs/usefulness.md, "The first window at a new place")
#: at 40% fewer prompt tokens, which is what a new place waits for.
LEFT_FIRST_TOKENS = 128
#: The part of any context kept for the prompt (FIM sentinels plus a few lines around the
#: cursor) whatever the token budget asks.
MIN_PROMPT_TOKENS = 32


class CursorKind(enum.StrEnum):
    MID_LINE = "mid_line"
    EMPTY_LINE = "empty_line"


def cursor_kind(line_before: str, line_after: str) -> CursorKind:
    """Empty line when the cursor's line holds only whitespace on both sides."""
    if not line_before.strip() and not line_after.strip():
        return CursorKind.EMPTY_LINE
    return CursorKind.MID_LINE


@dataclass(frozen=True)
class EditorPolicy:
    """Everything an editor's request asks of the decoder besides the text: scope, token and
    time budgets, how the decode stops, mode and context sizes.

    One record from the settings to the decoder: ``POLICIES`` holds the "auto" policy of each
    kind of cursor, the server's planner resolves its settings over it (``lsp_server.
    request_plan.policy_for``), and :meth:`request` makes the :class:`CompletionRequest` the
    decoder runs.
    """

    scope: Scope
    max_tokens: int
    #: ``None``: no time budget (the evaluation, where every case runs to its end)
    time_budget_ms: int | None
    #: the middle ends with its line (mid-line cursors)
    line_stop: bool
    #: answer at the first line end where the file parses, keep decoding (empty lines)
    early: bool
    kind: CursorKind
    mode: Mode = Mode.CONSTRAINED
    top_k: int = 50
    #: prompt plus middle, in tokens (``None``: the model's whole window)
    context_tokens: int | None = CPU_CONTEXT_TOKENS
    right_tokens: int | None = RIGHT_TOKENS

    def request(self, left: str, right: str, **prompt: Any) -> CompletionRequest:
        """The request at a cursor between ``left`` and ``right``; ``prompt`` holds the
        prompt's layout (``left_start``, the project context: ``CompletionRequest``'s
        fields of those names)."""
        return CompletionRequest(
            left, right, mode=self.mode, max_tokens=self.max_tokens, top_k=self.top_k,
            scope=self.scope, temperature=0.0, time_budget_ms=self.time_budget_ms,
            context_tokens=self.context_tokens, right_tokens=self.right_tokens,
            line_stop=self.line_stop, **prompt)


MID_LINE = EditorPolicy(Scope.STATEMENT, 32, 10_000, line_stop=True, early=False,
                        kind=CursorKind.MID_LINE)
EMPTY_LINE = EditorPolicy(Scope.BLOCK, 96, 20_000, line_stop=False, early=True,
                          kind=CursorKind.EMPTY_LINE)
POLICIES = {CursorKind.MID_LINE: MID_LINE, CursorKind.EMPTY_LINE: EMPTY_LINE}


def cursor_line(text: str, offset: int) -> tuple[str, str]:
    """The line of ``text`` that holds ``offset``, split there: (before, after) the cursor."""
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    return text[start:offset], text[offset:] if end < 0 else text[offset:end]


def auto_context(device_type: str) -> int | None:
    """The "auto" context on a device: ``CPU_CONTEXT_TOKENS`` on a CPU; ``None`` (the
    model's whole window) on a GPU, where a long prompt costs little."""
    return CPU_CONTEXT_TOKENS if device_type == "cpu" else None


def known_context(context_tokens: int | None, device_type: str | None,
                  model_window: int | None) -> int | None:
    """The context (prompt plus middle, in tokens) requests get, where it is known:
    ``context_tokens`` (``None``: "auto" for the device), capped by the model's window.
    ``device_type`` and ``model_window`` are ``None`` while no model is loaded."""
    context = context_tokens
    if context is None and device_type is not None:
        context = auto_context(device_type)
    if model_window is not None:
        context = min(context or model_window, model_window)
    return context


def auto_policy(line_before: str, line_after: str, *, device_type: str = "cpu",
                context_tokens: int | None = None,
                model_window: int | None = None) -> EditorPolicy:
    """The "auto" policy at a cursor whose line reads ``line_before|line_after``: the one
    definition of "auto", which the server's planner resolves its settings over (``lsp_server.
    request_plan.policy_for``) and ``seam eval --policy ide`` runs as it is.

    The kind of cursor picks the budgets (``POLICIES``); ``context_tokens`` is the context
    asked for (``None``: "auto" for ``device_type``). The token budget never crowds the
    prompt out of a known context (``MIN_PROMPT_TOKENS`` stay for it).
    """
    auto = POLICIES[cursor_kind(line_before, line_after)]
    max_tokens = auto.max_tokens
    known = known_context(context_tokens, device_type, model_window)
    if known is not None:
        max_tokens = max(1, min(max_tokens, known - MIN_PROMPT_TOKENS))
    # A context asked for (or "auto" on a CPU) never exceeds the model's window: the engine
    # cuts every prompt to its window anyway, and the server's planner, which places prompt
    # starts and held windows by this budget, would place them where the engine cuts them
    # away (a model with a 1,024-token window planned for 2,048 never reused its prompts).
    # "auto" on a GPU stays ``None``: the whole window, unplanned.
    context = context_tokens or auto_context(device_type)
    if context is not None and model_window is not None:
        context = min(context, model_window)
    return replace(auto, max_tokens=max_tokens, context_tokens=context)


def policy_at(left: str, right: str) -> EditorPolicy:
    """The "auto" policy for a cursor between ``left`` and ``right`` (a model on a CPU)."""
    return auto_policy(cursor_line(left, len(left))[0], cursor_line(right, 0)[1])


def editor_request(left: str, right: str, *, mode: Mode | str = Mode.CONSTRAINED, top_k: int = 50,
                   context_tokens: int | None = CPU_CONTEXT_TOKENS,
                   right_tokens: int | None = RIGHT_TOKENS, left_start: int = 0,
                   time_budget_ms: int | None = None) -> CompletionRequest:
    """The request an editor makes at this cursor under the default ("auto") settings."""
    policy = replace(policy_at(left, right), mode=Mode(mode), top_k=top_k,
                     context_tokens=context_tokens, right_tokens=right_tokens,
                     time_budget_ms=time_budget_ms)
    return policy.request(left, right, left_start=left_start)
