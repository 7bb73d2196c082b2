"""The framing decoder and the JSON outline scanner, as pure functions of the byte stream."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lsp_server.wire.framing import Frame, FrameDecoder, FrameError, FrameErrorKind, FrameNote
from lsp_server.wire.jsonscan import JsonScan, scan_id

JSON_SCALARS = st.none() | st.booleans() | st.integers(-10**9, 10**9) | st.text(max_size=20)
JSON = st.recursive(JSON_SCALARS, lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)
IDS = st.integers(-2**31, 2**31) | st.text(max_size=12)
HEADERS = st.sampled_from([b"Content-Length: %d\r\n", b"content-length:%d\r\n",
                           b"CONTENT-LENGTH :  %d \r\n", b"Content-Length: %d\n",
                           b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n"
                           b"Content-Length: %d\r\n"])


def framed(payload, header=b"Content-Length: %d\r\n", delta=0) -> bytes:
    body = json.dumps(payload).encode() if not isinstance(payload, bytes) else payload
    return header % (len(body) + delta) + b"\r\n" + body


def decode(stream: bytes, cuts: list[int] | None = None, **limits) -> list:
    decoder = FrameDecoder(**limits)
    events = []
    points = sorted({c % (len(stream) + 1) for c in cuts or []})
    last = 0
    for p in [*points, len(stream)]:
        events += decoder.feed(stream[last:p])
        last = p
    return events + decoder.finish()


def request(msg_id, method="seam/status", params=None):
    return {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params or {}}


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(JSON, HEADERS), min_size=1, max_size=6),
       st.lists(st.integers(0, 10**6), max_size=8))
def test_any_json_in_any_spelling_and_any_chunking_round_trips(messages, cuts) -> None:
    stream = b"".join(framed(p, h) for p, h in messages)
    events = decode(stream, cuts)
    assert [e for e in events if not isinstance(e, Frame)] == []
    assert [e.payload for e in events] == [p for p, _ in messages]


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(IDS, min_size=2, max_size=5, unique=True), st.data())
def test_one_damaged_frame_costs_only_itself(ids, data) -> None:
    damaged = data.draw(st.integers(0, len(ids) - 1))
    kind = data.draw(st.sampled_from(["short", "long", "not-json", "garbage", "glued",
                                      "huge"]))
    delta = data.draw(st.integers(1, 12))
    cuts = data.draw(st.lists(st.integers(0, 10**5), max_size=6))
    pad = {"text": data.draw(st.text(max_size=30))}
    parts = []
    for i, msg_id in enumerate(ids):
        msg = request(msg_id, params=pad)
        if i != damaged:
            parts.append(framed(msg))
        elif kind == "short":
            parts.append(framed(msg, delta=-delta))
        elif kind == "long":
            parts.append(framed(msg, delta=delta))
        elif kind == "not-json":
            parts.append(framed(b"{not json" + b"x" * delta))
        elif kind == "garbage":
            parts.append(b"\x00garbage ]]" * delta)
        elif kind == "glued":  # header characters stuck to the next header: "3Content-..."
            parts.append(data.draw(st.sampled_from([b"3", b"#~b", b"CC", b"x-"])))
        else:
            parts.append(b"Content-Length: 99999999999\r\n\r\n" + json.dumps(msg).encode())
    events = decode(b"".join(parts), cuts, max_content_bytes=10_000)
    frames = [e.payload["id"] for e in events if isinstance(e, Frame)]
    errors = [e for e in events if isinstance(e, FrameError)]
    others = [i for j, i in enumerate(ids) if j != damaged]
    if kind == "long":  # the message is complete before its claimed end: still delivered
        assert frames == ids and not errors
        assert any(isinstance(e, FrameNote) for e in events) or damaged == len(ids) - 1
    else:
        assert frames == others
        assert len(errors) == 1, events
        # An error names the damaged request's id, or no id: never another request's.
        assert errors[0].request_id in (None, ids[damaged])
        if kind == "huge":
            assert errors[0].kind is FrameErrorKind.TOO_LARGE
            assert errors[0].request_id == ids[damaged]


def test_content_over_the_limit_is_never_held() -> None:
    decoder = FrameDecoder(max_content_bytes=1000)
    body = json.dumps(request(1, params={"text": "x" * 5_000_000})).encode()
    events = decoder.feed(b"Content-Length: %d\r\n\r\n" % len(body))
    held = 0
    for i in range(0, len(body), 65536):
        events += decoder.feed(body[i:i + 65536])
        held = max(held, decoder.pending_bytes)
    events += decoder.feed(framed(request(2)))
    assert held <= 65536 + 64
    assert [type(e) for e in events] == [FrameError, Frame]
    assert events[0].kind is FrameErrorKind.TOO_LARGE and events[0].request_id == 1
    assert events[1].payload["id"] == 2


def test_a_terabyte_header_with_no_json_behind_it() -> None:
    events = decode(b"Content-Length: 1000000000000\r\n\r\nhello" + framed(request(3)),
                    max_content_bytes=1000)
    assert isinstance(events[0], FrameError) and events[0].kind is FrameErrorKind.TOO_LARGE
    assert [e.payload["id"] for e in events if isinstance(e, Frame)] == [3]


def test_garbage_is_reported_once_per_stretch() -> None:
    stream = b"x" * 100_000 + b"\r\n\r\n" + b"y" * 1000 + framed(request(1)) + b"zz"
    events = decode(stream, list(range(0, len(stream), 777)))
    kinds = [type(e) for e in events]
    assert kinds.count(FrameError) == 2  # the stretch before the frame, and the tail after
    assert [e.payload["id"] for e in events if isinstance(e, Frame)] == [1]


@pytest.mark.parametrize("head", [
    b"Content-Length: abc\r\n\r\n",
    b"Content-Length: 5\r\nContent-Length: 6\r\n\r\n",
    b"Content-Type: x\r\n\r\n",
    b"No colon here\r\n\r\n",
    b"Content-Length: -5\r\n\r\n",
])
def test_bad_header_parts_are_skipped(head) -> None:
    events = decode(head + b"{}" + framed(request(4)))
    assert isinstance(events[0], FrameError)
    assert [e.payload["id"] for e in events if isinstance(e, Frame)] == [4]


def test_long_header_part_is_refused() -> None:
    events = decode(b"X-Pad: " + b"a" * 20_000 + b"\r\n" + framed(request(5)))
    assert events[0].kind is FrameErrorKind.BAD_HEADER
    assert [e.payload["id"] for e in events if isinstance(e, Frame)] == [5]


def test_stream_ending_inside_a_message() -> None:
    events = decode(framed(request(6))[:-4])
    assert [(e.kind, e.request_id) for e in events] == [(FrameErrorKind.TRUNCATED, 6)]


# ----- the outline scanner ---------------------------------------------------------------------

@settings(max_examples=300)
@given(st.dictionaries(st.text(max_size=6), JSON, max_size=4), IDS | JSON,
       st.integers(0, 5), st.lists(st.integers(0, 10**4), max_size=5))
def test_scan_finds_the_top_level_id_and_the_end(rest, msg_id, position, cuts) -> None:
    items = list(rest.items())
    items = [(k, v) for k, v in items if k != "id"]
    items.insert(min(position, len(items)), ("id", msg_id))
    # A nested decoy that must never be taken for the message's id.
    items.append(("params", {"id": "decoy", "x": [{"id": 999}]}))
    text = json.dumps(dict(items)).encode() + b"  trailing"
    scan = JsonScan()
    end = None
    last = 0
    for p in sorted({c % (len(text) + 1) for c in cuts}) + [len(text)]:
        found = scan.feed(text[last:p])
        if found is not None and end is None:
            end = last + found
        last = p
        if scan.ended:
            break
    assert end == len(text) - len(b"  trailing")
    valid = (isinstance(msg_id, int) and not isinstance(msg_id, bool)) or (
        isinstance(msg_id, str) and len(msg_id.encode()) < 1000)
    assert scan.request_id == (msg_id if valid else None)


@pytest.mark.parametrize("text,expected", [
    (b'{"jsonrpc": "2.0", "id": 7, "method": "x", "params": {"t": "\\"}{', 7),
    (b'{"a": "\\\\", "id": "q\\"x"', 'q"x'),
    (b'{"params": {"id": 1}, "id": 2, "x', 2),
    (b'{"id": 12', None),  # cut short: 12 may be the start of 123, so no id is named
    (b'{"id": "ab', None),
    (b'{"params": [{"id": 1}]', None),
    (b'{"id": 1.5}', None),
    (b'{"id": true}', None),
    (b'{"id": {"x": 1}, "y": 2}', None),
    (b'[{"id": 1}]', None),
    (b'not json "id": 3', None),
])
def test_scan_id_of_broken_bodies(text, expected) -> None:
    assert scan_id(text) == expected


DEEP = st.recursive(JSON_SCALARS | st.sampled_from(['"}]', "\\", '{"a": [', "]]}}"]),
                    lambda inner: st.lists(inner, min_size=1, max_size=3)
                    | st.dictionaries(st.sampled_from(["a", "{", '"]']), inner, min_size=1),
                    max_leaves=40)


@settings(max_examples=200)
@given(st.integers(1, 12), DEEP, st.lists(st.integers(0, 10**4), max_size=12))
def test_scan_follows_deep_nesting_with_brackets_in_strings(levels, inner, cuts) -> None:
    """Below the top level the scan runs over whole nested values in one step: values nested
    deeper than it takes at once, and strings that hold brackets, quotes and backslashes, cut
    anywhere, still end where the JSON ends."""
    value: object = inner
    for _ in range(levels):
        value = [value, {"k": value if levels < 4 else 1}]
    text = json.dumps({"jsonrpc": "2.0", "params": value, "id": 5}).encode() + b"\n{junk"
    scan = JsonScan()
    end, last = None, 0
    for p in sorted({c % (len(text) + 1) for c in cuts}) + [len(text)]:
        found = scan.feed(text[last:p])
        if found is not None and end is None:
            end = last + found
        last = p
    assert end == len(text) - len(b"\n{junk")
    assert scan.request_id == 5


class _CountingScan(JsonScan):
    steps = 0

    def _string(self, data, i):
        _CountingScan.steps += 1
        return super()._string(data, i)

    def _structural(self, c):
        _CountingScan.steps += 1
        return super()._structural(c)


def test_a_replace_all_body_is_scanned_in_few_python_steps() -> None:
    """A didChange with 5,000 ranged changes (what "Replace All" sends) is outlined in a few
    steps per chunk, not one per string and bracket (about 120,000 before: half a second of
    the event loop at 40,000 changes)."""
    changes = [{"range": {"start": {"line": i, "character": 9},
                          "end": {"line": i, "character": 17}}, "text": "new_name"}
               for i in range(5000)]
    body = json.dumps({"jsonrpc": "2.0", "method": "textDocument/didChange",
                       "params": {"textDocument": {"uri": "file:///a.py", "version": 2},
                                  "contentChanges": changes}}).encode()
    scan = _CountingScan()
    _CountingScan.steps = 0
    ends = [scan.feed(body[i:i + 65536]) for i in range(0, len(body), 65536)]
    assert ends[-1] == len(body) - (len(body) - 1) // 65536 * 65536
    chunks = len(ends)
    assert _CountingScan.steps < 40 + 20 * chunks, _CountingScan.steps


def test_a_long_document_is_scanned_in_few_python_steps() -> None:
    """A didOpen's text is one string cut by every chunk's end, with an escape on each line:
    its rest is run over in one match, not a step per escape (one per line before)."""
    text = "".join(f"value_{i} = 'tab\\there'\n" for i in range(5000))
    body = json.dumps({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
        "textDocument": {"uri": "file:///a.py", "languageId": "python", "version": 1,
                         "text": text}}}).encode()
    for chunk in (65536, 4093):
        scan = _CountingScan()
        _CountingScan.steps = 0
        ends = [scan.feed(body[i:i + chunk]) for i in range(0, len(body), chunk)]
        assert ends[-1] == len(body) - (len(body) - 1) // chunk * chunk
        assert _CountingScan.steps < 40 + 4 * len(ends), (chunk, _CountingScan.steps)
