"""Settings and text that used to break every completion silently, with a tiny random model.

A refused setting is shown once, naming the setting and what it accepts, and the previous (or
default) value stays; odd document text gets answers, not tracebacks in the editor's log.
"""

from __future__ import annotations

import pytest

from tests.support.raw_client import SeamProcess, no_traceback

pytestmark = pytest.mark.timeout(600)

MODEL = {"model": "random:santacoder", "device": "cpu", "constrained": False,
         "timeBudgetMs": 60000}


def _editor_log(srv) -> list[str]:
    return [m["params"]["message"] for m in srv.notifications("window/logMessage")]


def _warnings_about(srv, key: str) -> list[str]:
    return [m for m in srv.shown_messages() if f"seam.{key}" in m]


@pytest.fixture
def ready(tmp_path):
    def start(settings: dict):
        srv = SeamProcess(tmp_path)
        srv.initialize({"seam": settings})
        srv.notify("initialized", {})
        st = srv.wait_loaded()
        assert st["state"] == "ready", st
        return srv

    servers = []
    yield lambda settings: servers.append(start(settings)) or servers[-1]
    for srv in servers:
        srv.kill()


def _completes(srv, uri: str, text: str, line: int, col: int) -> dict:
    srv.open(uri, text)
    reply = srv.inline(uri, line, col, timeout=240)
    assert "result" in reply, reply
    return reply["result"]


@pytest.mark.parametrize("key,value,accepted", [
    ("scope", "bogus", '"auto", "line", "statement", "block", "free"'),
    ("maxTokens", 5000, "at most 992"),  # cannot fit the 1024-token CPU context
    ("contextTokens", 1, "at least 128"),
    ("dtype", "float8", '"float32"'),
    ("topK", 0, "from 1 to 1000"),
])
def test_bad_setting_is_refused_once_and_completion_still_works(ready, key, value,
                                                                 accepted) -> None:
    srv = ready({**MODEL, key: value})
    before = srv.status()["settings"]
    for _ in range(3):  # VS Code pushes the whole section again on every change
        srv.notify("workspace/didChangeConfiguration", {"settings": {"seam": {**MODEL,
                                                                              key: value}}})
    assert srv.status()["settings"] == before
    shown = _warnings_about(srv, key)
    assert len(shown) == 1, srv.shown_messages()
    assert accepted in shown[0] and "keeping" in shown[0], shown[0]
    result = _completes(srv, "file:///a.py", "def f(x):\n    return \n", 1, 11)
    assert isinstance(result["items"], list)
    st = srv.status()
    assert st["recent"] and st["recent"][-1]["stop"] != "error", st["recent"]
    no_traceback(srv.stderr, srv.log_text(), *_editor_log(srv))


def test_max_tokens_checked_again_when_the_window_is_known(ready) -> None:
    # With device "auto" the context is unknown until the model has loaded; then the random
    # model's 1024-token window (and the CPU context) cannot hold 5000 new tokens.
    srv = ready({**MODEL, "device": "auto", "maxTokens": 5000})
    srv.wait_for(lambda _: _warnings_about(srv, "maxTokens"), what="a maxTokens warning")
    assert srv.status()["settings"]["maxTokens"] == "auto"
    result = _completes(srv, "file:///a.py", "x = \n", 0, 4)
    assert isinstance(result["items"], list)
    no_traceback(srv.stderr, srv.log_text(), *_editor_log(srv))


def test_settings_section_of_the_wrong_shape(tmp_path) -> None:
    with SeamProcess(tmp_path) as srv:
        srv.initialize({"seam": 5})
        srv.notify("workspace/didChangeConfiguration", {"settings": {"seam": ["x"]}})
        srv.wait_for(lambda _: len([m for m in srv.shown_messages()
                                    if "must be an object" in m]) == 1,
                     what="a warning about the section")
        assert srv.alive()


@pytest.mark.parametrize("name,text,line,col", [
    ("lone surrogate", "s = '\ud800'\nx = \n", 1, 4),
    ("lone low surrogate at the cursor line", "x = '\udfff' + \n", 0, 13),
    ("CR-only line breaks", "import os\rx = \rprint(x)\r", 1, 4),
    ("CRLF line breaks", "import os\r\nx = \r\nprint(x)\r\n", 1, 4),
    ("NUL character", "s = '\x00'\nx = \n", 1, 4),
])
def test_odd_document_text_gets_an_answer(ready, name, text, line, col) -> None:
    srv = ready({**MODEL, "maxTokens": 8})
    for constrained in (False, True):
        srv.notify("workspace/didChangeConfiguration",
                   {"settings": {"seam": {**MODEL, "maxTokens": 8, "constrained": constrained}}})
        result = _completes(srv, f"file:///{constrained}.py", text, line, col)
        for item in result["items"]:
            inserted = item["insertText"]
            if "\r" in text:  # the middle takes the document's line break
                assert "\n" not in inserted.replace("\r\n", ""), inserted
        st = srv.status()
        assert st["recent"][-1]["stop"] != "error", st["recent"][-1]
    no_traceback(srv.stderr, srv.log_text(), *_editor_log(srv))


def test_malformed_notifications_raise_no_popups(tmp_path) -> None:
    with SeamProcess(tmp_path) as srv:
        srv.initialize({"seam": {"model": "random:santacoder"}})
        uri = "file:///m.py"
        srv.open(uri, "x = 1\n")
        for method, params in [
            ("textDocument/didOpen", {}),
            ("textDocument/didOpen", {"textDocument": {"uri": 5}}),
            ("textDocument/didChange", {"textDocument": {"uri": uri}, "contentChanges": "x"}),
            ("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                        "contentChanges": [{"range": {
                                            "start": {"line": 0, "character": 2},
                                            "end": {"line": 0, "character": 1}},
                                            "text": "y"}]}),
            ("textDocument/didChange", {"textDocument": {"uri": uri, "version": 3},
                                        "contentChanges": [{"range": {
                                            "start": {"line": 99, "character": 0},
                                            "end": {"line": 99, "character": 0}},
                                            "text": "z"}]}),
            ("textDocument/didClose", []),
            ("textDocument/didClose", {"textDocument": {"uri": "file:///never-opened.py"}}),
            ("workspace/didChangeConfiguration", {}),
            ("workspace/didChangeConfiguration", {"settings": None}),
            ("$/cancelRequest", {"id": {"x": 1}}),
            ("$/cancelRequest", {"id": 12345}),
            ("initialized", [1, 2]),
        ]:
            srv.notify(method, params)
        assert srv.alive()
        assert not [m for m in srv.shown_messages() if "Error in server" in m or
                    "Error" in m], srv.shown_messages()
        no_traceback(srv.stderr, srv.log_text(), *_editor_log(srv))
