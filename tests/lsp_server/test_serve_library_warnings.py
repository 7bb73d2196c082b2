"""``seam serve`` prints no library's warning on stderr (issue 28, finding 8: a suggestion from
``random:santacoder`` printed transformers' ``FutureWarning`` about ``past_key_values`` on
every start), as ``seam complete`` does not (``fim.cli.quiet_library_warnings``)."""

from __future__ import annotations

import pytest

from tests.support.raw_client import SeamProcess

URI = "file:///w/a.py"


@pytest.mark.timeout(300)
def test_serve_prints_no_library_warning_while_suggesting(tmp_path) -> None:
    with SeamProcess(tmp_path, env={"PYTHONWARNINGS": ""}) as srv:
        srv.initialize({"model": "random:santacoder", "maxTokens": 4})
        srv.notify("initialized", {})
        assert srv.wait_loaded()["state"] == "ready"
        srv.open(URI, "def add(a, b):\n    return \n")
        reply = srv.inline(URI, 1, 11, timeout=240)
        assert "result" in reply, reply
        assert srv.shutdown_and_exit() == 0
        assert "Warning" not in srv.stderr, srv.stderr
