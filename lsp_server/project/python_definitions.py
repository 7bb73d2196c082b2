"""The definitions of the names a Python document imports, from the workspace's own files.

A model that sees only the file being edited guesses the signatures of everything it calls
from elsewhere; the definitions of those names (Continue and Tabby feed them too) answer it.
This module finds them with the standard library alone:

* :func:`imports_of` lists a document's imports with a line scan plus ``ast`` per statement,
  so a document that does not parse (it is being edited) still has its imports read, and a
  keystroke costs a regular-expression pass, not a parse of the file;
* :class:`DefinitionIndex` resolves each import to a file of the workspace (absolute imports
  from each folder, its ``src/``, or, when the folder is itself a package, from its parent;
  relative imports from the document's package), parses that file once per
  ``(mtime, size)``, and returns short *outlines* of the imported names: a function's
  signature and docstring (the whole function when it is short), a class's header, docstring,
  class attributes and method signatures, a constant's assignment.  Names a package's
  ``__init__`` re-exports are followed to the module that defines them.

Only names the document uses (outside its import lines) are looked up, and for a module
imported whole (``import pkg.mod as m``, ``from pkg import mod``) only the attributes used as
``m.name``.  The result depends on the document's imports and uses and on the files on disk,
not on the cursor, so it stays the same (and cached in the model) while the user types.
Files are read through :class:`~lsp_server.project.workspace.Workspace`, never outside its folders.
"""

from __future__ import annotations

import ast
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from fim.lru import LRU
from lsp_server.project.python_imports import Import, ImportScanner, imports_of, used_names
from lsp_server.project.workspace import Workspace

__all__ = ["Definition", "DefinitionIndex", "Import", "imports_of", "outline_module",
           "signatures_of", "used_names"]

#: Functions and classes up to these many lines are shown whole; longer ones as outlines.
FULL_FUNCTION_LINES = 12
FULL_CLASS_LINES = 16
#: Lines of a docstring kept in an outline (its first paragraph, at most this many).
DOCSTRING_LINES = 4
#: Lines of an assignment kept.
ASSIGNMENT_LINES = 4
#: How many re-exports are followed to find where a name is defined.
MAX_REEXPORT_HOPS = 3
#: Parsed modules remembered (by path); each entry is a few outlines.
MAX_MODULES = 256
#: Documents whose scan is remembered (by text): the request, its prefetch and the cursor's
#: warm-up at one keystroke ask about the same few texts.
_MAX_SCANS = 8

#: Special methods shown in a class outline (how instances are made and called).
_SHOWN_DUNDERS = frozenset({"__init__", "__new__", "__call__", "__enter__", "__exit__"})


@dataclass(frozen=True)
class Definition:
    """An imported name's outline and where it is defined."""

    path: Path  # the defining file (resolved, inside the workspace)
    line: int  # where the definition starts in it (for ordering within a file)
    name: str
    text: str


# ----- outlines of a module's top-level names ----------------------------------------------------

def _lines(source: list[str], first: int, last: int) -> str:
    """Lines ``first..last`` (1-based, inclusive) of ``source``."""
    return "\n".join(source[first - 1:last])


def _docstring_lines(node: ast.AST, source: list[str]) -> str:
    body = getattr(node, "body", [])
    if not body or not isinstance(body[0], ast.Expr) or not isinstance(
            getattr(body[0], "value", None), ast.Constant) or not isinstance(
            body[0].value.value, str):
        return ""
    doc = body[0]
    text = _lines(source, doc.lineno, doc.end_lineno or doc.lineno)
    kept = []
    for line in text.split("\n"):
        if kept and not line.strip():
            break  # the first paragraph
        kept.append(line)
        if len(kept) >= DOCSTRING_LINES:
            break
    shown = "\n".join(kept)
    if len(kept) < text.count("\n") + 1:
        # Close the string so the outline still reads as Python.
        quote = '"""' if '"""' in kept[0] else "'''" if "'''" in kept[0] else ""
        if quote and shown.count(quote) % 2 == 1:
            indent = kept[0][:len(kept[0]) - len(kept[0].lstrip())]
            shown += "\n" + indent + quote
    return shown


def _header(node: ast.AST, source: list[str]) -> str:
    """Decorators and the ``def``/``class`` line(s) up to the body."""
    first = min([d.lineno for d in getattr(node, "decorator_list", [])] + [node.lineno])
    body_start = _span(node.body[0])[0] if node.body else node.lineno
    last = body_start - 1 if body_start > node.lineno else node.lineno
    # Comments and blank lines between the header and the body are not the header.
    while last > node.lineno and (not source[last - 1].strip()
                                  or source[last - 1].lstrip().startswith("#")):
        last -= 1
    return _lines(source, first, max(last, node.lineno)).rstrip()


