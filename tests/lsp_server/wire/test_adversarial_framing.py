"""Off-spec bytes on stdin: ``seam serve`` answers what it can, errors the rest, keeps serving.

Each test drives a real ``seam serve`` subprocess with the raw client and, after the bad input,
checks that the server still answers (the old reader stayed up but deaf) and never wrote a
traceback.
"""

from __future__ import annotations

import json

import pytest

from tests.support.raw_client import SeamProcess, frame, no_traceback

pytestmark = pytest.mark.timeout(300)

def status_req(msg_id):
    # The id first, as vscode-jsonrpc and Neovim write it: a body cut short still shows it.
    return {"jsonrpc": "2.0", "id": msg_id, "method": "seam/status", "params": {}}


@pytest.fixture
def server(tmp_path):
    with SeamProcess(tmp_path) as srv:
        srv.initialize()
        yield srv
        assert srv.running(), srv.stderr
        no_traceback(srv.stderr, srv.log_text())
        assert not srv.reader.violations, srv.reader.violations


@pytest.mark.parametrize("header", [
    b"content-length: %d\r\n",
    b"CONTENT-LENGTH: %d\r\n",
    b"Content-Length:%d\r\n",
    b"Content-Length :  %d  \r\n",
    b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: %d\r\n",
    b"Content-Length: %d\r\nX-Custom: 1\r\n",
    b"Content-Length: %d\n",  # a bare LF, as some hand-written clients send
])
def test_header_spellings_are_read(server, header) -> None:
    server.send_raw(frame(status_req(1), header=header))
    reply = server.response(1)
    assert "result" in reply, reply


def test_length_too_small_gets_a_parse_error_for_that_request(server) -> None:
    server.send_raw(frame(status_req(1), length_delta=-3))
    reply = server.response(1)
    assert reply["error"]["code"] == -32700
    assert "result" in server.call("seam/status", {})


def test_length_too_large_is_still_answered_while_the_client_waits(server) -> None:
    # The client sends one frame whose header claims 3 bytes more, then waits for the answer.
    server.send_raw(frame(status_req(1), length_delta=3))
    assert "result" in server.response(1)
    assert "result" in server.call("seam/status", {})


def test_length_too_large_followed_at_once_by_the_next_message(server) -> None:
    server.send_raw(frame(status_req(1), length_delta=40) + frame(status_req(2)))
    assert "result" in server.response(1)
    assert "result" in server.response(2)


def test_body_that_is_not_json(server) -> None:
    server.send_raw(frame(b"{this is not json}"))
    reply = server.wait_for(lambda ms: [m for m in ms if m.get("error")], what="an error")[0]
    assert reply["error"]["code"] == -32700 and reply["id"] is None
    assert server.alive()


@pytest.mark.parametrize("body", [
    b"\xff\xfe{}",                         # not UTF-8
    b'{"jsonrpc": "2.0", "id": NaN}',      # not JSON (Python's json would accept it)
    b"[" * 100_000 + b"]" * 100_000,       # nests beyond any recursion limit
    b'{"id": 1' + b"0" * 5000 + b"}",     # an integer beyond Python's digit limit
    b"",                                   # Content-Length: 0
])
def test_unparseable_bodies(server, body) -> None:
    server.send_raw(frame(body))
    assert server.alive()
    assert any(m.get("error", {}).get("code") == -32700 for m in server.received)


def test_huge_content_length_is_refused_without_allocating(server) -> None:
    rss = server.rss_kb()
    body = json.dumps(status_req(7)).encode()
    server.send_raw(b"Content-Length: 1000000000000\r\n\r\n" + body)
    reply = server.response(7)
    assert reply["error"]["code"] == -32600 and "limit" in reply["error"]["message"]
    assert server.alive()
    assert server.rss_kb() - rss < 50_000


