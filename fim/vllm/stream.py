"""One streamed completion from the server, read on a thread so that cancel and the
deadline are polled, and the per-step facts (stop log-probabilities, the likeliest token at the
last step) read off its chunks.

What a server sends is bounded whatever it does: one line of the stream holds at most
``Stream.MAX_LINE_BYTES``, the whole stream ``Stream.MAX_STREAM_BYTES``, and the exchange ends
at the request's deadline plus ``Stream.READ_MARGIN_S`` (``Stream.UNBUDGETED_READ_S`` without
a deadline: a warm-up too) in total, however slowly the bytes come (``fim.vllm.http``'s
watchdog).  A server that streams more steps than the request's ``max_tokens`` is cut there
(``Streamed.overran``), as if it had stopped for the budget.
"""

from __future__ import annotations

import http.client
import math
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from fim.options import StopReason
from fim.vllm.http import (
    MAX_EVENT_LINE_BYTES,
    MAX_EVENT_STREAM_BYTES,
    Http,
    MalformedEvent,
    StreamTooLong,
    VllmError,
    event_lines,
    event_object,
    hang_up,
    json_or_error,
    printable,
    read_bounded,
    refuse,
)

#: Characters one token may stand for, at most (the longest tokens of code models' vocabularies
#: are runs of spaces or punctuation well under this): the text kept of an answer is at most
#: this many per token of the request's budget.
MAX_TOKEN_CHARS = 128


@dataclass
class Streamed:
    text: str = ""
    finish: str | None = None  # "stop", "length", or None when cut off by the client
    stop: StopReason | None = None  # CANCELLED or TIME when the client ended it
    tokens: int = 0
    prompt_tokens: int = 0
    cached_tokens: int | None = None  # the server's count, when it reports one
    answered: bool = False  # a chunk came (the prompt was prefilled)
    last_piece: str = ""  # the last chunk with text (the last token's, one per step)
    #: the model's likeliest token at the step that ended the answer, when it was not the
    #: token generated there (raw logprobs: the row was made to stop)
    wanted: str | None = None
    #: per step: where its token starts in ``text`` and the log-probability the raw model
    #: gave a stop token there (``None``: no stop among the step's top ids)
    stop_logps: list[tuple[int, float | None]] = field(default_factory=list)
    #: per step, beside ``stop_logps``: the raw model's likeliest token where another was
    #: generated there (``""`` for a stop token), else ``None``; in a greedy row, where the
    #: constraint refused the model's choice (``fim.vllm.answers.refused_end``)
    refused: list[str | None] = field(default_factory=list)
    #: the server sent more steps than the request's ``max_tokens``: the rest was not read
    overran: bool = False