def _body_indent(node: ast.AST, source: list[str]) -> str:
    line = source[node.body[0].lineno - 1] if node.body else ""
    indent = line[:len(line) - len(line.lstrip())]
    return indent or "    "


def _span(node: ast.AST) -> tuple[int, int]:
    first = min([d.lineno for d in getattr(node, "decorator_list", [])] + [node.lineno])
    return first, node.end_lineno or node.lineno


def _function_outline(node: ast.AST, source: list[str]) -> str:
    first, last = _span(node)
    if last - first + 1 <= FULL_FUNCTION_LINES:
        return _lines(source, first, last)
    parts = [_header(node, source)]
    doc = _docstring_lines(node, source)
    if doc:
        parts.append(doc)
    parts.append(_body_indent(node, source) + "...")
    return "\n".join(parts)


def _class_outline(node: ast.ClassDef, source: list[str]) -> str:
    first, last = _span(node)
    if last - first + 1 <= FULL_CLASS_LINES:
        return _lines(source, first, last)
    parts = [_header(node, source)]
    doc = _docstring_lines(node, source)
    if doc:
        parts.append(doc)
    for item in node.body:
        if isinstance(item, (ast.Assign, ast.AnnAssign)) and item.end_lineno == item.lineno:
            parts.append(_lines(source, item.lineno, item.lineno))
        elif isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if item.name.startswith("_") and item.name not in _SHOWN_DUNDERS:
                continue  # private helpers and protocol methods: not what callers write
            parts.append(_header(item, source) + " ...")
        elif isinstance(item, ast.ClassDef):
            parts.append(_header(item, source) + " ...")
    return "\n".join(parts)


@dataclass(frozen=True)
class _Outline:
    """What one module defines at top level, and what it re-exports from elsewhere."""

    definitions: dict[str, tuple[int, str]]  # name -> (line, outline)
    reexports: dict[str, Import]  # name -> where it comes from


def outline_module(text: str) -> _Outline | None:
    """The top-level definitions of a module's source, ``None`` when it does not parse."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    source = text.split("\n")
    defs: dict[str, tuple[int, str]] = {}
    reexports: dict[str, Import] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defs[node.name] = (_span(node)[0], _function_outline(node, source))
        elif isinstance(node, ast.ClassDef):
            defs[node.name] = (_span(node)[0], _class_outline(node, source))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            last = min(node.end_lineno or node.lineno, node.lineno + ASSIGNMENT_LINES - 1)
            shown = _lines(source, node.lineno, last)
            for t in targets:
                if isinstance(t, ast.Name):
                    defs.setdefault(t.id, (node.lineno, shown))
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                if a.name != "*":
                    reexports[a.asname or a.name] = Import(node.module or "", node.level,
                                                           a.name, a.asname or a.name)
    return _Outline(defs, reexports)


def signatures_of(text: str) -> str | None:
    """A module's top-level signatures, one line each where the source allows (functions,
    classes with their public methods, constants), in order; ``None`` if it does not parse.
    The shortest useful summary of a file the user has open but has not looked into."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    source = text.split("\n")
    parts = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            parts.append(_header(node, source) + " ...")
        elif isinstance(node, ast.ClassDef):
            parts.append(_header(node, source))
            methods = [item for item in node.body
                       if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                       and (not item.name.startswith("_") or item.name in _SHOWN_DUNDERS)]
            parts += [_header(item, source) + " ..." for item in methods]
            if not methods:
                parts.append(_body_indent(node, source) + "...")
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.end_lineno == node.lineno:
            parts.append(_lines(source, node.lineno, node.lineno))
    return "\n".join(parts)


# ----- resolving imports to workspace files ------------------------------------------------------

@dataclass(frozen=True)
class _Scan:
    """A document text's imports, and those it uses with the attributes read from each."""

    imports: tuple[Import, ...]
    wanted: tuple[tuple[Import, frozenset[str]], ...]


