"""Bounded random fuzz of ``seam serve``'s framing and message shapes, through the raw client.

One server per test takes every example. Each example is a batch of messages, some framed
correctly (in any header spelling), some damaged (a Content-Length a few bytes off, a body
over the size limit, garbage between frames), some of them requests that are well-formed
JSON-RPC and some arbitrary JSON. After every batch a sentinel request must be answered.
At the end, on the whole run:

* every well-formed request sent in an intact frame was answered exactly once;
* no request was answered twice, and no answer names an id that was never sent;
* the process is alive, wrote nothing but frames on stdout, and no traceback anywhere;
* its resident memory did not grow with the traffic.

Kept to seconds: no model is loaded (``initialized`` is never sent), so completions answer
at once and only the protocol is exercised. ``SEAM_FUZZ_EXAMPLES=5000`` runs a deeper search.
"""

from __future__ import annotations

import itertools
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.raw_client import SeamProcess, frame, no_traceback

pytestmark = pytest.mark.timeout(900)

LIMIT_MB = 1
EXAMPLES = int(os.environ.get("SEAM_FUZZ_EXAMPLES", "60"))
URIS = [f"file:///fuzz/{i}.py" for i in range(4)]
METHODS = [
    "seam/status", "textDocument/inlineCompletion", "textDocument/completion",
    "textDocument/didOpen", "textDocument/didChange", "textDocument/didClose",
    "workspace/didChangeConfiguration", "$/cancelRequest", "initialize", "no/such/method",
    "$/setTrace", "textDocument/hover", "workspace/executeCommand",
]
HEADERS = [b"Content-Length: %d\r\n", b"content-length:%d\r\n", b"CONTENT-LENGTH :  %d \r\n",
           b"Content-Length: %d\n",
           b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: %d\r\n"]

TEXT = st.text(st.characters(codec="utf-8") | st.sampled_from(
    ["\r", "\n", "\ud800", "\udfff", "\x00", "😋", "\u2028", "\t"]), max_size=60)
SCALAR = st.none() | st.booleans() | st.integers(-2**40, 2**40) | TEXT | st.floats(
    allow_nan=False, allow_infinity=False)
ANY_JSON = st.recursive(SCALAR, lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(st.text(max_size=10), inner, max_size=4),
                        max_leaves=12)
POSITION = st.fixed_dictionaries({"line": st.integers(-3, 40) | ANY_JSON,
                                  "character": st.integers(-3, 200)})
URI = st.sampled_from(URIS) | TEXT


SETTING_KEYS = ["maxTokens", "scope", "topK", "contextTokens", "languages", "dtype", "device",
                "constrained", "trustRemoteCode", "timeBudgetMs"]
CHANGE = st.fixed_dictionaries({"text": TEXT}) | st.fixed_dictionaries({
    "range": st.fixed_dictionaries({"start": POSITION, "end": POSITION}), "text": TEXT})


def _params(method: str):
    doc = st.fixed_dictionaries({"uri": URI})
    shaped = {
        "textDocument/inlineCompletion": st.fixed_dictionaries({
            "textDocument": doc, "position": POSITION,
            "context": st.fixed_dictionaries({"triggerKind": st.integers(0, 3)})}),
        "textDocument/completion": st.fixed_dictionaries({
            "textDocument": doc, "position": POSITION}),
        "textDocument/didOpen": st.fixed_dictionaries({"textDocument": st.fixed_dictionaries({
            "uri": URI, "languageId": st.sampled_from(["python", "markdown"]) | TEXT,
            "version": st.integers(0, 99), "text": TEXT})}),
        "textDocument/didChange": st.fixed_dictionaries({
            "textDocument": st.fixed_dictionaries({"uri": URI, "version": st.integers(0, 99)}),
            "contentChanges": st.lists(CHANGE, max_size=3)}),
        "textDocument/didClose": st.fixed_dictionaries({"textDocument": doc}),
        "workspace/didChangeConfiguration": st.fixed_dictionaries({
            "settings": st.fixed_dictionaries({"seam": st.dictionaries(
                st.sampled_from(SETTING_KEYS), SCALAR, max_size=4)})}),
    }.get(method)
    return (shaped | ANY_JSON) if shaped is not None else ANY_JSON


@st.composite
def messages(draw):
    """(kind, payload): a request, a notification, or any JSON value at all."""
    kind = draw(st.sampled_from(["request", "request", "notification", "json"]))
    if kind == "json":
        return kind, draw(ANY_JSON)
    method = draw(st.sampled_from(METHODS))
    message = {"jsonrpc": "2.0", "method": method}
    if draw(st.booleans()) or method != "seam/status":
        message["params"] = draw(_params(method))
    return kind, message


@st.composite
def items(draw):
    """One message and how it is put on the wire."""
    kind, payload = draw(messages())
    damage = draw(st.sampled_from(["none"] * 6 + ["short", "long", "garbage-before", "huge"]))
    if damage in ("short", "long", "huge") and not isinstance(payload, dict):
        damage = "none"  # only an object's end can be found early (see framing)
    return {"kind": kind, "payload": payload, "damage": damage,
            "header": draw(st.sampled_from(HEADERS)), "delta": draw(st.integers(1, 9)),
            "garbage": draw(st.binary(max_size=40).filter(
                lambda b: b"content-length" not in b.lower() and b"{" not in b))}


class Ledger:
    """What was sent: well-formed requests in intact frames, and every other id."""

    def __init__(self) -> None:
        self.counter = itertools.count()
        self.tracked: set[str] = set()
        self.sent: set = set()
        self.wire: dict[str, bytes] = {}  # what each tracked request went out as

    def encode(self, item: dict) -> bytes:
        payload = item["payload"]
        if isinstance(payload, dict) and "id" in payload or item["kind"] == "request":
            payload = {**payload, "id": f"id-{next(self.counter)}"} if isinstance(
                payload, dict) else payload
        if isinstance(payload, dict) and "id" in payload:
            self.sent.add(payload["id"])
            if item["kind"] == "request" and item["damage"] in ("none", "garbage-before"):
                self.tracked.add(payload["id"])
        try:
            body = json.dumps(payload).encode("utf-8", "surrogatepass")
        except ValueError:
            body = b"{}"
        damage = item["damage"]
        prefix = item["garbage"] if damage == "garbage-before" else b""
        if damage == "huge":
            return prefix + b"Content-Length: %d\r\n\r\n" % (LIMIT_MB * 2**20 + 1) + body
        delta = {"short": -item["delta"], "long": item["delta"]}.get(damage, 0)
        if damage == "short" and delta + len(body) < 0:
            delta = -len(body)
        wire = prefix + frame(body, length_delta=delta, header=item["header"])
        if isinstance(payload, dict) and payload.get("id") in self.tracked:
            self.wire[payload["id"]] = wire
        return wire


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz")
    srv = SeamProcess(tmp, "--max-message-mb", str(LIMIT_MB))
    srv.initialize({"seam": {"model": "random:santacoder"}})
    yield srv
    srv.kill()


def test_fuzzed_traffic(fuzzed) -> None:
    srv = fuzzed
    ledger = Ledger()
    sentinels = itertools.count()
    rss_samples: list[int] = []

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(items(), min_size=1, max_size=8))
    def batch(wire_items) -> None:
        data = b"".join(ledger.encode(item) for item in wire_items)
        sentinel = f"sentinel-{next(sentinels)}"
        ledger.sent.add(sentinel)
        ledger.tracked.add(sentinel)
        srv.send_raw(data + frame({"jsonrpc": "2.0", "id": sentinel, "method": "seam/status"}))
        assert "result" in srv.response(sentinel, timeout=60)
        assert srv.running(), srv.stderr[-3000:]
        rss_samples.append(srv.rss_kb())

    batch()
    # Let requests still in flight finish, then take stock of the whole run.
    last = srv.request("seam/status", {})
    srv.response(last)
    try:
        srv.wait_for(lambda _: all(srv.responses(i) for i in ledger.tracked), timeout=60,
                     what="answers to every well-formed request")
    except AssertionError:
        missing = {i: ledger.wire.get(i, b"")[:600] for i in ledger.tracked
                   if not srv.responses(i)}
        raise AssertionError(f"unanswered: {missing}") from None
    answers: dict = {}
    for m in srv.received:
        if "method" not in m and ("result" in m or "error" in m):
            answers[m.get("id")] = answers.get(m.get("id"), 0) + 1
    assert all(answers.get(i) == 1 for i in ledger.tracked), \
        {i: answers.get(i) for i in ledger.tracked if answers.get(i) != 1}
    twice = {i: n for i, n in answers.items() if i is not None and n > 1}
    assert not twice, twice
    unknown = set(answers) - ledger.sent - {None, last} - {1000}  # 1000: initialize
    assert not unknown, unknown
    assert srv.running()
    assert not srv.reader.violations, srv.reader.violations
    no_traceback(srv.stderr, srv.log_text())
    # Memory: after the first tenth of the run (allocator warm-up), flat within 30 MB.
    warm = rss_samples[len(rss_samples) // 10]
    assert max(rss_samples) - warm < 30_000, (warm, max(rss_samples))


def test_rss_stays_flat_under_heavy_traffic(tmp_path) -> None:
    """Big documents opened, changed and closed, messages over the limit, broken frames:
    a leak of any of them per round would show as tens of megabytes."""
    with SeamProcess(tmp_path, "--max-message-mb", str(LIMIT_MB)) as srv:
        srv.initialize({"seam": {"model": "random:santacoder"}})
        text = "value = compute(1, 'padding to make the line longer')\n" * 4000  # 220 kB
        big = "x" * (LIMIT_MB * 2**20 + 10)

        def round_(i: int) -> None:
            uri = f"file:///rss/{i % 3}.py"
            srv.open(uri, text, version=i)
            srv.notify("textDocument/didChange", {
                "textDocument": {"uri": uri, "version": i + 1},
                "contentChanges": [{"range": {"start": {"line": 10, "character": 0},
                                              "end": {"line": 10, "character": 0}},
                                    "text": "y = 2\n"}]})
            srv.send_raw(frame({"jsonrpc": "2.0", "id": f"big-{i}", "method": "seam/status",
                                "params": {"t": big}}))
            srv.send_raw(frame({"jsonrpc": "2.0", "id": f"short-{i}", "method": "x",
                                "params": {"t": text}}, length_delta=-50))
            srv.send_raw(b"garbage " * 1000)
            srv.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
            assert "result" in srv.call("seam/status", {})

        for i in range(5):
            round_(i)
        warm = srv.rss_kb()
        for i in range(5, 35):
            round_(i)
        grown = srv.rss_kb() - warm
        # 30 rounds moved ~40 MB through the server; a per-round leak of any of it shows.
        assert grown < 15_000, f"RSS grew by {grown} kB"
        assert srv.status()["documents"] == 0
        no_traceback(srv.stderr, srv.log_text())
