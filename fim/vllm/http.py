"""JSON over HTTP to a model server: the connection, the headers, the errors.

Split out of ``fim.vllm.client`` so that the transport (what a misbehaving peer can do to the
client: how much it may send, how long it may take) lives in one place, apart from what the
engine asks of the server.
"""

from __future__ import annotations

import http.client
import json
import urllib.parse
from collections.abc import Callable


class VllmError(ConnectionError):
    """The server could not be reached or answered something that is not a completion (a
    ``ConnectionError``: callers that report I/O failures report this one too)."""


class Http:
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
        return json_or_error(self.url, resp.status, data)


def json_or_error(url: str, status: int, data: bytes) -> dict:
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
