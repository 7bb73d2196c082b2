"""No code runs because of a setting, and the log stays private.

The "model" here is a directory whose config asks transformers to import the directory's own
``evil.py``, which writes a marker file when imported: the marker proves that the model's
code ran. Without ``seam serve --trust-remote-code`` no setting, however it arrives, may make
it run; with the flag it does (the positive control: the test would see it).
"""

from __future__ import annotations

import json
import stat

import pytest

from tests.support.raw_client import SeamProcess, no_traceback

pytestmark = pytest.mark.timeout(600)

SECRET = "hunter2-correct-horse-battery-staple"


@pytest.fixture
def evil_model(tmp_path):
    folder = tmp_path / "evil-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "model_type": "seam-evil",
        "auto_map": {"AutoConfig": "evil.EvilConfig", "AutoModelForCausalLM": "evil.EvilModel",
                     "AutoTokenizer": ["evil.EvilTokenizer", None]}}))
    (folder / "evil.py").write_text(
        "import os\nfrom pathlib import Path\n"
        "Path(os.environ['SEAM_TEST_MARKER']).write_text('ran')\n"
        "from transformers import PretrainedConfig\n\n\n"
        "class EvilConfig(PretrainedConfig):\n    model_type = 'seam-evil'\n")
    marker = tmp_path / "marker"
    return folder, marker


def _settings(folder) -> dict:
    return {"model": str(folder), "trustRemoteCode": True, "device": "cpu"}


def _refusals(srv) -> list[str]:
    return [m for m in srv.shown_messages() if "seam.trustRemoteCode" in m]


@pytest.mark.parametrize("route", ["initializationOptions", "didChangeConfiguration",
                                   "workspace/configuration"])
def test_settings_cannot_run_model_code(tmp_path, evil_model, route) -> None:
    folder, marker = evil_model
    with SeamProcess(tmp_path, env={"SEAM_TEST_MARKER": str(marker)}) as srv:
        if route == "initializationOptions":
            srv.initialize({"seam": _settings(folder)})
            srv.notify("initialized", {})
        elif route == "didChangeConfiguration":
            srv.initialize({"seam": {"model": "random:santacoder", "device": "cpu"}})
            srv.notify("initialized", {})
            srv.wait_loaded()
            for _ in range(3):  # pushed again and again, as VS Code does on every change
                srv.notify("workspace/didChangeConfiguration",
                           {"settings": {"seam": _settings(folder)}})
        else:
            srv.initialize(None, capabilities={"workspace": {"configuration": True}})
            srv.notify("initialized", {})
            pull = srv.wait_for(lambda ms: [m for m in ms
                                            if m.get("method") == "workspace/configuration"],
                                what="a configuration pull")[0]
            srv.send({"jsonrpc": "2.0", "id": pull["id"], "result": [_settings(folder)]})
        srv.wait_for(lambda _: srv.status()["settings"]["model"] == str(folder),
                     what="the model setting")
        st = srv.wait_loaded()
        assert st["settings"]["trustRemoteCode"] is False
        assert st["state"] == "error"  # the model needs its own code, which was not run
        assert not marker.exists(), "the model's code ran"
        assert len(_refusals(srv)) == 1, srv.shown_messages()  # said once, clearly
        assert "--trust-remote-code" in _refusals(srv)[0]
        no_traceback(srv.stderr)


def test_the_serve_flag_is_what_allows_model_code(tmp_path, evil_model) -> None:
    folder, marker = evil_model
    with SeamProcess(tmp_path, "--trust-remote-code",
                     env={"SEAM_TEST_MARKER": str(marker)}) as srv:
        srv.initialize({"seam": {"model": str(folder), "device": "cpu"}})
        srv.notify("initialized", {})
        st = srv.wait_loaded()
        assert st["settings"]["trustRemoteCode"] is True
        assert marker.exists()
        assert not _refusals(srv)


def test_log_file_is_private(tmp_path) -> None:
    with SeamProcess(tmp_path, default_log=True) as srv:
        srv.initialize()
        assert srv.alive()
        log_file = srv.log_file
        assert log_file.exists()
        assert stat.S_IMODE(log_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(log_file.parent.stat().st_mode) == 0o700
        assert srv.shutdown_and_exit() == 0


def test_existing_default_log_directory_is_tightened(tmp_path) -> None:
    folder = tmp_path / "state" / "seam"
    folder.mkdir(parents=True, mode=0o755)
    folder.chmod(0o755)
    (folder / "server.log").write_text("old\n")
    (folder / "server.log").chmod(0o644)
    with SeamProcess(tmp_path, default_log=True) as srv:
        srv.initialize()
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert stat.S_IMODE((folder / "server.log").stat().st_mode) == 0o600


def test_document_text_never_reaches_the_log(tmp_path) -> None:
    uri = "file:///secret.py"
    text = f"password = '{SECRET}'\n"
    with SeamProcess(tmp_path) as srv:
        srv.initialize({"seam": {"model": "random:santacoder"}})
        srv.open(uri, text)
        # Off-spec messages that carry the text, in every way that reaches a different path.
        srv.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": "one", "text": text}})
        srv.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": 2},
            "contentChanges": [{"range": {"start": {"line": "a"}}, "text": text}]})
        srv.notify("textDocument/didChange", {"textDocument": {"uri": uri}, "contentChanges": text})
        srv.call("textDocument/inlineCompletion", {"textDocument": {"uri": uri, "text": text},
                                                   "position": {"line": text}})
        srv.call("textDocument/completion", [text])
        srv.notify("no/such/method", {"text": text})
        srv.send({"jsonrpc": "1.0", "id": 3, "method": "x", "params": {"text": text}})
        srv.send_raw(b"Content-Length: 40\r\n\r\n" + json.dumps({"t": text}).encode()[:40])
        srv.send_raw(json.dumps({"id": 4, "text": text}).encode())
        assert srv.alive()
        assert srv.shutdown_and_exit() == 0
        assert SECRET not in srv.log_text()
        assert SECRET not in srv.stderr
        log_messages = [m["params"]["message"] for m in srv.notifications("window/logMessage")]
        no_traceback(srv.stderr, srv.log_text(), *log_messages)