class Stream:
    """Reads one streamed completion on a thread, so cancel and the deadline are polled."""

    POLL_S = 0.05
    #: Seconds a socket read may wait beyond the request's deadline (the run loop ends the
    #: request at the deadline itself; the read only has to outlast it).
    READ_MARGIN_S = 10.0
    #: The read timeout of a request without a time budget (a queued request on a busy
    #: server may wait this long for its first token): never shorter than the HTTP timeout.
    UNBUDGETED_READ_S = 60.0
    #: Bytes one line of the event stream may hold (a step's chunk with 20 top log-
    #: probabilities is a few kilobytes).
    MAX_LINE_BYTES = MAX_EVENT_LINE_BYTES
    #: Bytes the whole event stream may hold.
    MAX_STREAM_BYTES = MAX_EVENT_STREAM_BYTES

    def __init__(self, http_: Http, body: dict, cancel: Callable[[], bool] | None,
                 deadline: float | None,
                 finish_anyway: Callable[[], None] | None = None,
                 stops: tuple[str, ...] = ()) -> None:
        self.http, self.body, self.cancel, self.deadline = http_, body, cancel, deadline
        self.stops = stops  # the stop tokens' texts, as logprobs name them
        budget = body.get("max_tokens")
        #: characters of answer kept (see ``MAX_TOKEN_CHARS``)
        self.max_chars = (max(1, budget) if isinstance(budget, int) else 4096) * MAX_TOKEN_CHARS
        self.events: queue.Queue = queue.Queue()
        self.conn: http.client.HTTPConnection | None = None
        self.resp: http.client.HTTPResponse | None = None
        self.hung_up = False
        #: with ``finish_anyway``, a request cancelled after it was sent is left to finish
        #: (read on by the reader thread, whose socket has a timeout), and this is called
        #: when it did
        self.finish_anyway = finish_anyway
        self.detached = False

    def run(self) -> Streamed:
        thread = threading.Thread(target=self._read, daemon=True, name="seam-vllm-stream")
        thread.start()
        out = Streamed()
        try:
            while True:
                if self.cancel is not None and self.cancel():
                    out.stop = StopReason.CANCELLED
                    self.detached = self.finish_anyway is not None and self.conn is not None
                    return out
                if self.deadline is not None and time.monotonic() > self.deadline:
                    out.stop = StopReason.TIME
                    return out
                try:
                    kind, value = self.events.get(timeout=self.POLL_S)
                except queue.Empty:
                    continue
                if kind == "error":
                    raise value
                if kind == "done":
                    return out
                if kind == "overran":
                    out.overran = True
                    out.finish = "length"  # as if the server had kept the budget
                    return out
                self._take(out, value)
        finally:
            if not self.detached:
                self._hang_up()

    def _opened(self, conn: http.client.HTTPConnection) -> None:
        self.conn = conn
        if self.hung_up:
            conn.connect = refuse  # hung up before connecting: never send the request

    def _hang_up(self) -> None:
        """Close the connection under the reader thread (``close`` alone leaves the socket
        open while the response still reads from it): vLLM sees the client go and aborts a
        request still running."""
        self.hung_up = True
        conn = self.conn
        if conn is None:
            return
        hang_up(conn, self.resp)

    def _take(self, out: Streamed, chunk: dict) -> None:
        for choice in chunk.get("choices") or ():
            out.answered = True
            piece = choice.get("text") or ""
            facts = stop_logps_of(choice.get("logprobs"), len(out.text), self.stops)
            out.stop_logps += facts
            refused = refused_of(choice.get("logprobs"), self.stops)
            out.refused += refused if len(refused) == len(facts) else [None] * len(facts)
            if len(out.text) + len(piece) > self.max_chars:  # kept no longer than the budget
                piece, out.overran = piece[:max(0, self.max_chars - len(out.text))], True
            out.text += piece
            out.last_piece = piece or out.last_piece
            out.tokens += 1
            if choice.get("finish_reason"):
                out.finish = choice["finish_reason"]
                out.wanted = wanted_token(choice.get("logprobs"))
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            out.tokens = int(usage.get("completion_tokens") or out.tokens)
            out.prompt_tokens = int(usage.get("prompt_tokens") or 0)
            details = usage.get("prompt_tokens_details")  # --enable-prompt-tokens-details
            if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
                out.cached_tokens = details["cached_tokens"]

    def read_timeout(self) -> float:
        """How long one socket read may wait: until the request's deadline plus
        ``READ_MARGIN_S`` (a budget longer than a minute is honoured, not cut at a fixed
        minute), or ``UNBUDGETED_READ_S`` without a deadline; never below the HTTP timeout."""
        if self.deadline is None:
            return max(self.http.timeout, self.UNBUDGETED_READ_S)
        left = max(0.0, self.deadline - time.monotonic())
        return max(self.http.timeout, left + self.READ_MARGIN_S)

    def total_s(self) -> float:
        """Seconds the whole exchange may take, from connecting to the last byte: as long as
        one read may wait (:meth:`read_timeout`), counted once for all of them."""
        return self.read_timeout()

    def _read(self) -> None:
        conn = None
        try:
            conn, resp = self.http.send("POST", "/v1/completions", self.body,
                                        timeout=self.read_timeout(), opened=self._opened,
                                        total=self.total_s())
            self.resp = resp
            if self.hung_up:
                resp.close()
                return
            if resp.status != 200:
                data = read_bounded(resp, Http.MAX_BODY_BYTES) or b""
                json_or_error(self.http.url, resp.status, data)
            done = self._lines(resp)
            if conn.watchdog.fired and not done:
                raise VllmError(f"the vLLM server at {self.http.url} did not finish its "
                                f"answer within {self.total_s():g} s")
            if done is None:
                self.events.put(("overran", None))
            elif not done and not self.hung_up:  # vLLM always ends with [DONE]: not a stream
                raise VllmError(f"the vLLM server at {self.http.url} ended the answer "
                                "without finishing it (is it a vLLM server?)")
            self.events.put(("done", None))
            if self.detached and self.finish_anyway is not None:
                self.finish_anyway()
        except VllmError as err:
            self.events.put(("error", err))
        except Exception as err:  # noqa: BLE001 - the thread's boundary: all goes to run()
            # (Reading a response whose connection this client hung up raises whatever
            # http.client meets: ValueError, AttributeError, OSError.)
            what = (f"did not finish its answer within {self.total_s():g} s"
                    if conn is not None and conn.watchdog.fired
                    else f"broke off: {printable(err)}")
            self.events.put(("error", VllmError(f"the vLLM server at {self.http.url} {what}")))
        finally:
            if conn is not None:
                conn.watchdog.cancel()
                conn.close()

    def _lines(self, resp: http.client.HTTPResponse) -> bool | None:
        """Read the event stream into ``events``: ``True`` at ``[DONE]``, ``False`` when it
        ended without one, ``None`` when the server sent more steps than ``max_tokens``."""
        try:
            return self._events(event_lines(resp, self.MAX_LINE_BYTES, self.MAX_STREAM_BYTES))
        except StreamTooLong as err:
            raise VllmError(f"the vLLM server at {self.http.url} {err}") from None

    def _events(self, lines: Iterator[str]) -> bool | None:
        steps_max = self.body.get("max_tokens")
        steps = 0
        for line in lines:
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                return True
            try:
                chunk = event_object(data)
            except MalformedEvent as err:
                raise VllmError(f"the vLLM server at {self.http.url} {err}") from None
            if "error" in chunk:
                raise VllmError(f"the vLLM server at {self.http.url} failed: "
                                f"{printable(chunk['error'])}")
            choices = chunk.get("choices")
            steps += len(choices) if isinstance(choices, list) else 0
            if isinstance(steps_max, int) and steps > steps_max + 1:
                # (one more than the budget: vLLM's stop token may come in a chunk of its own)
                return None
            self.events.put(("chunk", chunk))
        return False


