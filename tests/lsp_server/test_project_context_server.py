"""Project context through a real client: the workspace the client announces, the definitions
of what a document imports, and a request that carries them once they are in the model's
cache (answered without them, and warmed, until then)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from lsprotocol import types

from tests.support.seam_lsp_client import (
    TEST_MODEL,
    inline,
    insert_text,
    lsp_session,
    open_doc,
    status,
    wait_ready,
)

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(300)]

HELPERS = ('def scale(value, factor):\n    """Multiply value by factor."""\n'
           "    return value * factor\n")
MAIN = ("from helpers import scale\nfrom extra import shift\n\n\n"
        "def compute(values):\n    total = 0\n    for v in values:\n"
        "        total = total + scale(v, 2)\n        total = shift(total)\n"
        "    return total\n")


async def idle(lc, timeout: float = 120.0) -> dict:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        st = await status(lc)
        if not st["running"] and st.get("idle", True):
            return st
        if loop.time() > deadline:
            raise TimeoutError(st)
        await asyncio.sleep(0.05)


def settings(**extra) -> dict:
    return {"seam": {"model": TEST_MODEL, "engine": "transformers", "maxTokens": 4,
                     "contextBudgetTokens": 256, **extra}}


def write_project(tmp_path: Path) -> str:
    """helpers.py and main.py in ``tmp_path``; main.py's URI."""
    (tmp_path / "helpers.py").write_text(HELPERS)
    main = tmp_path / "main.py"
    main.write_text(MAIN)
    return main.as_uri()


async def model_entries(lc) -> list[dict]:
    """The recent requests the model answered (not the suggestion cache)."""
    return [r for r in (await status(lc))["recent"] if r["source"] in ("model", "early")]


async def model_entry(lc, uri: str, line: int, character: int) -> dict:
    await inline(lc, uri, line, character)
    return (await model_entries(lc))[-1]


async def test_a_request_carries_the_context_once_it_is_cached(tmp_path: Path):
    uri = write_project(tmp_path)
    async with lsp_session(tmp_path, settings()) as lc:
        await wait_ready(lc)
        open_doc(lc, uri, MAIN)
        first = await model_entry(lc, uri, 7, 20)
        # The context is planned (the definition of `scale` from the workspace) but not in
        # the model's cache yet: this answer goes without it, and it is warmed afterwards.
        assert first["context_files"] == ["helpers.py"]
        assert first["context_sources"]["definitions"] > 0
        assert first["context_deferred"] is True
        await idle(lc)
        second = await model_entry(lc, uri, 8, 15)
        assert second["context_deferred"] is False
        assert second["context_files"] == ["helpers.py"]
        assert second["context_tokens"] > 0
        assert second["cached_tokens"] >= second["context_tokens"]  # it came from the cache


async def test_turned_off_the_context_is_not_planned(tmp_path: Path):
    uri = write_project(tmp_path)
    async with lsp_session(tmp_path, settings(contextDefinitions=False,
                                               contextOpenFiles=False,
                                               contextRecentEdits=False)) as lc:
        st = await wait_ready(lc)
        assert st["settings"]["contextDefinitions"] is False
        open_doc(lc, uri, MAIN)
        entry = await model_entry(lc, uri, 7, 20)
        assert entry["context_files"] == [] and entry["context_tokens"] == 0


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symbolic links here")
async def test_only_announced_folders_are_read_and_they_can_change(tmp_path: Path):
    project = tmp_path / "project"
    other = tmp_path / "other"
    project.mkdir()
    other.mkdir()
    (other / "extra.py").write_text("def shift(x):\n    return x + 1\n")
    (other / "helpers.py").write_text(HELPERS)
    # A link inside the project to a file outside it must not be followed.
    (project / "helpers.py").symlink_to(other / "helpers.py")
    main = project / "main.py"
    main.write_text(MAIN)
    uri = main.as_uri()
    async with lsp_session(project, settings()) as lc:
        await wait_ready(lc)
        open_doc(lc, uri, MAIN)
        entry = await model_entry(lc, uri, 7, 20)
        assert entry["context_files"] == []
        # The user adds the other folder to the workspace: its modules now count.
        lc.workspace_did_change_workspace_folders(types.DidChangeWorkspaceFoldersParams(
            event=types.WorkspaceFoldersChangeEvent(
                added=[types.WorkspaceFolder(uri=other.as_uri(), name="other")], removed=[])))
        await idle(lc)
        entry = await model_entry(lc, uri, 8, 15)
        # extra.py resolves in the new folder, and the link's target now lies inside an
        # announced folder too.
        assert entry["context_files"] == ["helpers.py", "extra.py"]


