"""Projects, cursors and what the server would know: the cases of ``benchmarks/usefulness.py``.

A project is a package folder playing the workspace folder; its cursors (mid-line and empty
line, on one-line statements inside function bodies) and the modelled editor state (open
documents, recent edits, the configuration measured) are built here, so that the running and
the tables live apart (issue 20: modules by job).  See ``benchmarks/usefulness.py``'s
docstring for the modelling choices.
"""

from __future__ import annotations

import ast
import dataclasses
import random
import re
import sysconfig
from pathlib import Path

from fim.editor_policy import LEFT_FIRST_TOKENS
from fim.eval.datasets import python_files, read_python
from lsp_server.project.python_definitions import DefinitionIndex, imports_of
from lsp_server.project.recent_edits import EditRing
from lsp_server.project.sources import SOURCES, OpenDocument
from lsp_server.project.workspace import MAX_FILE_BYTES, Workspace
from lsp_server.settings import MAX_TIME_BUDGET_MS, Settings

VARIANTS = ("off", "all", *SOURCES)
KINDS = ("mid_line", "empty_line")
_SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return, ast.Raise,
           ast.Assert, ast.Delete)


# ----- projects and cases ---------------------------------------------------------------------

def package_folder(name: str) -> Path:
    """A package by name (standard library first, then the venv's site-packages) or path."""
    for base in (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"]):
        folder = Path(base) / name
        if (folder / "__init__.py").is_file():
            return folder
    folder = Path(name).expanduser()
    if folder.is_dir():
        return folder.resolve()
    raise SystemExit(f"no package {name!r} in the standard library or site-packages")


def statement_lines(text: str) -> list[int]:
    """0-based lines holding one whole simple statement inside a function body."""
    tree = ast.parse(text)
    lines = text.split("\n")
    out = set()
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if not isinstance(node, _SIMPLE) or node.lineno != node.end_lineno:
                continue
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # docstrings and bare constants
            line = lines[node.lineno - 1]
            content = line.strip()
            if len(content) < 10 or ";" in line or content.startswith("#") or \
                    len(line) - len(line.lstrip()) != node.col_offset:
                continue
            out.add(node.lineno - 1)
    return sorted(out)


@dataclasses.dataclass
class Case:
    id: str
    kind: str
    path: Path
    text: str  # the file with the hole
    offset: int  # the cursor
    truth: str
    line: int
    source: str  # the file without the hole


def lines_using_package_imports(path: Path, text: str, workspace: Workspace
                                 ) -> dict[int, int]:
    """0-based lines that use a name the file imports from its own package (the cursors
    where the definitions source has something to say), each with the last column a
    mid-line cut may take so that the rest of the line still holds part of that name."""
    index = DefinitionIndex(workspace)
    names = {imp.alias for imp in imports_of(text)
             if index.resolve(imp.module, imp.level, path) is not None or
             index.resolve(f"{imp.module}.{imp.name}" if imp.module else imp.name or "",
                           imp.level, path) is not None}
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(names))) + r")\b") \
        if names else None
    out = {}
    for n, line in enumerate(text.split("\n")):
        m = pattern.search(line) if pattern else None
        if m:
            out[n] = m.end() - 1
    return out


def cases_of(path: Path, folder: Path, text: str, per_kind: int, seed: int,
             only: dict[int, int] | None = None) -> list[Case]:
    """``per_kind`` cursors of each kind in one file, in the order they appear in it
    (``only``: on these lines only, mid-line cuts at most at the column given)."""
    rel = path.relative_to(folder).as_posix()
    rng = random.Random(f"{seed}:{folder.name}/{rel}")
    spots = [n for n in statement_lines(text) if only is None or n in only]
    if len(spots) < 2 * per_kind:
        return []
    chosen = rng.sample(spots, 2 * per_kind)
    lines = text.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    out = []
    for k, n in enumerate(chosen):
        line = lines[n]
        indent = len(line) - len(line.lstrip())
        if k < per_kind:
            if only is None:
                cut = rng.randrange(indent + 2, len(line) - 1)
            else:  # keep part of the imported name in the truth
                hi = min(len(line) - 1, only[n] + 1)
                cut = rng.randrange(indent + 1, hi) if hi > indent + 1 else indent + 1
            kind, truth = "mid_line", line[cut:]
        else:
            cut, kind, truth = indent, "empty_line", line[indent:]
        at = starts[n] + cut
        hole = text[:at] + text[starts[n] + len(line):]
        out.append(Case(f"{folder.name}/{rel}:{n + 1}:{kind}", kind, path, hole, at, truth, n,
                        text))
    return sorted(out, key=lambda c: c.offset)


