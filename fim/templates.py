"""Fill-in-the-middle prompt templates per model family, and the context budget.

A template names the family's sentinel tokens (prefix / suffix / middle, in the
prefix-suffix-middle order every supported family was trained with) and the tokens that end a
FIM middle.  Stop tokens come from the template, not only from the model's
``generation_config``: Qwen2.5-Coder ends a middle with ``<|endoftext|>`` while its config names
``<|im_end|>``.

The context budget keeps the prompt inside the model's window: the left context is cut at a line
start from the front and the right context at a line end from the back, sharing the room by a
configurable left share.  The constraint still sees the full contexts; only the prompt shrinks
(``docs/DESIGN.md``, "Windowing", says why this cut and the constraint's windows are separate).
"""

from __future__ import annotations

import enum
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fim.lru import LRU

if TYPE_CHECKING:
    from fim.tokenizer import TextTokenizer


@dataclass(frozen=True)
class FimTemplate:
    """Sentinel tokens and stop tokens of one model family."""

    name: str
    prefix: str
    suffix: str
    middle: str
    stops: tuple[str, ...]
    bos: bool = False  # prepend the tokenizer's BOS token
    left_lead: str = ""  # text glued before the left context (CodeLlama's leading space)
    #: repository-level tokens the family was trained with (project context before the file)
    repo_name: str | None = None
    file_sep: str | None = None


@dataclass(frozen=True)
class ContextFile:
    """Text from elsewhere in the project for the prompt: a file or part of one."""

    path: str  # as the model sees it: relative to the workspace, "/" separated
    text: str


TEMPLATES: dict[str, FimTemplate] = {
    t.name: t
    for t in (
        FimTemplate("santacoder", "<fim-prefix>", "<fim-suffix>", "<fim-middle>",
                    ("<|endoftext|>",)),
        FimTemplate("starcoder", "<fim_prefix>", "<fim_suffix>", "<fim_middle>",
                    ("<|endoftext|>", "<file_sep>"), repo_name="<repo_name>",
                    file_sep="<file_sep>"),
        FimTemplate("qwen2.5-coder", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>",
                    ("<|endoftext|>", "<|fim_pad|>", "<|file_sep|>", "<|repo_name|>",
                     "<|im_end|>"), repo_name="<|repo_name|>", file_sep="<|file_sep|>"),
        FimTemplate("deepseek-coder", "<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>",
                    ("<｜end▁of▁sentence｜>", "<|EOT|>"), bos=True),
        FimTemplate("codellama", "▁<PRE>", "▁<SUF>", "▁<MID>", ("▁<EOT>", "</s>"), bos=True,
                    left_lead=" "),
    )
}


def token_id(tokenizer, token: str) -> int | None:
    """The id of ``token`` as a single vocabulary entry, or ``None``."""
    return tokenizer.token_id(token)


def detect_template(tokenizer, override: str | None = None) -> FimTemplate:
    """The template whose sentinels the tokenizer has (or ``override`` by name)."""
    if override is not None:
        try:
            return TEMPLATES[override]
        except KeyError:
            raise ValueError(
                f"unknown FIM template {override!r}; known: {', '.join(TEMPLATES)}"
            ) from None
    for template in TEMPLATES.values():
        sentinels = (template.prefix, template.suffix, template.middle)
        if all(token_id(tokenizer, t) is not None for t in sentinels):
            return template
    raise ValueError(
        "the tokenizer has no known fill-in-the-middle tokens "
        f"(looked for the {', '.join(TEMPLATES)} templates); pass a template explicitly"
    )


@dataclass(frozen=True)
class Prompt:
    """Token ids of a FIM prompt and how the contexts were cut to fit."""

    ids: list[int]
    left_chars_dropped: int  # characters cut from the front of the left context
    right_chars_dropped: int  # characters cut from the back of the right context
    healed: str  # characters removed from the end of the left context (token healing)
    project_tokens: int = 0  # tokens of project context before the file


class PromptOrder(enum.StrEnum):
    """Where the contexts go in the prompt.

    ``psm``: ``<prefix> L <suffix> R <middle>``, the order every supported family was trained
    with; each keystroke changes the end of ``L`` and so everything after it.
    ``psm-line``: the cursor's line before the cursor moves after ``<middle>``, as the start
    of the middle the model continues (llama.cpp's ``/infill`` does this with its ``prompt``
    field): ``<prefix> L' <suffix> R <middle> line``, where ``L'`` ends with the previous
    line.  Typing on a line changes only the tokens after ``<middle>``.
    ``spm``: ``<suffix> R <prefix> L <middle>``: typing only appends, but models trained on
    PSM alone read it less well.  ``benchmarks/prompt_layouts.py`` measures all three.
    """

    PSM = "psm"
    PSM_LINE = "psm-line"
    SPM = "spm"


