"""The LSP lifecycle as the specification states it, seen from a raw client."""

from __future__ import annotations

import pytest

from tests.support.raw_client import SeamProcess, no_traceback

pytestmark = pytest.mark.timeout(300)

DOC = {"textDocument": {"uri": "file:///a.py", "languageId": "python", "version": 1,
                        "text": "x = 1\n"}}


def test_requests_before_initialize_get_server_not_initialized(tmp_path) -> None:
    with SeamProcess(tmp_path) as srv:
        for method, params in (("seam/status", {}), ("shutdown", None),
                               ("textDocument/inlineCompletion", {})):
            reply = srv.call(method, params)
            assert reply["error"]["code"] == -32002, reply
        # A notification before initialize is dropped (the document is not opened).
        srv.notify("textDocument/didOpen", DOC)
        srv.initialize()
        assert srv.status()["documents"] == 0
        assert srv.shutdown_and_exit() == 0
        no_traceback(srv.stderr, srv.log_text())


def test_requests_after_shutdown_are_errors_and_exit_is_0(tmp_path) -> None:
    with SeamProcess(tmp_path) as srv:
        srv.initialize()
        assert srv.call("shutdown")["result"] is None
        for method in ("seam/status", "shutdown", "textDocument/completion"):
            reply = srv.call(method, {})
            assert reply["error"]["code"] == -32600, reply
        srv.notify("textDocument/didOpen", DOC)  # dropped, no answer, no crash
        srv.notify("exit")
        assert srv.wait() == 0


def test_exit_without_shutdown_exits_1(tmp_path) -> None:
    with SeamProcess(tmp_path) as srv:
        srv.initialize()
        srv.notify("exit")
        assert srv.wait() == 1


def test_exit_before_initialize_exits_1(tmp_path) -> None:
    with SeamProcess(tmp_path) as srv:
        srv.notify("exit")
        assert srv.wait() == 1


def test_client_gone_without_exit(tmp_path) -> None:
    with SeamProcess(tmp_path) as srv:
        srv.initialize()
        srv.close_stdin()
        assert srv.wait() == 1
    with SeamProcess(tmp_path) as srv:
        srv.initialize()
        srv.call("shutdown")
        srv.close_stdin()
        assert srv.wait() == 0


def test_status_request_without_params(tmp_path) -> None:
    with SeamProcess(tmp_path) as srv:
        srv.initialize({"seam": {"model": "random:santacoder", "device": "cpu"}})
        reply = srv.call("seam/status")  # no "params" member at all
        assert "result" in reply and reply["result"]["state"] == "idle", reply
        reply = srv.call("seam/status", None)
        assert "result" in reply, reply
        srv.notify("initialized")  # a params-less notification that wants an (empty) object
        assert srv.shutdown_and_exit() == 0


def test_initialize_only_once(tmp_path) -> None:
    with SeamProcess(tmp_path) as srv:
        srv.initialize()
        reply = srv.call("initialize", {"processId": None, "rootUri": None,
                                        "capabilities": {}})
        assert reply["error"]["code"] == -32600, reply
        assert srv.alive()


def test_exit_sent_as_a_request_is_refused(tmp_path) -> None:
    with SeamProcess(tmp_path) as srv:
        srv.initialize()
        assert srv.call("exit")["error"]["code"] == -32600
        assert srv.alive()


def test_unknown_methods(tmp_path) -> None:
    with SeamProcess(tmp_path) as srv:
        srv.initialize()
        assert srv.call("no/such/method", {})["error"]["code"] == -32601
        assert srv.call("$/somethingNew", {})["error"]["code"] == -32601
        srv.notify("$/somethingNew", {"x": 1})  # ignored silently
        srv.notify("no/such/notification")
        assert srv.alive()
        assert not [m for m in srv.shown_messages() if "Error" in m]
        no_traceback(srv.stderr, srv.log_text())


def test_a_load_that_fails_before_the_progress_token_is_granted_stays_an_error(tmp_path) -> None:
    """A client slow to grant the progress token must not see a progress begin/end pair after
    the load already failed: clients read a progress end as "loaded" and hid the error."""
    with SeamProcess(tmp_path) as srv:
        srv.initialize({"seam": {"model": str(tmp_path / "no-such-model")}},
                       capabilities={"window": {"workDoneProgress": True}})
        srv.notify("initialized", {})
        create = srv.wait_for(lambda got: [m for m in got
                                           if m.get("method") == "window/workDoneProgress/create"],
                              what="a progress token request")[0]
        # Only after the failure has been reported does the client grant the token.
        srv.wait_for(lambda _: [n for n in srv.notifications("seam/status")
                                if n["params"]["state"] == "error"], what="the error status")
        srv.send({"jsonrpc": "2.0", "id": create["id"], "result": None})
        assert srv.status()["state"] == "error"  # a round trip after the grant was handled
        kinds = [n["params"]["value"]["kind"] for n in srv.notifications("$/progress")]
        assert kinds == [], kinds
        assert any("no-such-model" in m for m in srv.shown_messages())
        assert srv.shutdown_and_exit() == 0