def project_files(folder: Path, seed: int) -> list[tuple[Path, str]]:
    files = []
    for p in python_files(folder):
        if p.stat().st_size > MAX_FILE_BYTES:
            continue
        text = read_python(p)
        if text is not None and text.count("\n") >= 30:
            files.append((p, text))
    random.Random(f"{seed}:files:{folder.name}").shuffle(files)
    return files


# ----- what the server would know -------------------------------------------------------------

def open_documents(path: Path, files: list[tuple[Path, str]], n: int, seed: int
                   ) -> list[OpenDocument]:
    """``n`` other modules of the package (a seeded draw), then the file itself."""
    others = [(p, t) for p, t in files if p != path]
    picked = random.Random(f"{seed}:open:{path}").sample(others, min(n, len(others)))
    return [OpenDocument(p.as_uri(), t) for p, t in picked]


def edit_ring(case: Case, others: list[OpenDocument], anchor_line: int, seed: int
              ) -> EditRing:
    """Recent edits: two lines of the file above the prompt's start, one per open document."""
    rng = random.Random(f"{seed}:edits:{case.id}")
    ring = EditRing()
    for doc in others:
        try:
            spots = statement_lines(doc.text)
        except SyntaxError:
            continue
        if spots:
            n = rng.choice(spots)
            ring.record(doc.uri, doc.text, n, n + 1, n + 1)
    # Lines above the hole are the same in the file with and without it.
    above = [n for n in statement_lines(case.source) if n + 4 < anchor_line]
    for n in sorted(rng.sample(above, min(2, len(above)))):
        ring.record(case.path.as_uri(), case.text, n, n + 1, n + 1)
    return ring


@dataclasses.dataclass(frozen=True)
class Config:
    """One measured configuration: the context's sources (a variant) and the window split."""

    name: str
    variant: str
    budget: int | None = None  # contextBudgetTokens (None: auto)
    context: int | None = None  # contextTokens (None: auto)
    right: int | None = None  # the right context's share (None: the server's)
    left: int = LEFT_FIRST_TOKENS  # left tokens at a new prompt start
    widened: bool = False  # the anchor the server widens to while the cursor rests


def parse_splits(spec: str, base: Config) -> list[Config]:
    """``name:key=value,...;...`` with keys budget, context, right, left, widened, variant."""
    out = []
    for item in [x for x in spec.split(";") if x.strip()]:
        name, _, body = item.partition(":")
        fields: dict = {"name": name.strip()}
        for pair in [x for x in body.split(",") if x.strip()]:
            key, _, value = pair.partition("=")
            key = key.strip()
            if key == "variant":
                fields["variant"] = value.strip()
            elif key == "widened":
                fields["widened"] = value.strip() not in ("0", "false", "")
            elif key in ("budget", "context", "right", "left"):
                fields[key] = int(value)
            else:
                raise SystemExit(f"unknown split key {key!r} in {item!r}")
        out.append(dataclasses.replace(base, **{"variant": "all", **fields}))
    return out


def settings_for(config: Config, args) -> Settings:
    flags = {f"context_{s}": config.variant in ("all", s) for s in SOURCES}
    return Settings(model=args.model, engine=args.engine,
                    context_tokens=config.context, context_budget=config.budget,
                    time_budget_ms=None if args.time_budgets else MAX_TIME_BUDGET_MS, **flags)


@dataclasses.dataclass
class FileCases:
    """A file's cases and what the server would know while the user works in it."""

    path: Path
    cases: list[Case]
    others: list[OpenDocument]  # the other open documents
    workspace: Workspace

    @property
    def uri(self) -> str:
        return self.path.as_uri()


def project_cases(folder: Path, args) -> list[FileCases]:
    """``args.cases`` cursors of each kind from the package, ``args.per_file`` per file."""
    files = project_files(folder, args.seed)
    workspace = Workspace()
    workspace.add(folder.as_uri(), folder.name)
    wanted = {k: args.cases for k in KINDS}
    out = []
    for path, text in files:
        if not any(wanted.values()):
            break
        only = (lines_using_package_imports(path, text, workspace)
                if args.cursors == "package-imports" else None)
        cases = [c for c in cases_of(path, folder, text, args.per_file, args.seed, only)
                 if wanted[c.kind] > 0]
        if not cases:
            continue
        for c in cases:
            wanted[c.kind] -= 1
        out.append(FileCases(path, cases, open_documents(path, files, args.open, args.seed),
                             workspace))
    return out