class PromptTooLong(ValueError):
    """The model window cannot hold the sentinels plus the generation budget."""


def _encode(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text) if text else []


#: Characters per token assumed when a long context is cut before it is tokenized: well above
#: what source code averages (3-4), and doubled whenever the cut text still fits the budget,
#: so the cut never costs context; it only spares tokenizing megabytes the window cannot hold.
_CHARS_PER_TOKEN = 8


def _encode_tail(tokenizer, text: str, budget: int) -> tuple[list[int], int]:
    """Tokens of ``text``, or of a suffix from a line start holding more than ``budget`` tokens.

    Returns the ids and the number of characters cut from the front.
    """
    cap = max(1, budget) * _CHARS_PER_TOKEN
    while len(text) > cap:
        start = text.find("\n", len(text) - cap) + 1 or len(text) - cap
        ids = _encode(tokenizer, text[start:])
        if len(ids) > budget:
            return ids, start
        cap *= 2
    return _encode(tokenizer, text), 0


def _encode_head(tokenizer, text: str, budget: int) -> tuple[list[int], int]:
    """Tokens of ``text``, or of a prefix ending a line holding more than ``budget`` tokens.

    Returns the ids and the number of characters cut from the end.
    """
    cap = max(1, budget) * _CHARS_PER_TOKEN
    while len(text) > cap:
        end = text.rfind("\n", 0, cap) + 1 or cap
        ids = _encode(tokenizer, text[:end])
        if len(ids) > budget:
            return ids, len(text) - end
        cap *= 2
    return _encode(tokenizer, text), 0


def _longest_fit(tokenizer, texts: Callable[[int], str], count: int,
                 budget: int) -> tuple[list[int], int] | None:
    """The ids and index of the first of ``texts(0..count-1)`` that fits ``budget`` tokens.

    The texts run from longest to shortest, and a shorter one never has more tokens, so a
    binary search finds the longest that fits.  ``None`` when none does.
    """
    lo, hi, best = 0, count - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        ids = _encode(tokenizer, texts(mid))
        if len(ids) <= budget:
            best, hi = (ids, mid), mid - 1
        else:
            lo = mid + 1
    return best


def _fit_left(tokenizer, left: str, budget: int) -> tuple[list[int], int]:
    """Tokens of the longest suffix of ``left`` starting at a line start that fits ``budget``.

    Returns the ids and the number of characters left out.
    """
    ids = _encode(tokenizer, left)
    if len(ids) <= budget:
        return ids, 0
    starts = [m.end() for m in re.finditer("\n", left) if m.end() < len(left)]
    found = _longest_fit(tokenizer, lambda i: left[starts[i]:], len(starts), budget)
    if found is not None:
        return found[0], starts[found[1]]
    # No line start fits: fall back to a token boundary inside the last line.
    ids = ids[-budget:] if budget > 0 else []
    kept = tokenizer.decode(ids) if ids else ""
    return ids, len(left) - len(kept)


def _fit_right(tokenizer, right: str, budget: int) -> tuple[list[int], int]:
    """Tokens of the longest prefix of ``right`` ending a line that fits ``budget``.

    Returns the ids and the number of characters left out.
    """
    ids = _encode(tokenizer, right)
    if len(ids) <= budget:
        return ids, 0
    ends = [m.end() for m in re.finditer("\n", right)][::-1]
    found = _longest_fit(tokenizer, lambda i: right[:ends[i]], len(ends), budget)
    if found is not None:
        return found[0], len(right) - ends[found[1]]
    ids = ids[:budget] if budget > 0 else []
    kept = tokenizer.decode(ids) if ids else ""
    return ids, len(right) - len(kept)