def test_message_over_the_limit_is_skipped_and_named(tmp_path) -> None:
    with SeamProcess(tmp_path, "--max-message-mb", "1") as srv:
        srv.initialize()
        text = "x = 1\n" * 400_000  # 2.4 MB
        srv.send({"jsonrpc": "2.0", "id": 5, "method": "seam/status",
                  "params": {"padding": text}})
        reply = srv.response(5)
        assert reply["error"]["code"] == -32600
        assert "limit of 1048576 bytes" in reply["error"]["message"]
        # A notification that large (a document) is skipped, and the user is told once.
        for version in (1, 2):
            srv.notify("textDocument/didOpen", {"textDocument": {
                "uri": "file:///big.py", "languageId": "python", "version": version,
                "text": text}})
        st = srv.status()
        assert st["documents"] == 0
        warnings = [m for m in srv.shown_messages() if "skipped a message" in m]
        assert len(warnings) == 1, srv.shown_messages()
        assert srv.running()
        no_traceback(srv.stderr, srv.log_text())


def test_json_without_headers_is_answered(server) -> None:
    server.send_raw(json.dumps(status_req(3)).encode())
    reply = server.response(3)
    assert reply["error"]["code"] == -32700
    # Garbage then a good frame: the server finds the header again.
    server.send_raw(b"\x00\x01 garbage {{{ " + frame(status_req(4)))
    assert "result" in server.response(4)


def test_unsupported_charset(server) -> None:
    server.send_raw(frame(status_req(8), header=b"Content-Length: %d\r\n"
                                                b"Content-Type: text/plain; charset=latin-1\r\n"))
    assert server.response(8)["error"]["code"] == -32700
    assert server.alive()


@pytest.mark.parametrize("payload,answered_id", [
    ([], None),
    ([status_req(9)], None),                                   # a batch: not part of LSP
    (5, None),
    ("text", None),
    ({"jsonrpc": "1.0", "id": 10, "method": "seam/status"}, 10),
    ({"jsonrpc": "2.0", "id": 11}, 11),                        # neither request nor response
    ({"jsonrpc": "2.0", "id": {"x": 1}, "method": "seam/status"}, None),
    ({"jsonrpc": "2.0", "id": True, "method": "seam/status"}, None),
    ({"jsonrpc": "2.0", "id": 12, "method": 7}, 12),
    ({"jsonrpc": "2.0", "id": 13, "method": "seam/status", "params": 3}, 13),
])
def test_non_json_rpc_payloads_get_invalid_request(server, payload, answered_id) -> None:
    server.send(payload)
    err = server.wait_for(lambda ms: [m for m in ms if m.get("error")], what="an error")[0]
    assert err["error"]["code"] == -32600, err
    assert err["id"] == answered_id
    assert server.alive()
    assert not server.responses(9)  # the batch's member was not run either


def test_request_shaped_object_inside_params_is_never_answered(server) -> None:
    inner = {"jsonrpc": "2.0", "id": 777, "method": "shutdown", "params": None}
    server.send({"jsonrpc": "2.0", "id": 50, "method": "textDocument/inlineCompletion",
                 "params": {"textDocument": {"uri": "file:///x.py"},
                            "position": {"line": 0, "character": 0},
                            "context": {"triggerKind": 1}, "nested": inner}})
    server.send({"jsonrpc": "2.0", "id": 51, "method": "seam/status",
                 "params": {"deep": [{"x": inner}, inner]}})
    assert server.response(50) and "result" in server.response(51)
    assert server.alive()  # and not shut down by the nested "shutdown"
    ids = {m.get("id") for m in server.received if "method" not in m}
    assert 777 not in ids, ids


def test_every_frame_split_into_single_bytes(server) -> None:
    data = frame(status_req(20), header=b"content-length:%d\r\n") + frame(status_req(21))
    for i in range(len(data)):
        server.send_raw(data[i:i + 1])
    assert "result" in server.response(20) and "result" in server.response(21)
