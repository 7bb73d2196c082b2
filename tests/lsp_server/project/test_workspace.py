"""Workspace folders: what the server may read, and what it must never read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from lsprotocol import types

from lsp_server.project.workspace import MAX_FILE_BYTES, Workspace, path_of_uri


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    """A workspace folder ``proj`` and, beside it, a folder the client never announced."""
    proj = tmp_path / "proj"
    (proj / "pkg").mkdir(parents=True)
    (proj / "pkg" / "mod.py").write_text("X = 1\n")
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "keys.py").write_text("TOKEN = 'do not read'\n")
    return {"proj": proj, "secret": secret}


def workspace_of(*folders: Path) -> Workspace:
    ws = Workspace()
    for f in folders:
        assert ws.add(f.as_uri()) is not None
    return ws


def test_files_inside_a_folder_are_read(layout):
    ws = workspace_of(layout["proj"])
    assert ws.read(layout["proj"] / "pkg" / "mod.py") == "X = 1\n"


def test_files_outside_every_folder_are_never_read(layout):
    ws = workspace_of(layout["proj"])
    outside = layout["secret"] / "keys.py"
    assert ws.read(outside) is None
    assert ws.stat(outside) is None
    # ``..`` in a path or a URI does not climb out either.
    assert ws.read(layout["proj"] / ".." / "secret" / "keys.py") is None
    climbing = path_of_uri(layout["proj"].as_uri() + "/../secret/keys.py")
    assert climbing is not None and ws.read(climbing) is None


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symbolic links here")
def test_a_link_inside_a_folder_to_a_file_outside_is_not_followed(layout):
    proj, secret = layout["proj"], layout["secret"]
    (proj / "pkg" / "keys.py").symlink_to(secret / "keys.py")
    (proj / "vendored").symlink_to(secret, target_is_directory=True)
    ws = workspace_of(proj)
    assert ws.read(proj / "pkg" / "keys.py") is None
    assert ws.read(proj / "vendored" / "keys.py") is None
    assert ws.stat(proj / "vendored" / "keys.py") is None
    # A link that stays inside is fine.
    (proj / "alias.py").symlink_to(proj / "pkg" / "mod.py")
    assert ws.read(proj / "alias.py") == "X = 1\n"


def test_without_folders_nothing_is_read(layout):
    assert Workspace().read(layout["proj"] / "pkg" / "mod.py") is None


def test_huge_binary_and_undecodable_files_are_skipped(layout):
    proj = layout["proj"]
    (proj / "big.py").write_text("x = 1\n" * (MAX_FILE_BYTES // 6 + 10))
    (proj / "blob.py").write_bytes(b"x = 1\n\x00\x01")
    (proj / "latin.py").write_bytes("café = 1\n".encode("latin-1"))
    ws = workspace_of(proj)
    assert ws.read(proj / "big.py") is None
    assert ws.read(proj / "blob.py") is None
    assert ws.read(proj / "latin.py") is None
    assert ws.read(proj / "pkg") is None  # a directory
    assert ws.read(proj / "missing.py") is None


def test_folders_come_and_go(layout):
    proj, secret = layout["proj"], layout["secret"]
    ws = workspace_of(proj)
    assert ws.read(secret / "keys.py") is None
    ws.add(secret.as_uri())
    assert ws.read(secret / "keys.py") is not None
    ws.remove(secret.as_uri())
    assert ws.read(secret / "keys.py") is None
    assert ws.add("https://example.com/repo") is None
    assert ws.add((proj / "nope").as_uri()) is None


def test_initialize_prefers_workspace_folders_over_the_root(layout):
    proj, secret = layout["proj"], layout["secret"]
    ws = Workspace()
    ws.announce([types.WorkspaceFolder(uri=proj.as_uri(), name="project")], secret.as_uri(),
                None)
    assert [f.name for f in ws.folders] == ["project"]
    assert ws.read(secret / "keys.py") is None
    ws.announce(None, secret.as_uri(), None)
    assert [f.root for f in ws.folders] == [secret.resolve()]
    ws.announce(None, None, str(proj))
    assert [f.root for f in ws.folders] == [proj.resolve()]


def test_a_document_is_located_by_folder_name_and_relative_path(layout):
    proj = layout["proj"]
    ws = workspace_of(proj)
    found = ws.locate((proj / "pkg" / "mod.py").as_uri())
    assert found is not None and found.folder.name == "proj" and found.path == "pkg/mod.py"
    assert ws.locate((layout["secret"] / "keys.py").as_uri()) is None
    assert ws.locate("untitled:Untitled-1") is None


def test_uris_that_name_no_local_file():
    assert path_of_uri("untitled:Untitled-1") is None
    assert path_of_uri("file://server/share/x.py") is None
    assert path_of_uri("file:///a%00b.py") is None
    assert path_of_uri("file:///tmp/a%20b.py") == Path("/tmp/a b.py")


def test_nested_folders_locate_a_file_in_the_innermost(layout):
    proj = layout["proj"]
    ws = workspace_of(proj, proj / "pkg")
    found = ws.locate((proj / "pkg" / "mod.py").as_uri())
    assert found is not None and found.folder.root == (proj / "pkg").resolve()
    assert found.path == "mod.py"
    ws.remove((proj / "pkg").as_uri())
    found = ws.locate((proj / "pkg" / "mod.py").as_uri())
    assert found is not None and found.path == "pkg/mod.py"


@pytest.mark.parametrize("newline", [b"\r\n", b"\r"])
def test_files_are_read_with_newline_breaks(layout, newline):
    proj = layout["proj"]
    (proj / "crlf.py").write_bytes(b"X = 1" + newline + b"Y = 2" + newline)
    assert workspace_of(proj).read(proj / "crlf.py") == "X = 1\nY = 2\n"