def project_context(tokenizer, template: FimTemplate, files: Sequence[ContextFile],
                    budget: int, repo: str = "", path: str | None = None) -> list[int]:
    """Ids of the project context and the current file's header, at most ``budget`` tokens.

    In the family's repository format when it has one (``<|repo_name|>`` name, then per file
    ``<|file_sep|>`` path and text, then ``<|file_sep|>`` and the current file's path before
    the FIM prompt); else as plain text with ``# path`` headers.  Files go in the given order
    (callers put what changes least first, so the model's cache keeps it) and are left out
    whole when the budget runs out, except that the first file that no longer fits is cut at
    a line end.
    """
    if budget <= 0 or (not files and not path):
        return []
    sep = token_id(tokenizer, template.file_sep) if template.file_sep else None
    name = token_id(tokenizer, template.repo_name) if template.repo_name else None
    out: list[int] = []
    if name is not None and sep is not None and repo:
        out += [name] + _encode(tokenizer, repo + "\n")
    tail = ([sep] + _encode(tokenizer, path + "\n")) if (sep is not None and path) else []
    room = budget - len(out) - len(tail)
    for f in files:
        if room <= 0:
            break
        head = [sep] if sep is not None else []
        body = _encode(tokenizer, (f"{f.path}\n" if sep is not None else f"# {f.path}\n")
                       + f.text.rstrip("\n") + "\n")
        if len(head) + len(body) > room:
            text = f.text.rstrip("\n") + "\n"
            keep, _ = _fit_right(tokenizer, text, max(0, room - len(head) - 8))
            if len(keep) < 16:
                break
            body = _encode(tokenizer, (f"{f.path}\n" if sep is not None else f"# {f.path}\n")
                           ) + keep
        out += head + body
        room -= len(head) + len(body)
    if len(out) + len(tail) > budget:
        return tail if len(tail) <= budget else []
    return out + tail


class ContextIds:
    """The project context's ids, remembered by content, for one engine (its tokenizer and
    template): an editor sends the same context with every request, and tokenizing it each
    time would cost milliseconds.  Prompts are built on callers' threads too, so the memory
    has its own lock."""

    def __init__(self, capacity: int = 16) -> None:
        self._ids: LRU[tuple, list[int]] = LRU(capacity)
        self._lock = threading.Lock()

    def get(self, tokenizer: TextTokenizer, template: FimTemplate,
            files: Sequence[ContextFile], budget: int, repo: str = "",
            path: str | None = None) -> list[int]:
        """``project_context(...)``'s ids, from memory when these arguments were seen."""
        if budget <= 0 or (not files and not path):
            return []
        key = (tuple(files), budget, repo, path)
        with self._lock:
            ids = self._ids.get(key)
        if ids is None:
            ids = project_context(tokenizer, template, files, budget, repo, path)
            with self._lock:
                self._ids.put(key, ids)
        return ids

    def clear(self) -> None:
        """Forget every context (the engine's tokenizer changed: its ids would be stale)."""
        with self._lock:
            self._ids.clear()


def heal_split(tokenizer, left_ids: list[int], left: str) -> tuple[list[int], str]:
    """Back the left context off by its last token when that token could merge further.

    Returns the shortened ids and the removed characters, which generation must reproduce
    first.  Nothing is removed when the decoded remainder is not an exact prefix of ``left``
    (a token boundary inside a multi-byte character) or when the left context is empty.
    """
    if not left_ids:
        return left_ids, ""
    kept = tokenizer.decode(left_ids[:-1]) if len(left_ids) > 1 else ""
    if not left.startswith(kept) or len(kept) >= len(left):
        return left_ids, ""
    return left_ids[:-1], left[len(kept):]


def build_prompt(
    tokenizer: TextTokenizer,
    template: FimTemplate,
    left: str,
    right: str,
    *,
    window: int,
    reserve: int,
    left_share: float = 0.75,
    heal: bool = True,
    right_budget: int | None = None,
    order: PromptOrder = PromptOrder.PSM,
    left_start: int = 0,
    context: Sequence[int] = (),
) -> Prompt:
    """The FIM prompt for ``left``/``right`` fitted into ``window - reserve`` tokens.

    ``right_budget`` caps the right context's tokens (a short right window is cheap to
    recompute when the user types); room it leaves goes to the left context.  ``left_start``
    leaves out the left context before that offset (a caller that keeps the start of the
    prompt stable across requests, so the model's cache serves it); what remains is still
    cut further when it does not fit.  ``context`` (ids from ``project_context``) goes first,
    before the FIM sentinels, and its tokens count against the window.

    In steps: the frame (sentinels, BOS and project context, and the room they leave), the
    two contexts fitted into that room, token healing, and the ids in ``order``.
    """
    if not 0.0 <= left_share <= 1.0:
        raise ValueError("left_share must lie between 0 and 1")
    sentinels, head, room = _frame(tokenizer, template, window, reserve, context)
    if not 0 <= left_start <= len(left):
        raise ValueError("left_start must lie within the left context")
    left_text = template.left_lead + left[left_start:]
    left_ids, left_dropped, right_ids, right_dropped = _fit_contexts(
        tokenizer, left_text, right, room, right_budget, left_share)
    kept_left = left_text[left_dropped:]
    healed = ""
    if heal:
        healed_ids, healed = heal_split(tokenizer, left_ids, kept_left)
        if len(healed) <= len(left) - left_start:  # never retype the template's lead
            left_ids = healed_ids
        else:
            healed = ""
    ids = _arrange(tokenizer, order, head, sentinels, left_ids, right_ids, kept_left, healed)
    dropped = left_start + max(0, left_dropped - len(template.left_lead))
    return Prompt(ids, dropped, right_dropped, healed, len(context))


