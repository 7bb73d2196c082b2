"""A vLLM server's routes closed to requests without the key, and limits on each request.

vLLM's own ``--api-key`` (``VLLM_API_KEY``) checks only paths under ``/v1``, ``/v2``,
``/inference`` and ``/cohere``: ``/tokenize``, ``/detokenize``, ``/metrics``, ``/version``,
``/load``, ``/ping`` and the rest answer anyone who reaches the port.  :class:`RouteGuard` is an
ASGI middleware vLLM loads with ``--middleware fim.vllm.route_guard.RouteGuard`` (``seam
team-server`` passes it): with a key set, every route but ``OPEN_PATHS`` needs it, and every
``POST`` to a completion route is held to :class:`Limits` before vLLM reads it, so one request
cannot make the server parse megabytes or build a constraint over a whole repository while the
batch waits.  A refusal is an HTTP 401 (no key), 413 (body too large) or 400 (a limit), with a
JSON body in the OpenAI error shape whose message names the limit and the variable that sets
it.

vLLM gives a ``--middleware`` class no arguments, so the settings are read from the
environment when the server starts (``KEY_ENV``, ``LIMIT_ENVS``); a value that is not a
positive whole number stops the server with a message naming it.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from fim.vllm.rows import LEFT_KEY, RIGHT_KEY

#: The key: the variable vLLM's own check reads too, so one setting closes both.
KEY_ENV = "VLLM_API_KEY"
#: Open without the key: a liveness probe for service managers and load balancers, which
#: tells nothing but "up".
OPEN_PATHS = frozenset({"/health"})
#: The routes whose requests are held to the limits (their bodies carry prompts).
LIMITED_PATHS = frozenset({"/v1/completions", "/v1/chat/completions"})


class LimitError(ValueError):
    """A limit's setting is not a positive whole number (the server does not start)."""


@dataclass(frozen=True)
class Limits:
    """Per-request limits, each set by its variable (``LIMIT_ENVS``)."""

    #: Bytes of a request body (HTTP 413 beyond).
    request_bytes: int = 4 * 1024 * 1024
    #: Characters of Seam's left and of its right context, each (``seam_left``/``seam_right``;
    #: Seam's client sends windows far smaller: ``fim.vllm.context``).
    context_chars: int = 400_000
    #: Tokens a request may ask to generate (``max_tokens``/``max_completion_tokens``).
    new_tokens: int = 1024
    #: Tokens of a prompt sent as ids (a text prompt is bounded by the bytes and by vLLM's
    #: ``--max-model-len``).
    prompt_tokens: int = 32_768

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Limits:
        values = {}
        for field, name in LIMIT_ENVS.items():
            text = env.get(name)
            if text is None or text == "":
                continue
            if not text.strip().isdigit() or int(text) <= 0:
                raise LimitError(f"{name} must be a positive whole number, not {text!r}")
            values[field] = int(text)
        return cls(**values)

    def as_env(self) -> dict[str, str]:
        """The variables that set these limits (what ``seam team-server`` passes on)."""
        return {name: str(getattr(self, field)) for field, name in LIMIT_ENVS.items()}

    def refusal(self, body: object) -> str | None:
        """Why a completion request's JSON ``body`` exceeds a limit, or ``None``."""
        if not isinstance(body, dict):
            return None  # not ours to judge: vLLM answers a malformed body itself
        xargs = body.get("vllm_xargs")
        if isinstance(xargs, dict):
            for key in (LEFT_KEY, RIGHT_KEY):
                text = xargs.get(key)
                if isinstance(text, str) and len(text) > self.context_chars:
                    return (f"{key} has {len(text)} characters; this server takes at most "
                            f"{self.context_chars} ({LIMIT_ENVS['context_chars']})")
        for key in ("max_tokens", "max_completion_tokens"):
            asked = body.get(key)
            if isinstance(asked, int) and asked > self.new_tokens:
                return (f"{key} is {asked}; this server generates at most {self.new_tokens} "
                        f"tokens per request ({LIMIT_ENVS['new_tokens']})")
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) > self.prompt_tokens \
                and all(isinstance(t, int) for t in prompt[:1]):
            return (f"the prompt has {len(prompt)} tokens; this server takes at most "
                    f"{self.prompt_tokens} ({LIMIT_ENVS['prompt_tokens']})")
        return None


#: Each limit's variable.
LIMIT_ENVS = {"request_bytes": "SEAM_MAX_REQUEST_BYTES",
              "context_chars": "SEAM_MAX_CONTEXT_CHARS",
              "new_tokens": "SEAM_MAX_NEW_TOKENS",
              "prompt_tokens": "SEAM_MAX_PROMPT_TOKENS"}

Scope = dict
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]


class RouteGuard:
    """The ASGI middleware (see the module docstring)."""

    def __init__(self, app, key: str | None = None, limits: Limits | None = None) -> None:
        self.app = app
        key = key if key is not None else os.environ.get(KEY_ENV) or None
        self.key_hash = hashlib.sha256(key.encode()).digest() if key else None
        self.limits = limits if limits is not None else Limits.from_env(os.environ)

    def authorized(self, scope: Scope) -> bool:
        """Whether the request carries the key (``Authorization: Bearer KEY``), compared in
        constant time; every request is when no key is set."""
        if self.key_hash is None:
            return True
        value = ""
        for name, raw in scope.get("headers") or ():
            if name.lower() == b"authorization":
                value = raw.decode("latin-1")
        scheme, _, token = value.partition(" ")
        given = hashlib.sha256(token.strip().encode()).digest()
        return scheme.lower() == "bearer" and secrets.compare_digest(given, self.key_hash)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope.get("method") == "OPTIONS":
            return await self.app(scope, receive, send)  # lifespan; CORS pre-flight
        path = scope["path"].removeprefix(scope.get("root_path", ""))
        if path not in OPEN_PATHS and not self.authorized(scope):
            if scope["type"] == "websocket":
                return await send({"type": "websocket.close", "code": 1008})
            return await _refuse(send, 401, "this server needs its API key "
                                 "(Authorization: Bearer KEY)", "Unauthorized")
        if scope["type"] == "http" and scope.get("method") == "POST" and path in LIMITED_PATHS:
            return await self._limited(scope, receive, send)
        return await self.app(scope, receive, send)

    async def _limited(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Read the body (at most ``request_bytes``), check it, then hand vLLM the same
        body."""
        cap = self.limits.request_bytes
        too_big = (f"the request has more than {cap} bytes; this server takes at most {cap} "
                   f"({LIMIT_ENVS['request_bytes']})")
        for name, raw in scope.get("headers") or ():
            if name.lower() == b"content-length" and raw.strip().isdigit() and int(raw) > cap:
                return await _refuse(send, 413, too_big, "RequestTooLarge")
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > cap:
                return await _refuse(send, 413, too_big, "RequestTooLarge")
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        try:
            why = self.limits.refusal(json.loads(body))
        except ValueError:
            why = None  # vLLM answers a body that is not JSON itself
        if why is not None:
            return await _refuse(send, 400, why, "BadRequestError")
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: the disconnect vLLM listens for

        return await self.app(scope, replay, send)


async def _refuse(send: Send, status: int, message: str, kind: str) -> None:
    """An error answer in the OpenAI shape vLLM uses (``{"error": {"message": ...}}``)."""
    body = json.dumps({"error": {"message": message, "type": kind, "code": status}}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
