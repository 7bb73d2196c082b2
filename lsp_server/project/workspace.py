"""The workspace folders the client announced, and the only way project files are read.

Project context reads files from disk (the definitions of imported names), so the server must
never be talked into reading anything else: a ``file:`` URI with ``..`` segments, a module path
that climbs out of its package, or a symbolic link inside a folder that points outside it.
Every read goes through :meth:`Workspace.read`, which resolves the path (following every
link) and reads the resolved file only when it lies inside a folder the client announced in
``initialize`` (``workspaceFolders``, else ``rootUri``/``rootPath``) or added later with
``workspace/didChangeWorkspaceFolders``.  It also skips what is not worth reading: files larger
than ``MAX_FILE_BYTES``, and files that are not UTF-8 text (a NUL byte or a decoding error).

Without any folder nothing is read at all.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse
from urllib.request import url2pathname

#: Larger files are skipped: generated tables and vendored bundles tell the model little and
#: would cost parsing time on the event loop.
MAX_FILE_BYTES = 512 * 1024


@dataclass(frozen=True)
class Folder:
    """One workspace folder: the name the client gave it and its resolved root."""

    name: str
    uri: str
    root: Path  # resolved (no links), absolute


@dataclass(frozen=True)
class Located:
    """Where a file sits in the workspace: its folder and its path relative to it."""

    folder: Folder
    path: str  # "/"-separated, relative to the folder


def path_of_uri(uri: str) -> Path | None:
    """The local path of a ``file:`` URI, ``None`` for any other scheme or a malformed one."""
    if not isinstance(uri, str):
        return None
    try:
        parts = urlparse(uri)
    except ValueError:
        return None
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return None
    if not unquote(parts.path) or "\x00" in unquote(parts.path):
        return None
    return Path(url2pathname(parts.path))


def _resolved(path: Path) -> Path | None:
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError):
        return None


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


class Workspace:
    """The announced folders (see the module docstring)."""

    def __init__(self) -> None:
        self._folders: dict[str, Folder] = {}  # by URI, in the order announced
        #: changes whenever the folders do (what was found in them may be stale)
        self.generation = 0

    @property
    def folders(self) -> tuple[Folder, ...]:
        return tuple(self._folders.values())

    def add(self, uri: str, name: str | None = None) -> Folder | None:
        """Add a folder by URI; ``None`` (nothing added) when it names no local directory."""
        path = path_of_uri(uri)
        root = _resolved(path) if path is not None else None
        if root is None or not root.is_dir():
            return None
        label = name if isinstance(name, str) and name.strip() else root.name
        folder = Folder(label or str(root), uri, root)
        self._folders[uri] = folder
        self.generation += 1
        return folder

    def remove(self, uri: str) -> None:
        if self._folders.pop(uri, None) is not None:
            self.generation += 1

    def announce(self, workspace_folders: list | None, root_uri: str | None,
                 root_path: str | None) -> None:
        """The folders of ``initialize``: ``workspaceFolders`` when given, else the root."""
        self._folders.clear()
        self.generation += 1
        if workspace_folders:
            for f in workspace_folders:
                uri = getattr(f, "uri", None)
                if isinstance(uri, str):
                    self.add(uri, getattr(f, "name", None))
            return
        if isinstance(root_uri, str) and root_uri:
            self.add(root_uri)
        elif isinstance(root_path, str) and root_path:
            self.add(Path(root_path).absolute().as_uri())

    def folder_of(self, path: Path) -> Folder | None:
        """The folder that holds ``path`` once every link in it is followed (the innermost
        when folders nest), else ``None``."""
        real = _resolved(path)
        if real is None:
            return None
        best = None
        for folder in self._folders.values():
            if _within(real, folder.root) and (best is None or
                                               len(folder.root.parts) > len(best.root.parts)):
                best = folder
        return best

    def locate_path(self, path: Path) -> Located | None:
        """The folder of a file and its path relative to it (``None`` outside them)."""
        real = _resolved(path)
        folder = self.folder_of(path) if real is not None else None
        if folder is None or real is None:
            return None
        return Located(folder, real.relative_to(folder.root).as_posix())

    def locate(self, uri: str) -> Located | None:
        """:meth:`locate_path` for a document's URI."""
        path = path_of_uri(uri)
        return self.locate_path(path) if path is not None else None

    def stat(self, path: Path) -> tuple[int, int] | None:
        """``(mtime_ns, size)`` of a regular file inside the workspace, else ``None``."""
        real = _resolved(path)
        if real is None or self.folder_of(real) is None:
            return None
        try:
            st = real.stat()
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        return st.st_mtime_ns, st.st_size

    def python_files(self, directory: Path, limit: int) -> list[Path]:
        """Up to ``limit`` Python files directly in ``directory`` (sorted by name), when the
        directory lies inside a folder (links followed); otherwise none."""
        real = _resolved(directory)
        if real is None or self.folder_of(real) is None:
            return []
        try:
            names = sorted(e.name for e in os.scandir(real)
                           if e.name.endswith(".py") and not e.name.startswith("."))
        except OSError:
            return []
        return [real / name for name in names[:limit]]

    def read(self, path: Path) -> str | None:
        """The text of a file inside the workspace, or ``None``: outside every folder (links
        followed), missing, not a regular file, larger than ``MAX_FILE_BYTES``, or not text."""
        real = _resolved(path)
        if real is None or self.folder_of(real) is None:
            return None
        try:
            # The resolved path is opened, not ``path``, and O_NOFOLLOW refuses a link put in
            # its place after the check: what is read is what was checked.
            fd = os.open(real, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            return None
        try:
            with os.fdopen(fd, "rb") as f:
                st = os.fstat(f.fileno())
                if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
                    return None
                data = f.read(MAX_FILE_BYTES + 1)
        except OSError:
            return None
        if len(data) > MAX_FILE_BYTES or b"\x00" in data:
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return None
