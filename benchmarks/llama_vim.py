"""A client that asks llama-server for a suggestion the way llama.vim does, and shows what
llama.vim would show: the anchor Seam is compared with on the same cursors (issue 18).

What it reproduces, from llama.vim's ``autoload/llama.vim`` (the plugin's defaults):

* the local context (``s:fim_ctx_local``): 256 lines above the cursor's line, the text before
  the cursor on its line sent as ``prompt``, the rest of the line and 64 lines below as
  ``input_suffix``; on a line holding only whitespace the line's own text is left out and the
  indentation is 0 (the model writes the line from its start);
* the request (``llama#fim``): ``n_predict`` 128, ``n_indent`` = the line's indentation,
  ``top_k`` 40, ``top_p`` 0.90, samplers ``top_k, top_p, infill``, the prompt cache, and the
  time limits: 500 ms for the prompt (the server does not implement it) and for generation
  250 ms on the first request at a place (1000 ms, the setting, only for the speculative
  follow-up after a suggestion is shown, which this client does not model);
* automatic completion does not fire when more than 8 characters follow the cursor on its
  line (``max_line_suffix``);
* the ring of extra context (``s:pick_chunk``, ``s:ring_update``, ``s:chunk_sim``): chunks
  of lines picked on entering or leaving a buffer (the 64 lines around its cursor, a random
  half-size window when longer), and at a request far (> 32 lines) from the last one, a
  chunk from 1024..256 lines above and one from 64..128 lines below; queued, moved into the
  ring (at most 16) once per second while the user is in normal mode; before a request,
  chunks too similar (> 0.5) to a random chunk around the cursor are dropped;
* what is shown (``s:fim_render``): trailing empty lines dropped, on a whitespace-only line
  the model's leading whitespace taken as the line's indentation, and nothing when the
  suggestion is empty, only whitespace, the text after the cursor again, or the next
  non-blank line(s) again.

The pure parts (context, request body, ring, rendering) are functions and small classes that
tests check without a server; ``LlamaVimClient`` ties them to a ``LlamaServer``.  One
deviation, for repeatability: each request carries a seed drawn from the client's seeded
generator (llama.vim leaves the seed to the server, which draws one per request).
"""

from __future__ import annotations

import json
import random
import re
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class LlamaVimSettings:
    """llama.vim's defaults (``s:default_config``) and the two choices a benchmark makes."""

    n_prefix: int = 256
    n_suffix: int = 64
    n_predict: int = 128
    stop_strings: tuple[str, ...] = ()
    t_max_prompt_ms: int = 500
    t_max_predict_ms: int = 1000
    #: ``llama#fim`` lowers the generation limit to this on the first request at a place
    first_predict_ms: int = 250
    max_line_suffix: int = 8
    ring_n_chunks: int = 16
    ring_chunk_size: int = 64
    ring_scope: int = 1024
    #: ``s:pick_chunk`` keeps at most this many queued chunks (a constant in the plugin)
    ring_queue: int = 16
    #: False: the requests carry no time limits (0), so that quality does not depend on load
    time_limits: bool = True
    #: True: automatic completion (``auto_fim``), which skips lines with a long suffix;
    #: False: the user pressed the trigger key
    auto: bool = True
    #: True: the most likely token at every step (top-k 1) instead of llama.vim's sampling;
    #: the model's best answer in llama.vim's window (issue 29's "greedy" anchor)
    greedy: bool = False

    def limits(self) -> tuple[int, int]:
        """(t_max_prompt_ms, t_max_predict_ms) of a first request at a place."""
        if not self.time_limits:
            return 0, 0
        return self.t_max_prompt_ms, self.first_predict_ms

    def describe(self) -> dict:
        prompt_ms, predict_ms = self.limits()
        return {"n_prefix": self.n_prefix, "n_suffix": self.n_suffix,
                "n_predict": self.n_predict, "t_max_prompt_ms": prompt_ms,
                "t_max_predict_ms": predict_ms, "time_limits": self.time_limits,
                "auto_fim": self.auto, "max_line_suffix": self.max_line_suffix,
                "ring_n_chunks": self.ring_n_chunks, "ring_chunk_size": self.ring_chunk_size,
                "sampling": "greedy (top-k 1)" if self.greedy else "top-k 40, top-p 0.90"}