async def test_a_resting_cursor_warms_the_prompt_the_request_will_run_first(tmp_path: Path):
    # The context is not cached yet, so a request now would go without it: the rest warms
    # that prompt first (what the user waits for), then the context.
    uri = write_project(tmp_path)
    async with lsp_session(tmp_path, settings()) as lc:
        await wait_ready(lc)
        open_doc(lc, uri, MAIN)
        lc.protocol.notify("seam/cursor", {"textDocument": {"uri": uri},
                                           "position": {"line": 7, "character": 20}})
        await idle(lc)
        log = (tmp_path / "server.log").read_text()
        first = log.index("warmed the prompt at")
        assert "without it" in log[first:log.index("\n", first)]
        assert log.index("warmed the project context at") > first
        entry = await model_entry(lc, uri, 7, 20)
        assert entry["context_deferred"] is False and entry["context_tokens"] > 0
        assert entry["cached_tokens"] >= entry["prompt_tokens"] - 1  # all of it was warmed


async def test_the_context_is_warmed_on_the_short_prompt_before_the_prompt_is_widened(
        tmp_path: Path):
    # A cursor far enough down that the server widens the prompt while it rests: the
    # project context is run on the short prompt first, so that requests carry it after a
    # short rest instead of only once the whole widened prompt has run.
    body = "".join(f"    total = total + scale(v, {i})\n" for i in range(80))
    text = MAIN.replace("    return total\n", body + "    return total\n")
    (tmp_path / "helpers.py").write_text(HELPERS)
    main = tmp_path / "main.py"
    main.write_text(text)
    uri = main.as_uri()
    line = text[:text.index("    return total")].count("\n")
    async with lsp_session(tmp_path, settings()) as lc:
        await wait_ready(lc)
        open_doc(lc, uri, text)
        lc.protocol.notify("seam/cursor", {"textDocument": {"uri": uri},
                                           "position": {"line": line, "character": 4}})
        await idle(lc)
        log = (tmp_path / "server.log").read_text()
        assert log.index("warmed the project context at") < log.index("widened the prompt at")


async def test_a_removed_folder_feeds_no_later_prompt(tmp_path: Path):
    # Folder B holds a module the document imports, code like the document's, and a file the
    # user has open: all of it reaches the prompts, until the user removes B.
    project, bee = tmp_path / "project", tmp_path / "bee_folder"
    project.mkdir()
    bee.mkdir()
    loop = ("    for v in values:\n        total = total + scale(v, 2)\n"
            "        total = shift(total)\n")
    text = ("from helpers import scale\nfrom bee_module import shift\n\n\n"
            "def compute(values):\n    total = 0\n" + loop * 12 + "    return total\n")
    (project / "helpers.py").write_text(HELPERS)
    (project / "main.py").write_text(text)
    (bee / "bee_module.py").write_text(
        "def shift(x):\n    return x + 1\n\n\ndef bee_compute(values):\n    total = 0\n"
        + loop + "    return total\n")
    notes = "def bee_note(x):\n    return x\n"
    (bee / "bee_notes.py").write_text(notes)
    uri, notes_uri = (project / "main.py").as_uri(), (bee / "bee_notes.py").as_uri()
    line = text.count("\n", 0, text.index("    return total"))
    bee_files = {"bee_module.py", "bee_notes.py"}
    async with lsp_session(project, settings(contextBudgetTokens=512)) as lc:
        await wait_ready(lc)
        change = types.WorkspaceFoldersChangeEvent(
            added=[types.WorkspaceFolder(uri=bee.as_uri(), name="bee")], removed=[])
        lc.workspace_did_change_workspace_folders(
            types.DidChangeWorkspaceFoldersParams(event=change))
        open_doc(lc, notes_uri, notes)
        open_doc(lc, uri, text)
        before = await model_entry(lc, uri, line, 4)
        models = len(await model_entries(lc))
        assert bee_files <= set(before["context_files"])
        await idle(lc)
        change = types.WorkspaceFoldersChangeEvent(
            added=[], removed=[types.WorkspaceFolder(uri=bee.as_uri(), name="bee")])
        lc.workspace_did_change_workspace_folders(
            types.DidChangeWorkspaceFoldersParams(event=change))
        # The user goes on typing at the same place (the similar code was chosen for it):
        # no prompt carries B's code any more.
        for version, typed in enumerate(("x", "y"), start=2):
            insert_text(lc, uri, version, line, 4, typed)
            after = await model_entry(lc, uri, line, 5)
            assert not bee_files & set(after["context_files"]), after["context_files"]
            assert "helpers.py" in after["context_files"]
        await idle(lc)
        recent = await model_entries(lc)
        assert len(recent) == models + 2  # both were the model's, planned after the removal
        assert all(not bee_files & set(r["context_files"]) for r in recent[models:])
