"""The route guard as ASGI (``fim.vllm.route_guard``) in front of a small recording app, and
``seam team-server``'s command line: the plugin named only where it is not installed, the
guard always, the limits passed on, speculative decoding refused.  No vLLM needed: the
guard is plain ASGI, and the real server is in test_plain_vllm_serve.py."""

from __future__ import annotations

import asyncio
import json

import pytest

from fim.vllm.route_guard import LIMIT_ENVS, LimitError, Limits, RouteGuard
from lsp_server import team_server


class Recorder:
    """An ASGI app that answers 200 and keeps the body it was handed."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def __call__(self, scope, receive, send) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.bodies.append(body)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


def _run(guard: RouteGuard, path: str, method: str = "GET", body: bytes = b"",
         headers: dict[str, str] | None = None, chunk: int = 0) -> tuple[int, dict]:
    pieces = [body[i:i + chunk] for i in range(0, len(body), chunk)] if chunk else [body]
    messages = [{"type": "http.request", "body": p, "more_body": k < len(pieces) - 1}
                for k, p in enumerate(pieces)]
    sent: list[dict] = []

    async def receive() -> dict:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path, "root_path": "",
             "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]}
    asyncio.run(guard(scope, receive, send))
    payload = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], json.loads(payload or b"{}")


KEY = "s3cret"
AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.mark.parametrize("path", ["/tokenize", "/detokenize", "/metrics", "/v1/models",
                                  "/version", "/load", "/anything"])
def test_with_a_key_every_route_but_health_is_closed(path):
    guard = RouteGuard(Recorder(), key=KEY, limits=Limits())
    status, answer = _run(guard, path)
    assert status == 401 and "API key" in answer["error"]["message"]
    assert _run(guard, path, headers=AUTH)[0] == 200
    assert _run(guard, path, headers={"Authorization": f"Basic {KEY}"})[0] == 401
    assert _run(guard, path, headers={"Authorization": "Bearer wrong"})[0] == 401


def test_health_and_preflight_stay_open_and_no_key_opens_everything():
    guard = RouteGuard(Recorder(), key=KEY, limits=Limits())
    assert _run(guard, "/health")[0] == 200
    assert _run(guard, "/tokenize", method="OPTIONS")[0] == 200
    assert _run(RouteGuard(Recorder(), key="", limits=Limits()), "/tokenize")[0] == 200


def test_the_body_reaches_the_server_unchanged():
    app = Recorder()
    guard = RouteGuard(app, key=None, limits=Limits())
    body = json.dumps({"prompt": [1, 2, 3], "max_tokens": 8}).encode()
    assert _run(guard, "/v1/completions", "POST", body, chunk=5)[0] == 200
    assert app.bodies == [body]


LIMITS = Limits(request_bytes=1000, context_chars=50, new_tokens=16, prompt_tokens=10)


@pytest.mark.parametrize("body,status,names", [
    ({"vllm_xargs": {"seam_left": "x" * 51}}, 400, ("seam_left", "50", "CONTEXT_CHARS")),
    ({"vllm_xargs": {"seam_right": "x" * 51}}, 400, ("seam_right", "50", "CONTEXT_CHARS")),
    ({"max_tokens": 17}, 400, ("max_tokens", "16", "NEW_TOKENS")),
    ({"max_completion_tokens": 17}, 400, ("max_completion_tokens", "16")),
    ({"prompt": list(range(11))}, 400, ("11 tokens", "10", "PROMPT_TOKENS")),
    ({"prompt": "#" * 2000}, 413, ("1000", "REQUEST_BYTES")),
])
def test_a_request_over_a_limit_is_refused_naming_it(body, status, names):
    app = Recorder()
    guard = RouteGuard(app, key=None, limits=LIMITS)
    for chunk in (0, 7):  # in one piece, and streamed in small pieces
        got, answer = _run(guard, "/v1/completions", "POST", json.dumps(body).encode(),
                           chunk=chunk)
        assert got == status and all(n in answer["error"]["message"] for n in names), answer
    assert app.bodies == []  # vLLM never saw it


def test_a_declared_length_over_the_limit_is_refused_before_reading():
    guard = RouteGuard(Recorder(), key=None, limits=LIMITS)
    got, _ = _run(guard, "/v1/completions", "POST", b"{}", headers={"Content-Length": "5000"})
    assert got == 413


def test_requests_within_the_limits_pass():
    app = Recorder()
    guard = RouteGuard(app, key=None, limits=LIMITS)
    body = {"vllm_xargs": {"seam_left": "x" * 50, "seam_right": ""}, "max_tokens": 16,
            "prompt": list(range(10))}
    assert _run(guard, "/v1/completions", "POST", json.dumps(body).encode())[0] == 200
    assert _run(guard, "/v1/completions", "POST", b"not json")[0] == 200  # vLLM answers it


def test_limits_read_from_the_environment():
    env = {LIMIT_ENVS["new_tokens"]: "32", LIMIT_ENVS["context_chars"]: ""}
    assert Limits.from_env(env) == Limits(new_tokens=32)
    assert Limits.from_env(Limits(new_tokens=7).as_env()).new_tokens == 7
    for bad in ("0", "-3", "many", "1.5"):
        with pytest.raises(LimitError, match=LIMIT_ENVS["new_tokens"]):
            Limits.from_env({LIMIT_ENVS["new_tokens"]: bad})


def test_the_command_names_the_plugin_only_where_it_is_not_installed():
    installed = team_server.vllm_command("m", "127.0.0.1", 8000, 4096, [], installed=True)
    flagged = team_server.vllm_command("m", "127.0.0.1", 8000, 4096, [], installed=False)
    assert "--logits-processors" not in installed
    assert flagged[flagged.index("--logits-processors") + 1] == team_server.PLUGIN
    for cmd in (installed, flagged):
        assert cmd[cmd.index("--middleware") + 1] == team_server.GUARD


@pytest.mark.parametrize("arg", ["--speculative-config", "--speculative-config={}", "-sc"])
def test_speculative_decoding_is_refused_with_the_reason(arg, capsys):
    code = team_server.team_server(["--port", "0", "--", arg, "{}"])
    assert code == 2 and "speculative decoding is off" in capsys.readouterr().err
