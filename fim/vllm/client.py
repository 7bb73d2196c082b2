"""The ``vllm`` engine: completions from a shared vLLM server that runs Seam's constraint.

A team runs one vLLM server (``seam team-server``, or ``vllm serve`` with
``--logits-processors fim.vllm.processor:SeamLogitsProcessor``) and every editor's Seam talks to
it over vLLM's OpenAI-compatible ``/v1/completions``.  This module is that client: it builds the
fill-in-the-middle prompt as text (the template is detected once from the server's tokenizer
through ``/tokenize``), sends Seam's arguments in ``vllm_xargs`` so the server's processor
constrains the middle, streams the answer so a cancelled request closes the connection (vLLM
then aborts the request), and checks the middle the way the in-process engine does: a middle
that ends at a stop token and parses is kept, anything else is cut back to its longest prefix
with which the file parses.

The prompt is cut to the window by characters (the client has no tokenizer; three characters
per token, a cautious estimate for code), and token healing is off.

``seam serve`` uses the same engine (``engine: "vllm"``): the editor-side service asks it
for what it asks of the in-process ``fim.api.Engine`` (``prompt_for``, ``uncached``,
``warm``, ``tokenizer``, ``window``, ``step_model.reused``, ``backend``).  The answers are
the remote ones: token counts are the same estimate, nothing is known cached (``uncached``
is the whole prompt, ``reused`` 0), and a warm-up is a one-token unconstrained request with
the prompt, which leaves the prompt in vLLM's automatic prefix cache for the request that
follows.  The project context of a request is not sent (the prompt is the file's text).

A server that is down, slow or answers garbage raises :class:`VllmError` with a message for
the user, never a hang.
"""

from __future__ import annotations

import http.client
import json
import queue
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass

from fim import decoding
from fim.api import CompletionRequest, CompletionResult
from fim.engines.model_specs import EngineKind
from fim.options import Mode, StopReason
from fim.templates import TEMPLATES, FimTemplate
from fim.vllm.rows import SeamArgs
from quotient.constraint import LanguageMode

#: Characters per token when cutting the prompt to the window without a tokenizer.
CHARS_PER_TOKEN = 3
#: Tokens kept free for the sentinels and the tokenizer's estimate being off.
PROMPT_SLACK = 16


class VllmError(ConnectionError):
    """The server could not be reached or answered something that is not a completion (a
    ``ConnectionError``: callers that report I/O failures report this one too)."""


@dataclass(frozen=True)
class ServerInfo:
    """What the client learned from the server once: model id, window, template, stop ids."""

    url: str
    model: str
    max_model_len: int
    template: FimTemplate
    stop_ids: tuple[int, ...]


@dataclass(frozen=True)
class RemotePrompt:
    """The prompt text a request sends, and the characters cut from each side to fit."""

    text: str
    left_chars_dropped: int
    right_chars_dropped: int


@dataclass(frozen=True)
class RemoteBackend:
    """What ``seam/status`` reports of the runtime (as ``fim.api.Engine.backend`` does)."""

    engine: EngineKind
    device: str
    description: str


