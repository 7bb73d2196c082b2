"""The seams inside ``lsp_server``: the wire knows nothing of the server but the small session
protocol it drives (``wire.transport.Session``), and the completion service knows nothing of
the server or of pygls (it posts through a callback). Checked on the imports, including those
made for type checking only, and on the members the session protocol names."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from lsp_server.server import SeamServer
from lsp_server.wire import transport
from lsp_server.wire.protocol import SeamProtocol
from tests.support.seam_lsp_client import REPO

PACKAGE = REPO / "lsp_server"


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports, wherever the import stands."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("path", sorted((PACKAGE / "wire").glob("*.py")), ids=lambda p: p.name)
def test_the_wire_imports_nothing_of_the_server(path: Path) -> None:
    outside = {m for m in imported(path)
               if m.startswith("lsp_server") and not m.startswith("lsp_server.wire")}
    assert not outside, outside


def test_the_completion_service_imports_neither_the_server_nor_pygls() -> None:
    names = imported(PACKAGE / "completion_service.py")
    assert not {m for m in names if m.startswith(("lsp_server.server", "lsp_server.wire",
                                                  "pygls"))}


def members(protocol: type) -> set[str]:
    """The names a ``typing.Protocol`` class asks for."""
    own = {name for name, _ in inspect.getmembers(protocol)
           if not name.startswith("_") and name in vars(protocol)}
    return own | set(getattr(protocol, "__annotations__", {}))


def test_the_server_is_a_session_the_transport_can_drive() -> None:
    server = SeamServer()
    try:
        missing = {n for n in members(transport.Session) if not hasattr(server, n)}
        assert not missing, missing
        missing = {n for n in members(transport.SessionProtocol)
                   if not hasattr(server.protocol, n)}
        assert isinstance(server.protocol, SeamProtocol)
        assert not missing, missing
    finally:
        server.end_session()
