"""``seam serve`` with ``engine: "llama-server"`` or ``"openai"`` and only ``modelServer`` set,
against a peer on 127.0.0.1 that speaks llama-server's APIs over a scripted model
(``tests/support/llama_peer.py``): suggestions come, a server that is down is a clear status
naming the settings, the key is never reported, and the host comes back with the server."""

from __future__ import annotations

import asyncio
import logging
import socket

import pytest

from fim.request import CompletionRequest
from lsp_server.model_host import LoadState, ModelHost
from lsp_server.remote_engines import SERVER_API_KEY_ENV
from lsp_server.settings import Settings
from tests.support.llama_peer import LlamaPeer
from tests.support.seam_lsp_client import inline, items_of, lsp_session, open_doc, status

URI = "file:///work/example.py"
SOURCE = "def add(a, b):\n    return \n"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_settings_choose_the_server_for_each_engine():
    s = Settings(engine="llama-server", model_server="http://gpu:8080",
                 model_server_api_key="k", vllm_server="http://team:8000")
    assert (s.remote_server, s.remote_api_key) == ("http://gpu:8080", "k")
    v = Settings(engine="vllm", model_server="http://gpu:8080",
                 vllm_server="http://team:8000")
    assert v.remote_server == "http://team:8000"
    assert Settings().remote_server == ""  # a local engine has none
    assert s.model_key != Settings(engine="llama-server", model_server="http://gpu:8080",
                                   model_server_api_key="k", served_model="other").model_key
    assert Settings(engine="openai", fim_template="starcoder").fim_template == "starcoder"


@pytest.mark.parametrize("kind", ["llama-server", "openai"])
def test_the_host_connects_fails_and_comes_back(kind, monkeypatch, caplog):
    monkeypatch.setenv(SERVER_API_KEY_ENV, "sk-host-secret")
    port = _free_port()
    host = ModelHost(reconnect_first_s=3600.0)
    with caplog.at_level(logging.DEBUG):
        host.load("bundled", engine=kind, server=f"http://127.0.0.1:{port}").join(60)
        st = host.state
        assert st.state is LoadState.ERROR and "seam.modelServer" in st.message
        assert f"127.0.0.1:{port}" in st.message
        peer = LlamaPeer("a + b", left="def add(a, b):\n    return ",
                         api_key="sk-host-secret", port=port)
        # The scripted model speaks santacoder's tokens under a name that says qwen.
        peer.start()
        try:
            if kind == "openai":  # its name says qwen: the fimTemplate setting says otherwise
                host.load("bundled", engine=kind, server=peer.url,
                          template="santacoder").join(60)
            else:
                host.retry().join(60)
            assert host.state.state is LoadState.READY, host.state.message
            res = host.engine.complete(CompletionRequest("def add(a, b):\n    return ", "\n"))
            assert res.middle == "a + b"
            assert set(peer.log.auth) == {"Bearer sk-host-secret"}
        finally:
            host.close()
            peer.stop()
    assert "sk-host-secret" not in caplog.text


@pytest.mark.asyncio
@pytest.mark.timeout(180)
async def test_serve_with_only_engine_and_server_set(tmp_path):
    with LlamaPeer("a + b", left="def add(a, b):\n    return ") as peer:
        settings = {"seam": {"engine": "llama-server", "modelServer": peer.url}}
        async with lsp_session(tmp_path, settings) as lc:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 60
            while (st := await status(lc))["state"] != "ready":
                assert st["state"] != "error", st["message"]
                assert loop.time() < deadline
                await asyncio.sleep(0.1)
            assert st["runtime"]["engine"] == "llama-server"
            open_doc(lc, URI, SOURCE)
            got = items_of(await inline(lc, URI, 1, 11))
            assert [i.insert_text for i in got] == ["a + b"]