# ----- the local context ------------------------------------------------------------------------

@dataclass(frozen=True)
class LocalContext:
    prefix: str
    middle: str  # sent as ``prompt``: the cursor line's text before the cursor
    suffix: str
    indent: int
    line: str
    line_prefix: str
    line_suffix: str


def position(text: str, offset: int) -> tuple[list[str], int, int]:
    """The text's lines, the 0-based row and the column of ``offset``."""
    if not 0 <= offset <= len(text):
        raise ValueError(f"offset {offset} outside a text of {len(text)} characters")
    row = text.count("\n", 0, offset)
    return text.split("\n"), row, offset - (text.rfind("\n", 0, offset) + 1)


def _blank(line: str) -> bool:
    r"""Vim's ``'^\s*$'``: ``\s`` is a space or a tab."""
    return re.fullmatch(r"[ \t]*", line) is not None


def local_context(text: str, offset: int, s: LlamaVimSettings) -> LocalContext:
    """``s:fim_ctx_local`` for a cursor at ``offset`` (no previous suggestion)."""
    lines, row, col = position(text, offset)
    line = lines[row]
    line_prefix, line_suffix = line[:col], line[col:]
    above = lines[max(0, row - s.n_prefix):row]
    below = lines[row + 1:row + 1 + s.n_suffix]
    if _blank(line):
        indent, line_prefix, line_suffix = 0, "", ""
    else:
        indent = len(line) - len(line.lstrip(" \t"))
    return LocalContext(prefix="\n".join(above) + "\n", middle=line_prefix,
                        suffix=line_suffix + "\n" + "\n".join(below) + "\n", indent=indent,
                        line=line, line_prefix=line_prefix, line_suffix=line_suffix)


def skipped(ctx: LocalContext, s: LlamaVimSettings) -> bool:
    """Automatic completion does not ask when too much text follows the cursor."""
    return s.auto and len(ctx.line_suffix) > s.max_line_suffix


def request_body(ctx: LocalContext, extra: list[dict], s: LlamaVimSettings,
                 seed: int | None = None) -> dict:
    """The JSON body ``llama#fim`` posts to ``/infill``."""
    prompt_ms, predict_ms = s.limits()
    body = {"id_slot": 0, "input_prefix": ctx.prefix, "input_suffix": ctx.suffix,
            "input_extra": extra, "prompt": ctx.middle, "n_predict": s.n_predict,
            "stop": list(s.stop_strings), "n_indent": ctx.indent,
            "top_k": 1 if s.greedy else 40, "top_p": 0.90,
            "samplers": ["top_k", "top_p", "infill"], "stream": False, "cache_prompt": True,
            "t_max_prompt_ms": prompt_ms, "t_max_predict_ms": predict_ms,
            "response_fields": ["content", "timings/prompt_n", "timings/prompt_ms",
                                "timings/predicted_n", "timings/predicted_ms", "truncated",
                                "tokens_cached"]}
    if seed is not None:
        body["seed"] = seed
    return body


# ----- the ring of extra context ----------------------------------------------------------------

def chunk_similarity(a: Sequence[str], b: Sequence[str]) -> float:
    """``s:chunk_sim``: 2 x (words of ``b`` found among ``a``'s) / (words in both)."""
    words_a = re.split(r"\W+", "\n".join(a))
    words_b = re.split(r"\W+", "\n".join(b))
    if not words_a and not words_b:
        return 1.0
    seen = set(words_a)
    return 2.0 * sum(w in seen for w in words_b) / (len(words_a) + len(words_b))


@dataclass(frozen=True)
class Chunk:
    lines: tuple[str, ...]
    filename: str
    time: tuple[int, int]  # vim's reltime(): seconds and microseconds

    def extra(self) -> dict:
        return {"text": "\n".join(self.lines) + "\n", "time": list(self.time),
                "filename": self.filename}