def wanted_token(logprobs: object) -> str | None:
    """From a final chunk's ``logprobs`` (the completions API's shape): the likeliest token
    at the last step when the token generated there was another one; else ``None``."""
    if not isinstance(logprobs, dict):
        return None
    tokens, tops = logprobs.get("tokens"), logprobs.get("top_logprobs")
    if not (isinstance(tokens, list) and isinstance(tops, list) and tokens and tops
            and isinstance(tops[-1], dict) and tops[-1]):
        return None
    top = tops[-1]
    best = max(top, key=lambda k: top[k] if isinstance(top[k], (int, float)) else -math.inf)
    return best if best != tokens[-1] and isinstance(best, str) else None


def refused_of(logprobs: object, stops: tuple[str, ...]) -> list[str | None]:
    """From one streamed chunk's ``logprobs``, per step: the likeliest token among the step's
    top ids when the token generated there was another one (``""`` when it was a stop
    token), else ``None`` (also where the chunk does not say)."""
    if not isinstance(logprobs, dict):
        return []
    tops, tokens = logprobs.get("top_logprobs"), logprobs.get("tokens")
    if not isinstance(tops, list):
        return []
    if not (isinstance(tokens, list) and len(tokens) == len(tops)):
        return [None] * len(tops)
    out: list[str | None] = []
    for top, token in zip(tops, tokens, strict=True):
        scored = {k: v for k, v in top.items() if isinstance(k, str)
                  and isinstance(v, (int, float))} if isinstance(top, dict) else {}
        best = max(scored, key=scored.__getitem__) if scored else None
        if best is None or not isinstance(token, str) or best == token or token in stops:
            out.append(None)
        else:
            out.append("" if best in stops else best)
    return out


def stop_logps_of(logprobs: object, at: int, stops: tuple[str, ...]
                ) -> list[tuple[int, float | None]]:
    """From one streamed chunk's ``logprobs`` (the completions API's shape), per step: where
    its token starts (``at`` is where the chunk's text starts in the answer) and the likeliest
    stop token's log-probability among the step's top ids, or ``None`` when none is there."""
    if not isinstance(logprobs, dict) or not stops:
        return []
    tops, offsets = logprobs.get("top_logprobs"), logprobs.get("text_offset")
    if not isinstance(tops, list):
        return []
    if not (isinstance(offsets, list) and len(offsets) == len(tops)
            and all(isinstance(o, int) for o in offsets)):
        offsets = [0] * len(tops) if len(tops) == 1 else None
    if offsets is None:
        return []
    out: list[tuple[int, float | None]] = []
    for top, offset in zip(tops, offsets, strict=True):
        found = [v for k, v in top.items() if k in stops and isinstance(v, (int, float))] \
            if isinstance(top, dict) else []
        out.append((at + offset - offsets[0], max(found) if found else None))
    return out
