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
#: The right context's share of a prompt, in tokens: what a keystroke on a new line (or a
#: cursor move) reruns.  benchmarks/prompt_layouts.py (docs/latency.md) measured 64 tokens
#: as good as 256 on the dev cases (same exact match, edit similarity 0.270 vs 0.279, same
#: share that parse) at half the tokens per keystroke.
RIGHT_TOKENS = 64
#: Left-context tokens of the first request in a region of a file the cache does not hold
#: (the server widens the window in idle time).  benchmarks/usefulness.py measured 128 as
#: good as 256 on 72 project cases (docs/usefulness.md, "The first window at a new place")
#: at 40% fewer prompt tokens, which is what a new place waits for.
LEFT_FIRST_TOKENS = 128


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
    kind of cursor, the server resolves its settings over it (``lsp_server.settings.
    policy_for``), and :meth:`request` makes the :class:`CompletionRequest` the decoder runs.
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


def policy_at(left: str, right: str) -> EditorPolicy:
    """The "auto" policy for a cursor between ``left`` and ``right``."""
    line_before = left[left.rfind("\n") + 1:]
    line_after = right.split("\n", 1)[0]
    return POLICIES[cursor_kind(line_before, line_after)]


def editor_request(left: str, right: str, *, mode: Mode | str = Mode.CONSTRAINED, top_k: int = 50,
                   context_tokens: int | None = CPU_CONTEXT_TOKENS,
                   right_tokens: int | None = RIGHT_TOKENS, left_start: int = 0,
                   time_budget_ms: int | None = None) -> CompletionRequest:
    """The request an editor makes at this cursor under the default ("auto") settings."""
    policy = replace(policy_at(left, right), mode=Mode(mode), top_k=top_k,
                     context_tokens=context_tokens, right_tokens=right_tokens,
                     time_budget_ms=time_budget_ms)
    return policy.request(left, right, left_start=left_start)