def around(lines: Sequence[str], row: int, s: LlamaVimSettings) -> list[str]:
    """The lines llama.vim picks a chunk from around a buffer's cursor (row 0-based)."""
    half = s.ring_chunk_size // 2
    return list(lines[max(0, row - half):min(row + half, len(lines) - 1) + 1])


def window(text: Sequence[str], s: LlamaVimSettings, rng: random.Random) -> list[str]:
    """A random window of half a chunk's size plus one line (vim's inclusive slice)."""
    half = s.ring_chunk_size // 2
    l0 = rng.randint(0, max(0, len(text) - half))
    return list(text[l0:min(l0 + half, len(text)) + 1])


@dataclass
class ChunkRing:
    """``s:ring_chunks`` and ``s:ring_queued`` with the plugin's rules."""

    settings: LlamaVimSettings
    rng: random.Random
    chunks: list[Chunk] = field(default_factory=list)
    queued: list[Chunk] = field(default_factory=list)
    evicted: int = 0
    clock: Callable[[], float] = time.time

    def pick(self, text: Sequence[str], filename: str, do_evict: bool = True) -> None:
        """``s:pick_chunk``: queue a chunk of ``text`` unless the ring already has it."""
        s = self.settings
        if s.ring_n_chunks <= 0 or len(text) < 3:
            return
        lines = tuple(text) if len(text) + 1 < s.ring_chunk_size else tuple(
            window(text, s, self.rng))
        if any(c.lines == lines for c in [*self.chunks, *self.queued]):
            return
        for pool in (self.queued, self.chunks):
            for i in range(len(pool) - 1, -1, -1):
                if chunk_similarity(pool[i].lines, lines) > 0.9:
                    if not do_evict:
                        return
                    del pool[i]
                    self.evicted += 1
        if len(self.queued) == s.ring_queue:
            del self.queued[0]
        now = self.clock()
        self.queued.append(Chunk(lines, filename, (int(now), int(now % 1 * 1e6))))

    def update(self) -> bool:
        """``s:ring_update``: move the first queued chunk into the ring."""
        if not self.queued:
            return False
        if len(self.chunks) == self.settings.ring_n_chunks:
            del self.chunks[0]
        self.chunks.append(self.queued.pop(0))
        return True

    def settle(self) -> None:
        """The user spent long enough in normal mode for every queued chunk to move in
        (one per ``ring_update_ms``)."""
        while self.update():
            pass

    def evict_near(self, cursor_chunk: Sequence[str]) -> None:
        """Before a request: drop chunks that resemble the text around the cursor (they make
        the model repeat what is there)."""
        for i in range(len(self.chunks) - 1, -1, -1):
            if chunk_similarity(self.chunks[i].lines, cursor_chunk) > 0.5:
                del self.chunks[i]
                self.evicted += 1

    def extra(self) -> list[dict]:
        return [c.extra() for c in self.chunks]


# ----- what is shown ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Shown:
    """A rendered suggestion: the text the full accept inserts at the cursor (None: nothing
    shown) and, when nothing is shown, why."""

    text: str | None
    reason: str | None = None


def render(content: str, text: str, offset: int) -> Shown:
    """``s:fim_render`` and ``llama#fim_accept('full')``: what the user would get from the
    server's ``content`` at ``offset`` of ``text``.

    On a whitespace-only line llama.vim takes the suggestion's leading whitespace (as far as
    the line is long) as the line's, so the accepted line can be indented less than the
    cursor was; the text is then what follows that indentation (scored as if inserted at the
    cursor)."""
    lines, row, col = position(text, offset)
    out = content.split("\n")
    while out and out[-1] == "":
        out.pop()
    if not out:
        return Shown(None, "empty")
    line = lines[row]
    if _blank(line):
        first = out[0]
        lead = min(len(first) - len(first.lstrip(" \t")), len(line))
        line, out[0] = first[:lead], first[lead:]
    line_prefix, line_suffix = line[:col], line[col:]
    below = lines[row + 1:]

    if out == [""]:
        return Shown(None, "empty")
    if len(out) > 1 and out[0] == "" and out[1:] == below[:len(out) - 1]:
        return Shown(None, "repeats the next lines")
    if len(out) == 1 and out[0] == line_suffix:
        return Shown(None, "repeats the suffix")
    # the first non-blank line below the cursor (the plugin stops at the buffer's last line)
    cmp = row + 1
    while cmp < len(lines) - 1 and _blank(lines[cmp]):
        cmp += 1
    at = lines[cmp] if cmp < len(lines) else ""
    if line_prefix + out[0] == at:
        after = lines[cmp + 1:]
        if len(out) == 1:
            return Shown(None, "repeats the next line")
        if len(out) == 2 and out[1] == (after[0] if after else "")[:len(out[1])]:
            return Shown(None, "repeats the next line")
        if len(out) > 2 and out[1:] == after[:len(out) - 1]:
            return Shown(None, "repeats the next lines")
    middle = "\n".join(out)
    if _blank(middle + line_suffix):
        return Shown(None, "whitespace")
    return Shown(middle)


