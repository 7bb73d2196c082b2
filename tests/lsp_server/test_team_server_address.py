"""``seam team-server`` checks its address and prints one editors can use (issue 28, finding
7): ``--port 0`` once polled ``http://127.0.0.1:0`` for 30 minutes, ``--host 0.0.0.0``
printed a loopback URL, ``--host ::1`` printed ``http://::1:PORT`` (which the ``vllmServer``
setting refuses), and ``--port -1`` / ``70000`` went to vLLM unchecked."""

from __future__ import annotations

import socket

import pytest

from fim.vllm.http import Http
from lsp_server.team_server import bind_check, editor_urls, local_url, team_server


@pytest.mark.parametrize("port", ["-1", "70000", "http"])
def test_a_port_out_of_range_is_refused_before_anything_starts(port, capsys):
    assert team_server(["--port", port]) == 2
    assert "--port" in capsys.readouterr().err


def test_a_host_that_names_no_address_is_refused(capsys):
    assert team_server(["--host", "no-such-host.invalid", "--port", "0"]) == 2
    assert "no-such-host.invalid" in capsys.readouterr().err


def test_a_port_in_use_is_refused(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert team_server(["--host", "127.0.0.1", "--port", str(port)]) == 2
    assert f"http://127.0.0.1:{port}" in capsys.readouterr().err


def test_port_zero_becomes_a_real_free_port():
    port = bind_check("127.0.0.1", 0)
    assert 0 < port <= 65535
    assert local_url("127.0.0.1", port) == f"http://127.0.0.1:{port}"


def test_a_wildcard_host_prints_a_url_other_machines_can_reach():
    urls = editor_urls("0.0.0.0", 8000)
    assert urls[0] != "http://127.0.0.1:8000" and urls[0].endswith(":8000")
    assert urls[-1] == "http://127.0.0.1:8000"  # an editor on this machine
    assert local_url("::", 8000) == "http://[::1]:8000"


def test_an_ipv6_host_is_bracketed_and_the_client_accepts_it():
    (url,) = editor_urls("::1", 8000)
    assert url == "http://[::1]:8000"
    Http(url, None, 1.0)  # the vllm engine's client takes it (it refused http://::1:8000)
    with pytest.raises(ConnectionError):
        Http("http://::1:8000", None, 1.0)
