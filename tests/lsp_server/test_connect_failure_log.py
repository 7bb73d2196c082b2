"""A vLLM server that cannot be reached is logged as one line, not a traceback (issue 28,
finding 8: every failed connect logged a full traceback)."""

from __future__ import annotations

import logging
import socket

from lsp_server.model_host import ModelHost


def test_a_failed_connect_is_one_line_without_a_traceback(caplog) -> None:
    caplog.set_level(logging.INFO, logger="lsp_server.model_host")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    host = ModelHost(reconnect_first_s=3600.0)
    try:
        host.load("x", engine="vllm", server=f"http://127.0.0.1:{port}").join(60)
        failed = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(failed) == 1
        assert failed[0].exc_info is None and f"127.0.0.1:{port}" in failed[0].getMessage()
        assert "cannot be reached" in failed[0].getMessage()
    finally:
        host.close()