class EstimatedTokenizer:
    """Token counts for the planner's budgets, by the client's estimate
    (:data:`CHARS_PER_TOKEN`): counting on the server would cost a round trip per count."""

    def encode(self, text: str) -> list[int]:
        """One placeholder id per estimated token (only the count is used)."""
        return [0] * -(-len(text) // CHARS_PER_TOKEN)


@dataclass(frozen=True)
class RemoteCache:
    """The in-process engine's ``step_model`` as far as the service reads it: what the
    last request took from the cache, which the client does not learn (0)."""

    reused: int = 0


class _Http:
    """Small JSON-over-HTTP calls with timeouts and clear errors."""

    def __init__(self, url: str, api_key: str | None, timeout: float) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise VllmError(f"server must be an http(s) URL such as http://host:8000, "
                            f"not {url!r}")
        self.url, self.parts, self.api_key, self.timeout = url.rstrip("/"), parts, api_key, timeout
        self.base = parts.path.rstrip("/")
        if self.base.endswith("/v1"):
            self.base = self.base[:-3]

    def connection(self, timeout: float | None = None) -> http.client.HTTPConnection:
        cls = (http.client.HTTPSConnection if self.parts.scheme == "https"
               else http.client.HTTPConnection)
        return cls(self.parts.hostname, self.parts.port, timeout=timeout or self.timeout)

    def headers(self) -> dict[str, str]:
        out = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            out["Authorization"] = f"Bearer {self.api_key}"
        return out

    def send(self, method: str, path: str, body: dict | None = None,
             timeout: float | None = None,
             opened: Callable[[http.client.HTTPConnection], None] | None = None
             ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send a request; ``opened`` hears of the connection before anything is sent (so
        another thread can hang up while the server has not answered yet)."""
        conn = self.connection(timeout)
        if opened is not None:
            opened(conn)
        try:
            conn.request(method, self.base + path,
                         json.dumps(body).encode() if body is not None else None,
                         self.headers())
            return conn, conn.getresponse()
        except (OSError, http.client.HTTPException) as err:
            conn.close()
            raise VllmError(f"the vLLM server at {self.url} does not answer: {err}") from err

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        conn, resp = self.send(method, path, body)
        try:
            data = resp.read()
        except (OSError, http.client.HTTPException) as err:
            raise VllmError(f"the vLLM server at {self.url} broke off: {err}") from err
        finally:
            conn.close()
        return _json_or_error(self.url, resp.status, data)


def _json_or_error(url: str, status: int, data: bytes) -> dict:
    try:
        out = json.loads(data)
    except ValueError:
        out = None
    if status != 200 or not isinstance(out, dict):
        detail = ""
        if isinstance(out, dict):
            err = out.get("error", out.get("message", out))
            detail = err.get("message", err) if isinstance(err, dict) else err
        raise VllmError(f"the vLLM server at {url} answered HTTP {status}"
                        + (f": {detail}" if detail else " with no JSON"))
    return out


class _RemoteIds:
    """``token_id`` over the server's ``/tokenize`` (what ``detect_template`` asks)."""

    eos_token_id = None
    bos_token_id = None

    def __init__(self, http_: _Http, model: str) -> None:
        self.http, self.model = http_, model

    def token_id(self, piece: str) -> int | None:
        out = self.http.call("POST", "/tokenize", {"model": self.model, "prompt": piece,
                                                  "add_special_tokens": False})
        tokens = out.get("tokens")
        return int(tokens[0]) if isinstance(tokens, list) and len(tokens) == 1 else None


class VllmEngine:
    """Completes :class:`~fim.api.CompletionRequest` through a vLLM server (see the module)."""

    #: One middle per request: ``CompletionRequest.alternatives`` is not ranked here.
    ranks_alternatives = False

    def __init__(self, server: str, api_key: str | None = None, *, timeout: float = 10.0,
                 template: str | None = None, left_share: float = 0.75) -> None:
        self.http = _Http(server, api_key, timeout)
        self.left_share = left_share
        self._template_name = template
        self._info: ServerInfo | None = None
        self.tokenizer = EstimatedTokenizer()
        self.step_model = RemoteCache()

    @classmethod
    def connect(cls, server: str | None, api_key: str | None = None, **options) -> VllmEngine:
        """An engine for ``server``, asked for its model now, so a wrong URL or a server that
        is down is reported before any request."""
        if not server:
            raise VllmError("the vllm engine needs the server's URL (--server URL, or the "
                            "setting \"vllmServer\" with engine \"vllm\")")
        engine = cls(server, api_key, **options)
        engine.info  # noqa: B018 - the probe
        return engine

    @property
    def info(self) -> ServerInfo:
        """The server's model, window and template (asked once, again after a failure)."""
        if self._info is None:
            self._info = self._probe()
        return self._info

    def _probe(self) -> ServerInfo:
        models = self.http.call("GET", "/v1/models").get("data")
        if not isinstance(models, list) or not models or not isinstance(models[0], dict):
            raise VllmError(f"the server at {self.http.url} lists no model")
        model = str(models[0].get("id"))
        window = models[0].get("max_model_len")
        ids = _RemoteIds(self.http, model)
        if self._template_name is not None:
            template = TEMPLATES.get(self._template_name)
            if template is None:
                raise VllmError(f"unknown FIM template {self._template_name!r}")
        else:
            template = next((t for t in TEMPLATES.values()
                             if all(ids.token_id(s) is not None
                                    for s in (t.prefix, t.suffix, t.middle))), None)
            if template is None:
                raise VllmError(f"the model {model} on {self.http.url} has no known "
                                "fill-in-the-middle tokens")
        stops = tuple(sorted({i for i in map(ids.token_id, template.stops) if i is not None}))
        return ServerInfo(self.http.url, model, int(window) if isinstance(window, int)
                          else 2048, template, stops)

    @property
    def window(self) -> int:
        """The server's context window in tokens."""
        return self.info.max_model_len

    @property
    def backend(self) -> RemoteBackend:
        """The runtime as ``seam/status`` shows it; the device is ``remote``: the server
        decides where the model runs."""
        info = self.info
        return RemoteBackend(EngineKind.VLLM, "remote", f"vLLM at {info.url} ({info.model})")

    # ----- the editor service's calls ---------------------------------------------------

    def prompt_for(self, req: CompletionRequest) -> RemotePrompt:
        """The prompt ``complete(req)`` sends (no server work once the server is known)."""
        req.validate()
        return RemotePrompt(*self.prompt_text(req))

    def uncached(self, req: CompletionRequest, prompt: RemotePrompt | None = None) -> int:
        """Estimated prompt tokens, all counted as not cached: the client cannot see vLLM's
        prefix cache."""
        prompt = prompt if prompt is not None else self.prompt_for(req)
        return len(self.tokenizer.encode(prompt.text))

    def warm(self, req: CompletionRequest, cancel: Callable[[], bool] | None = None,
             keep_cached: bool = False, prompt: RemotePrompt | None = None) -> bool:
        """Run the prompt into vLLM's prefix cache: a one-token request without Seam's
        arguments (no constraint work on the server); whether it finished.  A server that
        fails is logged by the caller's next request, not here: ``False``.
        ``keep_cached`` has no meaning remotely (vLLM evicts by its own rule)."""
        try:
            prompt = prompt if prompt is not None else self.prompt_for(req)
            body = dict(self.body(req, prompt.text), max_tokens=1)
            body.pop("vllm_xargs", None)
            got = _Stream(self.http, body, cancel, None).run()
        except VllmError:
            # The server's facts stay: asking again would put a probe (seconds when the
            # server is slow) on the editor's event loop, which plans with window and backend.
            return False
        return got.stop is None

    # ----- one completion ---------------------------------------------------------------

    def prompt_text(self, req: CompletionRequest) -> tuple[str, int, int]:
        """``(prompt, left_chars_dropped, right_chars_dropped)`` for ``req``."""
        info = self.info
        window = min(info.max_model_len, req.context_tokens or info.max_model_len)
        chars = max(0, window - req.max_tokens - PROMPT_SLACK) * CHARS_PER_TOKEN
        left_room = int(chars * self.left_share)
        right = req.right[:max(chars - min(len(req.left), left_room), 0)]
        # The request's prompt start (the editor's stable anchor) where it fits: the same
        # beginning keystroke after keystroke is what vLLM's prefix cache reuses.
        left = req.left[max(0, len(req.left) - (chars - len(right)), req.left_start):]
        t = info.template
        text = t.prefix + t.left_lead + left + t.suffix + right + t.middle
        return text, len(req.left) - len(left), len(req.right) - len(right)

    def body(self, req: CompletionRequest, prompt: str) -> dict:
        """The ``/v1/completions`` request for ``req``."""
        body = {"model": self.info.model, "prompt": prompt, "max_tokens": req.max_tokens,
                "temperature": req.temperature, "seed": req.seed, "stream": True,
                "stream_options": {"include_usage": True},
                "stop_token_ids": list(self.info.stop_ids), "skip_special_tokens": True}
        if req.mode == Mode.CONSTRAINED:
            body["vllm_xargs"] = SeamArgs(req.left, req.right, req.scope).to_extra_args()
        return body

    def complete(self, req: CompletionRequest, cancel: Callable[[], bool] | None = None,
                 on_partial: Callable[[str], None] | None = None,
                 progress: Callable[[str, int, int], None] | None = None,
                 prompt: RemotePrompt | None = None) -> CompletionResult:
        """Complete ``req`` on the server (``on_partial`` and ``progress`` are not used;
        ``prompt``: its ``prompt_for(req)``, when built already)."""
        req.validate()
        start = time.perf_counter()
        try:
            built = prompt if prompt is not None else self.prompt_for(req)
            prompt, left_cut, right_cut = (built.text, built.left_chars_dropped,
                                           built.right_chars_dropped)
        except VllmError:
            self._info = None
            raise
        setup_ms = (time.perf_counter() - start) * 1e3
        deadline = (time.monotonic() + req.time_budget_ms / 1e3
                    if req.time_budget_ms is not None else None)
        t0 = time.perf_counter()
        streamed = _Stream(self.http, self.body(req, prompt), cancel, deadline).run()
        model_ms = (time.perf_counter() - t0) * 1e3
        middle, stop, parses = _finish(req, streamed)
        return CompletionResult(
            middle=middle, stop=stop, tokens=streamed.tokens, setup_ms=setup_ms,
            model_ms=model_ms, constraint_ms=0.0,
            mode=LanguageMode.EXACT if req.mode == Mode.CONSTRAINED else LanguageMode.NONE,
            decoding=Mode(req.mode), raw=streamed.text, parses=parses,
            prompt_tokens=streamed.prompt_tokens, left_chars_dropped=left_cut,
            right_chars_dropped=right_cut)


@dataclass
class _Streamed:
    text: str = ""
    finish: str | None = None  # "stop", "length", or None when cut off by the client
    stop: StopReason | None = None  # CANCELLED or TIME when the client ended it
    tokens: int = 0
    prompt_tokens: int = 0


class _Stream:
    """Reads one streamed completion on a thread, so cancel and the deadline are polled."""

    POLL_S = 0.05

    def __init__(self, http_: _Http, body: dict, cancel: Callable[[], bool] | None,
                 deadline: float | None) -> None:
        self.http, self.body, self.cancel, self.deadline = http_, body, cancel, deadline
        self.events: queue.Queue = queue.Queue()
        self.conn: http.client.HTTPConnection | None = None
        self.resp: http.client.HTTPResponse | None = None
        self.hung_up = False

    def run(self) -> _Streamed:
        thread = threading.Thread(target=self._read, daemon=True, name="seam-vllm-stream")
        thread.start()
        out = _Streamed()
        try:
            while True:
                if self.cancel is not None and self.cancel():
                    out.stop = StopReason.CANCELLED
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
                self._take(out, value)
        finally:
            self._hang_up()

    def _opened(self, conn: http.client.HTTPConnection) -> None:
        self.conn = conn
        if self.hung_up:
            conn.connect = _refuse  # hung up before connecting: never send the request

    def _hang_up(self) -> None:
        """Close the connection under the reader thread (``close`` alone leaves the socket
        open while the response still reads from it): vLLM sees the client go and aborts a
        request still running."""
        self.hung_up = True
        conn = self.conn
        if conn is None:
            return
        conn.connect = _refuse  # a request not sent yet never will be
        sock = conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by the peer
        # The descriptor closes only when the response's file is closed too; until then the
        # server's writes still succeed (after a shutdown Linux drops them silently) and
        # vLLM, seeing no error, would run the request to its end.
        resp = self.resp
        if resp is not None:
            try:
                resp.close()
            except Exception:  # noqa: BLE001 - the reader thread may be inside it
                pass
        conn.close()

    @staticmethod
    def _take(out: _Streamed, chunk: dict) -> None:
        for choice in chunk.get("choices") or ():
            out.text += choice.get("text") or ""
            out.tokens += 1
            if choice.get("finish_reason"):
                out.finish = choice["finish_reason"]
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            out.tokens = int(usage.get("completion_tokens") or out.tokens)
            out.prompt_tokens = int(usage.get("prompt_tokens") or 0)

    def _read(self) -> None:
        try:
            _, resp = self.http.send("POST", "/v1/completions", self.body,
                                     timeout=max(self.http.timeout, 60.0), opened=self._opened)
            self.resp = resp
            if self.hung_up:
                resp.close()
                return
            if resp.status != 200:
                _json_or_error(self.http.url, resp.status, resp.read())
            done = False
            for raw in resp:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    done = True
                    break
                try:
                    chunk = json.loads(data)
                except ValueError:
                    raise VllmError(f"the vLLM server at {self.http.url} sent a "
                                    f"malformed event: {data[:80]!r}") from None
                if "error" in chunk:
                    raise VllmError(f"the vLLM server at {self.http.url} failed: "
                                    f"{chunk['error']}")
                self.events.put(("chunk", chunk))
            if not done and not self.hung_up:  # vLLM always ends with [DONE]: not a stream
                raise VllmError(f"the vLLM server at {self.http.url} ended the answer "
                                "without finishing it (is it a vLLM server?)")
            self.events.put(("done", None))
        except VllmError as err:
            self.events.put(("error", err))
        except Exception as err:  # noqa: BLE001 - the thread's boundary: all goes to run()
            # (Reading a response whose connection this client hung up raises whatever
            # http.client meets: ValueError, AttributeError, OSError.)
            self.events.put(("error", VllmError(
                f"the vLLM server at {self.http.url} broke off: {err}")))


def _refuse() -> None:
    raise ConnectionAbortedError("the request was cancelled before it was sent")


def _finish(req: CompletionRequest, got: _Streamed
            ) -> tuple[str | None, StopReason, bool | None]:
    """The middle, the stop reason and whether the file parses with it, as ``Engine`` does:
    kept whole after a stop token when it parses, else cut back to the longest prefix with
    which the file parses (``best_complete``), or none."""
    if got.stop is StopReason.CANCELLED:
        return None, StopReason.CANCELLED, None
    text = got.text.replace("\ufffd", "") if got.finish != "stop" else got.text
    stop = StopReason.EOS if got.finish == "stop" else (got.stop or StopReason.BUDGET)
    if req.mode == Mode.UNCONSTRAINED:
        return text, stop, decoding.parses(req.left + text + req.right)
    if req.line_stop or req.mode == Mode.CONSTRAINED:
        for k, ch in enumerate(text):
            if ch == "\n" and req.line_stop and decoding.parses(req.left + text[:k] + req.right):
                return text[:k], StopReason.LINE_END, True
        if stop == StopReason.EOS and decoding.parses(req.left + text + req.right):
            return text, stop, True
    middle, cut_stop = decoding.checked_cut(req.left, text, req.right, stop)
    if stop is StopReason.TIME:  # out of time, not out of answers: asking again may help
        cut_stop = StopReason.TIME
    return middle, cut_stop, middle is not None