# ----- the client -------------------------------------------------------------------------------

@dataclass
class Answer:
    shown: str | None
    seconds: float
    requested: bool
    reason: str | None
    content: str | None = None
    prompt_tokens: int | None = None
    predicted_tokens: int | None = None
    cached_tokens: int | None = None
    truncated: bool | None = None


def post_infill(url: str, body: dict, timeout: float = 300.0) -> dict:
    req = urllib.request.Request(url + "/infill", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


class LlamaVimClient:
    """One editor session of llama.vim against a llama-server at ``url``: the ring of chunks
    lives across files and cursors, as the plugin's does across buffers."""

    def __init__(self, url: str, settings: LlamaVimSettings | None = None, seed: int = 0,
                 post: Callable[[str, dict], dict] = post_infill) -> None:
        self.url = url
        self.settings = settings or LlamaVimSettings()
        self.rng = random.Random(f"llama.vim:{seed}")
        self.ring = ChunkRing(self.settings, self.rng)
        self.post = post
        #: ``s:pos_y_pick``: the line of the last pick, one for all buffers (the plugin's
        #: "TODO: per-file location")
        self.last_pick = -9999

    def visit(self, filename: str, text: str, row: int = 0) -> None:
        """The user entered and left a buffer whose cursor is on ``row`` (BufEnter /
        BufLeave pick the same chunk, the second time a duplicate)."""
        self.ring.pick(around(text.split("\n"), row, self.settings), filename)

    def rest(self) -> None:
        """The user spent a few seconds in normal mode: the queue moves into the ring."""
        self.ring.settle()

    def complete(self, filename: str, text: str, offset: int) -> Answer:
        """The first suggestion llama.vim would show at ``offset`` (an automatic request
        unless the settings say the user pressed the trigger)."""
        s = self.settings
        ctx = local_context(text, offset, s)
        if skipped(ctx, s):
            return Answer(None, 0.0, False, "more than max_line_suffix after the cursor")
        lines, row, _ = position(text, offset)
        self.ring.evict_near(window(around(lines, row, s), s, self.rng))
        body = request_body(ctx, self.ring.extra(), s, seed=self.rng.randrange(2 ** 31))
        t0 = time.perf_counter()
        res = self.post(self.url, body)
        seconds = time.perf_counter() - t0
        content = res.get("content", "")
        shown = render(content, text, offset)
        # After the request: far from the last pick, queue chunks from further above and
        # below (they reach the ring only later, in normal mode).
        y = row + 1
        if s.auto and abs(y - self.last_pick) > 32:
            n = len(lines)
            self.ring.pick(lines[max(1, y - s.ring_scope) - 1:max(1, y - s.n_prefix)],
                           filename, do_evict=False)
            self.ring.pick(lines[min(n, y + s.n_suffix) - 1:min(n, y + s.n_suffix
                                                                  + s.ring_chunk_size)],
                           filename, do_evict=False)
            self.last_pick = y
        return Answer(shown.text, seconds, True, shown.reason, content,
                      res.get("timings/prompt_n"), res.get("timings/predicted_n"),
                      res.get("tokens_cached"), res.get("truncated"))
