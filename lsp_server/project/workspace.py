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

Text read here enters the model's prompt, so its line breaks are normalised as the document's
own text is (``lsp_server.text.for_model``): a CRLF or lone-CR file never carries a ``\r``
into the prompt.

A folder the user removes takes its code out of the project context at once: besides no
longer being read, it is remembered as *out of scope* (until it is added again), so the open
documents and recent edits that lie in it are left out too (:meth:`Workspace.in_scope`); the
sources drop what they cached from it as it leaves (:meth:`Workspace.subscribe`).

Everything here runs on every keystroke, for folders that may number in the dozens and
documents in the hundreds, so no check walks the folder list: a path's folder is found by
looking its resolved parents up in a dict of roots (work grows with the path's depth, not with
the number of folders); which folders can hold an absolute import's first package comes from
one listing of each folder's top level (``module_bases``), looked at again (one ``stat``
per folder, a listing only when its mtime moved) at most every ``LISTING_REFRESH_S``
seconds or when the folders change; and what the scope and label of a
document URI are is remembered until the folders change.  :attr:`Workspace.io` counts the
disk work, so tests can check it does not grow with the number of folders.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar
from urllib.parse import unquote, urlparse
from urllib.request import url2pathname

from lsp_server.text import for_model

T = TypeVar("T")

#: Larger files are skipped: generated tables and vendored bundles tell the model little and
#: would cost parsing time on the event loop.
MAX_FILE_BYTES = 512 * 1024
#: How long a listing of the folders' top levels (where absolute imports start) holds: a
#: package created on disk is found at most this late.
LISTING_REFRESH_S = 2.0
#: Document URIs whose scope and place are remembered (they are asked about per request).
_MAX_REMEMBERED_URIS = 4096


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


@dataclass
class DiskWork:
    """Work done on the disk, counted: links resolved, files stat'ed and read, directories
    listed (what a keystroke must not do more of as folders or documents multiply)."""

    resolves: int = 0
    stats: int = 0
    reads: int = 0
    listings: int = 0

    def total(self) -> int:
        return self.resolves + self.stats + self.reads + self.listings


@dataclass(frozen=True)
class ModuleBase:
    """A directory where an absolute import may start, and whether the import's first part
    names the folder itself (a folder that is a package: the first part is dropped)."""

    directory: Path
    drops_first: bool


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


def _innermost(real: str, roots: Mapping[str, T]) -> T | None:
    """The value of the innermost root of ``roots`` (by resolved path) holding ``real``:
    one dict look-up per parent of ``real``, however many roots there are."""
    while True:
        found = roots.get(real)
        if found is not None:
            return found
        parent = os.path.dirname(real)
        if parent == real:
            return None
        real = parent


