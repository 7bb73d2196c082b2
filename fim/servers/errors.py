"""The one error the server engines raise, with a message meant for the user's status line.

It is a ``ConnectionError`` (as ``fim.vllm.http.VllmError`` is) so that the editor-side model
host, which reports I/O failures as "the server is down or misconfigured", reports these too.
"""

from __future__ import annotations

from fim.vllm.http import VllmError


class ServerError(ConnectionError):
    """The model server cannot serve Seam: down, refusing, or answering something unusable."""


def from_transport(err: VllmError, name: str) -> ServerError:
    """The shared transport's error (``fim.vllm.http``, which calls every peer "the vLLM
    server") with the server named as the user chose it."""
    return ServerError(str(err).replace("the vLLM server", f"the {name}"))


def redact(text: str, secret: str | None) -> str:
    """``text`` with ``secret`` (an API key) blanked out: a server may echo the key back in an
    error, and the error goes to the log and the status line."""
    if secret and len(secret) >= 4:
        return text.replace(secret, "***")
    return text