class DefinitionIndex:
    """Imported names' definitions from the workspace (see the module docstring)."""

    def __init__(self, workspace: Workspace, refresh_s: float = 2.0) -> None:
        self.workspace = workspace
        self.refresh_s = refresh_s
        self._modules: LRU[Path, tuple[tuple[int, int], _Outline | None]] = LRU(MAX_MODULES)
        self._answers: LRU[tuple, tuple[float, list[Definition]]] = LRU(32)
        self._scans: LRU[str, _Scan] = LRU(_MAX_SCANS)
        self._scanner = ImportScanner()

    def rescope(self) -> None:
        """A folder left: forget the answers, and what was parsed outside the folders now."""
        self._answers.clear()
        for path in [p for p in self._modules if self.workspace.folder_of(p) is None]:
            self._modules.pop(path)

    def _outline(self, path: Path) -> _Outline | None:
        """The outline of a workspace file, parsed again only when its mtime or size moved."""
        stamp = self.workspace.stat(path)
        if stamp is None:
            self._modules.pop(path, None)
            return None
        cached = self._modules.get(path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        text = self.workspace.read(path)
        outline = outline_module(text) if text is not None else None
        self._modules.put(path, (stamp, outline))
        return outline

    def _module_file(self, base: Path, parts: list[str]) -> Path | None:
        target = base.joinpath(*parts) if parts else base
        for candidate in (target.with_name(target.name + ".py") if parts else None,
                          target / "__init__.py"):
            if candidate is not None and self.workspace.stat(candidate) is not None:
                return candidate
        return None

    def resolve(self, module: str, level: int, importer: Path | None) -> Path | None:
        """The workspace file of a module (``None`` outside the workspace or not found)."""
        parts = [p for p in module.split(".") if p] if module else []
        if not all(p.isidentifier() for p in parts):
            return None
        if level > 0:
            if importer is None:
                return None
            base = importer.parent
            for _ in range(level - 1):
                base = base.parent
            return self._module_file(base, parts)
        if not parts:
            return None
        # Only the folders whose top level holds the first part are looked into.
        for base in self.workspace.module_bases(parts[0]):
            found = self._module_file(base.directory, parts[1:] if base.drops_first else parts)
            if found is not None:
                return found
        return None

    def _definition(self, module_file: Path, name: str, hops: int = 0) -> Definition | None:
        """``name`` as defined in (or re-exported by) a module file."""
        outline = self._outline(module_file)
        if outline is None:
            return None
        if name in outline.definitions:
            line, text = outline.definitions[name]
            return Definition(module_file, line, name, text)
        source = outline.reexports.get(name)
        if source is not None and hops < MAX_REEXPORT_HOPS:
            target = self.resolve(source.module, source.level, module_file)
            if target is not None and source.name is not None:
                return self._definition(target, source.name, hops + 1)
        return None

    def definitions(self, document: Path | None, text: str) -> list[Definition]:
        """The definitions of the names ``text`` imports and uses, in import order, each once.

        ``document`` is the document's path (for relative imports; ``None`` when it has no
        file, then only absolute imports resolve).  The answer is remembered for
        ``refresh_s`` seconds per document and set of used imports, so keystrokes that do not
        touch the imports cost a scan of the text, not a look at the disk.
        """
        wanted = self._wanted(text)
        key = (document, wanted, self.workspace.generation)
        now = time.monotonic()
        hit = self._answers.get(key)
        if hit is not None and now - hit[0] < self.refresh_s:
            return hit[1]
        out = self._look_up(document, wanted)
        self._answers.put(key, (now, out))
        return out

    def _scan(self, text: str) -> _Scan:
        """The imports of ``text`` and those it uses, read once per text."""
        found = self._scans.get(text)
        if found is None:
            read = self._scanner.scan(text)
            imports, used, attrs = read.imports, read.names, read.attrs
            found = _Scan(imports, tuple((imp, attrs.get(imp.alias, frozenset()))
                                         for imp in imports if imp.alias in used))
            self._scans.put(text, found)
        return found

    def imports(self, text: str) -> tuple[Import, ...]:
        """:func:`imports_of` ``text``, remembered with the rest of its scan."""
        return self._scan(text).imports

    def _wanted(self, text: str) -> tuple[tuple[Import, frozenset[str]], ...]:
        """The imports ``text`` uses, each with the attributes read from it."""
        return self._scan(text).wanted

    def _look_up(self, document: Path | None,
                 wanted: tuple[tuple[Import, frozenset[str]], ...]) -> list[Definition]:
        out: list[Definition] = []
        seen: set[tuple[Path, str]] = set()

        def add(found: Definition | None) -> None:
            if found is not None and (found.path, found.name) not in seen:
                seen.add((found.path, found.name))
                out.append(found)

        for imp, attrs in wanted:
            module_file = self.resolve(imp.module, imp.level, document)
            if imp.name is None:
                for attr in sorted(attrs):
                    if module_file is not None:
                        add(self._definition(module_file, attr))
                continue
            found = self._definition(module_file, imp.name) if module_file else None
            if found is not None:
                add(found)
                continue
            # ``from pkg import mod``: a submodule, used as ``mod.name``.
            sub = self.resolve(f"{imp.module}.{imp.name}" if imp.module else imp.name,
                               imp.level, document)
            if sub is not None:
                for attr in sorted(attrs):
                    add(self._definition(sub, attr))
        return out