class Workspace:
    """The announced folders (see the module docstring)."""

    def __init__(self, listing_refresh_s: float = LISTING_REFRESH_S) -> None:
        self._folders: dict[str, Folder] = {}  # by URI, in the order announced
        self._roots: dict[str, Folder] = {}  # by resolved root
        self._removed: dict[str, Path] = {}  # the resolved roots the user took out
        #: changes whenever the folders do (what was found in them may be stale)
        self.generation = 0
        self.io = DiskWork()
        self.listing_refresh_s = listing_refresh_s
        self._bases: dict[str, tuple[ModuleBase, ...]] = {}
        self._bases_at: tuple[int, float] | None = None  # (generation, monotonic time)
        self._listed: dict[Path, tuple[int, frozenset[str]]] = {}  # dir -> (mtime, names)
        self._uris: dict[str, tuple[bool, Located | None]] = {}  # uri -> (in scope, place)
        self._uris_generation = -1
        self._listeners: list[Callable[[], None]] = []
        #: changes whenever a folder leaves (what was taken from it must go)
        self.removals = 0

    def subscribe(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` whenever a folder leaves (the context sources drop what they
        cached from it then, not at the next request).  An added folder takes nothing out of
        scope: no call."""
        self._listeners.append(listener)

    @property
    def folders(self) -> tuple[Folder, ...]:
        return tuple(self._folders.values())

    def _changed(self, removal: bool = False) -> None:
        self._roots = {str(f.root): f for f in self._folders.values()}
        self.generation += 1
        if removal:
            self.removals += 1
            for listener in self._listeners:
                listener()

    def add(self, uri: str, name: str | None = None) -> Folder | None:
        """Add a folder by URI; ``None`` (nothing added) when it names no local directory."""
        path = path_of_uri(uri)
        root = self._resolve(path) if path is not None else None
        if root is None or not root.is_dir():
            return None
        label = name if isinstance(name, str) and name.strip() else root.name
        folder = Folder(label or str(root), uri, root)
        self._folders[uri] = folder
        self._removed.pop(str(root), None)
        self._changed()
        return folder

    def remove(self, uri: str) -> None:
        """Take a folder out: nothing in it is read any more, and what lies in it (open
        documents included) is out of scope until it is added again."""
        folder = self._folders.pop(uri, None)
        if folder is not None:
            self._removed[str(folder.root)] = folder.root
            self._changed(removal=True)

    def announce(self, workspace_folders: list | None, root_uri: str | None,
                 root_path: str | None) -> None:
        """The folders of ``initialize``: ``workspaceFolders`` when given, else the root."""
        self._folders.clear()
        self._removed.clear()
        self._changed(removal=True)
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

    # ----- where a path lies --------------------------------------------------------------------

    def _resolve(self, path: Path) -> Path | None:
        self.io.resolves += 1
        return _resolved(path)

    def _folder_of_real(self, real: Path) -> Folder | None:
        return _innermost(str(real), self._roots)

    def folder_of(self, path: Path) -> Folder | None:
        """The folder that holds ``path`` once every link in it is followed (the innermost
        when folders nest), else ``None``."""
        real = self._resolve(path)
        return self._folder_of_real(real) if real is not None else None

    def locate_path(self, path: Path) -> Located | None:
        """The folder of a file and its path relative to it (``None`` outside them)."""
        real = self._resolve(path)
        folder = self._folder_of_real(real) if real is not None else None
        if folder is None or real is None:
            return None
        return Located(folder, real.relative_to(folder.root).as_posix())

    def _uri_facts(self, uri: str) -> tuple[bool, Located | None]:
        """``(in scope, place)`` of a document URI, remembered until the folders change (a
        link moved meanwhile changes only a label, never what is read: reads check anew)."""
        if self._uris_generation != self.generation or len(self._uris) > _MAX_REMEMBERED_URIS:
            self._uris.clear()
            self._uris_generation = self.generation
        found = self._uris.get(uri)
        if found is None:
            path = path_of_uri(uri)
            real = self._resolve(path) if path is not None else None
            if real is None:
                found = (True, None)
            else:
                folder = self._folder_of_real(real)
                located = (Located(folder, real.relative_to(folder.root).as_posix())
                           if folder is not None else None)
                out = folder is None and _innermost(str(real), self._removed) is not None
                found = (not out, located)
            self._uris[uri] = found
        return found

    def locate(self, uri: str) -> Located | None:
        """:meth:`locate_path` for a document's URI."""
        return self._uri_facts(uri)[1]

    def in_scope(self, uri: str) -> bool:
        """Whether what ``uri`` holds may go into a prompt: not when it lies in a folder the
        user removed (and in no folder still announced).  A document outside every folder
        that was never removed stays in scope, as without any folder at all."""
        return self._uri_facts(uri)[0]

    # ----- what is on disk ----------------------------------------------------------------------

    def stat(self, path: Path) -> tuple[int, int] | None:
        """``(mtime_ns, size)`` of a regular file inside the workspace, else ``None``."""
        real = self._resolve(path)
        if real is None or self._folder_of_real(real) is None:
            return None
        self.io.stats += 1
        try:
            st = real.stat()
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        return st.st_mtime_ns, st.st_size

    def _names_in(self, directory: Path) -> frozenset[str]:
        self.io.listings += 1
        try:
            return frozenset(e.name for e in os.scandir(directory))
        except OSError:
            return frozenset()

    def module_bases(self, first: str) -> tuple[ModuleBase, ...]:
        """Where an absolute import whose first part is ``first`` may start, in the order the
        folders were announced: a folder holding ``first`` (a package or ``first.py``), its
        ``src/`` holding it, and a folder that is itself the package ``first``.  From a
        listing of the folders' top levels, taken again when the folders change or
        ``listing_refresh_s`` has passed: a module that is in no folder costs no disk work."""
        now = time.monotonic()
        at = self._bases_at
        if at is None or at[0] != self.generation or now - at[1] >= self.listing_refresh_s:
            self._bases = self._list_bases()
            self._bases_at = (self.generation, now)
        return self._bases.get(first, ())

    def _top_names(self, directory: Path) -> frozenset[str]:
        """The names in a folder's top directory: listed again only when its mtime moved
        (an entry added or removed), else one ``stat``."""
        self.io.stats += 1
        try:
            mtime = os.stat(directory).st_mtime_ns
        except OSError:
            return frozenset()
        known = self._listed.get(directory)
        names = known[1] if known is not None and known[0] == mtime else \
            self._names_in(directory)
        self._listed[directory] = (mtime, names)
        return names

    def _list_bases(self) -> dict[str, tuple[ModuleBase, ...]]:
        out: dict[str, list[ModuleBase]] = {}
        self._listed = {d: v for d, v in self._listed.items()
                        if self._folder_of_real(d) is not None}  # forget removed folders

        def note(names: frozenset[str], directory: Path) -> None:
            for name in names:
                key = name[:-3] if name.endswith(".py") else name
                if key.isidentifier():
                    found = out.setdefault(key, [])
                    if not found or found[-1].directory != directory:
                        found.append(ModuleBase(directory, False))

        for folder in self._folders.values():
            names = self._top_names(folder.root)
            note(names, folder.root)
            if "src" in names:
                note(self._top_names(folder.root / "src"), folder.root / "src")
            if "__init__.py" in names and folder.root.name.isidentifier():
                out.setdefault(folder.root.name, []).append(ModuleBase(folder.root, True))
        return {k: tuple(v) for k, v in out.items()}

    def python_files(self, directory: Path, limit: int) -> list[Path]:
        """Up to ``limit`` Python files directly in ``directory`` (see :meth:`files_with`)."""
        return self.files_with(directory, (".py",), limit)

    def files_with(self, directory: Path, suffixes: tuple[str, ...], limit: int
                   ) -> list[Path]:
        """Up to ``limit`` files directly in ``directory`` whose names end with one of
        ``suffixes`` (lower case; sorted by name), when the directory lies inside a folder
        (links followed); otherwise none."""
        real = self._resolve(directory)
        if real is None or self._folder_of_real(real) is None:
            return []
        names = sorted(n for n in self._names_in(real)
                       if n.lower().endswith(suffixes) and not n.startswith("."))
        return [real / name for name in names[:limit]]

    def read(self, path: Path) -> str | None:
        """The text of a file inside the workspace (line breaks normalised), or ``None``:
        outside every folder (links followed), missing, not a regular file, larger than
        ``MAX_FILE_BYTES``, or not text."""
        real = self._resolve(path)
        if real is None or self._folder_of_real(real) is None:
            return None
        self.io.reads += 1
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
            return for_model(data.decode("utf-8"))
        except UnicodeDecodeError:
            return None
