"""A "Replace All" didChange (thousands of ranged changes in one message), and the edits sent
right after it, reach the document whole and in order through the real byte path: framing
(its outline scan), the protocol's decoding and schema check, and the document store."""

from __future__ import annotations

import asyncio
import io
import json

import pytest

from lsp_server.server import SeamServer
from lsp_server.wire.framing import FrameDecoder
from lsp_server.wire.transport import deliver

URI = "file:///w/replace.py"
LINES = 3000


def frame(payload: dict) -> bytes:
    body = json.dumps(payload).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def change(version: int, changes: list[dict]) -> bytes:
    return frame({"jsonrpc": "2.0", "method": "textDocument/didChange",
                  "params": {"textDocument": {"uri": URI, "version": version},
                             "contentChanges": changes}})


def ranged(line: int, start: int, end: int, text: str) -> dict:
    return {"range": {"start": {"line": line, "character": start},
                      "end": {"line": line, "character": end}}, "text": text}


def stream() -> tuple[bytes, str]:
    """The session's bytes, and the text the document must hold after them."""
    text = "".join(f"value_{i} = old_name(x)\n" for i in range(LINES))
    replace_all = [ranged(i, len(f"value_{i} = "), len(f"value_{i} = ") + 8, "new_name")
                   for i in reversed(range(LINES))]
    last = LINES - 1
    at = len(f"value_{last} = ")
    data = (frame({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"capabilities": {}}})
            + frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
            + frame({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
                "textDocument": {"uri": URI, "languageId": "python", "version": 1,
                                 "text": text}}})
            + change(2, replace_all)
            # Both only make sense on the replaced text: the second names "new_name"'s
            # columns on the last line, which moved down by the first.
            + change(3, [ranged(0, 0, 0, "# head\n")])
            + change(4, [ranged(last + 1, at, at + 8, "last")])
            + frame({"jsonrpc": "2.0", "id": 2, "method": "seam/status", "params": {}}))
    expected = "# head\n" + text.replace("old_name", "new_name")
    expected = expected[:expected.rindex("new_name")] + "last" + \
        expected[expected.rindex("new_name") + 8:]
    return data, expected


@pytest.mark.parametrize("chunk", [65536, 4093, 977])
def test_edits_after_a_replace_all_land_on_its_result_in_order(chunk) -> None:
    data, expected = stream()
    server = SeamServer()
    out = io.BytesIO()

    class Writer:
        def write(self, data: bytes) -> None:
            out.write(data)

        def close(self) -> None:
            pass

    async def main() -> None:
        server.protocol.set_writer(Writer())
        server.bind_loop(asyncio.get_running_loop())
        decoder = FrameDecoder()
        for i in range(0, len(data), chunk):
            for event in decoder.feed(data[i:i + chunk]):
                deliver(server, event)
        await asyncio.sleep(0.2)  # the status answer is sent from the loop

    try:
        asyncio.run(main())
        doc = server.documents.get(URI)
        assert doc is not None, "the document was dropped"
        assert doc.version == 4
        assert doc.text == expected
        assert b'"id": 2' in out.getvalue() and b'"result"' in out.getvalue()
    finally:
        server.end_session()