def _frame(tokenizer: TextTokenizer, template: FimTemplate, window: int, reserve: int,
           context: Sequence[int]) -> tuple[list[int], list[int], int]:
    """The sentinel ids (prefix, suffix, middle), the ids before them (BOS, the project
    context) and the room they and ``reserve`` leave in ``window`` for the two contexts."""
    marks = (template.prefix, template.suffix, template.middle)
    sentinels = [token_id(tokenizer, t) for t in marks]
    if None in sentinels:
        raise ValueError(f"the tokenizer lacks the {template.name} template's sentinel tokens")
    head = [tokenizer.bos_token_id] if template.bos and tokenizer.bos_token_id is not None else []
    head = head + list(context)
    room = window - reserve - len(sentinels) - len(head)
    if room < 1:
        raise PromptTooLong(
            f"the model window ({window} tokens) cannot hold the prompt sentinels and "
            f"{reserve} generated tokens; lower --max-tokens"
        )
    return sentinels, head, room


def _fit_contexts(tokenizer: TextTokenizer, left_text: str, right: str, room: int,
                  right_budget: int | None, left_share: float
                  ) -> tuple[list[int], int, list[int], int]:
    """``(left_ids, left_dropped, right_ids, right_dropped)``: both contexts in at most
    ``room`` tokens, the left cut at a line start from the front and the right at a line end
    from the back. ``right_budget`` caps the right side; when both need more, ``left_share``
    splits the room, and room one side does not need goes to the other."""
    # Neither side can use more than the whole room (the right side more than its own
    # budget), so neither is tokenized much past it.
    left_ids, left_dropped = _encode_tail(tokenizer, left_text, room)
    right_cap = room if right_budget is None else max(0, min(room, right_budget))
    right_ids, right_dropped = _encode_head(tokenizer, right, right_cap)
    if right_budget is not None and len(right_ids) > right_budget:
        kept = right[: len(right) - right_dropped]
        right_ids, cut = _fit_right(tokenizer, kept, right_budget)
        right_dropped += cut
    if len(left_ids) + len(right_ids) > room:
        left_budget = int(room * left_share)
        right_budget = room - left_budget
        # Give room one side does not need to the other.
        if len(right_ids) < right_budget:
            left_budget = room - len(right_ids)
        elif len(left_ids) < left_budget:
            right_budget = room - len(left_ids)
        if len(left_ids) > left_budget:
            left_ids, cut = _fit_left(tokenizer, left_text[left_dropped:], left_budget)
            left_dropped += cut
        if len(right_ids) > right_budget:
            kept = right[: len(right) - right_dropped]
            right_ids, cut = _fit_right(tokenizer, kept, right_budget)
            right_dropped += cut
    return left_ids, left_dropped, right_ids, right_dropped


def _arrange(tokenizer: TextTokenizer, order: PromptOrder, head: list[int],
             sentinels: list[int], left_ids: list[int], right_ids: list[int], kept_left: str,
             healed: str) -> list[int]:
    """The prompt's ids in ``order`` (see ``PromptOrder``); ``kept_left`` is the left text
    that ``left_ids`` encode, ``healed`` what healing took off its end."""
    prefix, suffix, middle = sentinels
    if order is PromptOrder.SPM:
        return head + [suffix] + right_ids + [prefix] + left_ids + [middle]
    if order is PromptOrder.PSM_LINE:
        cut = kept_left.rfind("\n") + 1  # the cursor's line starts here
        if not cut:
            return head + [prefix] + [suffix] + right_ids + [middle] + left_ids
        # The ids of the earlier lines stand as they are; the line goes after <middle>.
        before = _encode(tokenizer, kept_left[:cut])
        line = left_ids[len(before):] if left_ids[:len(before)] == before else \
            _encode(tokenizer, kept_left[cut:len(kept_left) - len(healed)])
        return head + [prefix] + before + [suffix] + right_ids + [middle] + line
    return head + [prefix] + left_ids + [suffix] + right_ids + [middle]


def stop_ids(tokenizer, template: FimTemplate) -> set[int]:
    """Ids that end a middle: the template's stops plus the tokenizer's EOS."""
    out = {i for i in (token_id(tokenizer, t) for t in template.stops) if i is not None}
    if tokenizer.eos_token_id is not None:
        out.add(tokenizer.eos_token_id)
    return out
