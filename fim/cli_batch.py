"""``seam complete --jsonl IN [--out OUT]``: a batch of completions, one result row per line.

Each input line is ``{"id", "left", "right"}``, the text left and right of the cursor (or, by
their older names, ``"prefix"`` and ``"suffix"``, which files written for earlier versions
use); a line that cannot be completed gets an
error row and a line on stderr, and the batch goes on (exit code 2 if any line was refused).

OUT is never emptied before there is something to put in it. The rows go to a temporary file
beside OUT (``.OUT.XXXX.part``, so that the final rename stays on one file system), flushed
row by row; only when the batch ends is it renamed over OUT in one step. A model that fails to
load, a full disk or a crash leaves OUT as it was (the temporary file is removed). Ctrl-C
keeps the finished rows: they replace OUT, except when OUT is the input file itself, whose
lines must survive an interrupted run: then they are kept in ``OUT.partial`` and stderr says
so.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from fim.cli_args import UsageError
from fim.cli_files import MAX_JSONL_BYTES, read_regular_file
from quotient.constraint import LanguageMode

if TYPE_CHECKING:  # the engine's modules load only once the input has been read
    from fim.api import CompletionRequest, CompletionResult
    from fim.engine_interface import CompletionEngine


@dataclass(frozen=True)
class BatchItem:
    """One input line of ``--jsonl``: what to complete, or why it cannot be."""

    line: int
    id: Any
    left: str = ""
    right: str = ""
    problem: str | None = None
    #: the row's ``language`` field (``None``: the command's ``--language``, else python)
    language: str | None = None


_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _text_problem(name: str, value: Any) -> str | None:
    if not isinstance(value, str):
        return f"needs a string field {name!r}"
    m = _LONE_SURROGATE.search(value)
    if m:
        return (f"{name!r} holds a lone surrogate (\\u{ord(m.group()):04x}) at character "
                f"{m.start()}: not Unicode text")
    return None


#: The input fields of the text at the cursor, and the older names each may go by.
TEXT_FIELDS = (("left", "prefix"), ("right", "suffix"))


def _text_field(item: dict, name: str, older: str) -> tuple[str | None, str | None]:
    """``(text, problem)`` of one text field, read by its name or its older one (not both)."""
    if name in item and older in item:
        return None, f"gives both {name!r} and its older name {older!r}: give one"
    if name not in item and older not in item:
        return None, f"needs a string field {name!r} (or {older!r}, its older name)"
    key = name if name in item else older
    value = item[key]
    problem = _text_problem(key, value)
    return (None, problem) if problem else (value, None)


def read_jsonl(path: Path) -> list[BatchItem]:
    """Every non-blank line of ``path``; a line that cannot be completed carries its problem."""
    raw = read_regular_file(path, MAX_JSONL_BYTES, "JSONL file")
    items = []
    for n, data in enumerate(raw.split(b"\n"), 1):
        if not data.strip():
            continue
        try:
            item = json.loads(data.decode("utf-8"))
        except UnicodeDecodeError as err:
            items.append(BatchItem(n, n, problem=f"not UTF-8 (byte {err.start})"))
            continue
        except ValueError as err:
            items.append(BatchItem(n, n, problem=f"not JSON ({str(err).splitlines()[0]})"))
            continue
        if not isinstance(item, dict):
            items.append(BatchItem(n, n, problem="not a JSON object"))
            continue
        ident = item.get("id", n)
        (left, left_problem), (right, right_problem) = (
            _text_field(item, name, older) for name, older in TEXT_FIELDS)
        language = item.get("language")
        problem = left_problem or right_problem or (
            "'language' must be a string, e.g. \"python\" or \"go\""
            if language is not None and not isinstance(language, str) else None)
        if problem or left is None or right is None:
            items.append(BatchItem(n, ident, problem=problem))
        else:
            items.append(BatchItem(n, ident, left, right, language=language))
    return items


class PendingOutput:
    """The rows of a batch in a temporary file beside ``out``, renamed over it at the end."""

    def __init__(self, out: Path) -> None:
        # A link is written through, as opening OUT for writing would: the rename must
        # replace the file it names, not the link.
        self.out = out = Path(os.path.realpath(out)) if out.is_symlink() else out
        try:
            fd, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".part",
                                        dir=out.parent or ".")
        except OSError as err:
            raise UsageError(f"cannot write beside {out}: {err.strerror or err}") from None
        self.path = Path(name)
        self.stream: TextIO = os.fdopen(fd, "w", encoding="utf-8")

    def _mode(self) -> int:
        """OUT's permissions if it exists, else those of a new file (mkstemp makes 0600)."""
        try:
            return os.stat(self.out).st_mode & 0o7777
        except OSError:
            umask = os.umask(0)
            os.umask(umask)
            return 0o666 & ~umask

    def commit(self, target: Path | None = None) -> Path:
        """Rename the rows over ``target`` (OUT by default), in one step; the path."""
        target = target or self.out
        self.stream.close()
        os.chmod(self.path, self._mode())
        os.replace(self.path, target)
        return target

    def discard(self) -> None:
        """Drop the rows: OUT stays as it was."""
        self.stream.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def _row(item: BatchItem, res: CompletionResult) -> dict:
    row = {
        "id": item.id, "middle": res.middle, "stop": res.stop, "tokens": res.tokens,
        "setup_ms": round(res.setup_ms, 3), "model_ms": round(res.model_ms, 3),
        "constraint_ms": round(res.constraint_ms, 3), "mode": res.mode,
        "parses": res.parses,
    }
    if res.error:
        row["error"] = res.error
    if res.mode == LanguageMode.UNCHECKED:  # a language Seam has no grammar for
        row["note"] = (f"no grammar for {item.language or 'this language'!r}: the middle "
                       "is unchecked")
    return row


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def complete_jsonl(args: Any, load: Callable[[], CompletionEngine],
                   request: Callable[[str, str, str | None], CompletionRequest],
                   emit: Callable[[str, TextIO], None]) -> int:
    """Complete every line of ``args.jsonl`` into ``args.out`` (or stdout) with the engine
    ``load()`` returns; exit code 2 if any line was refused, else 0."""
    items = read_jsonl(args.jsonl)
    pending = PendingOutput(args.out) if args.out else None
    out = pending.stream if pending else sys.stdout
    try:
        engine = load()
        refused = _run(args, engine, items, request, emit, out)
    except KeyboardInterrupt:
        if pending is not None:
            if _same_file(args.jsonl, args.out):
                kept = pending.commit(Path(f"{args.out}.partial"))
                print(f"seam: the finished rows are in {kept}; {args.out} is unchanged",
                      file=sys.stderr)
            else:
                pending.commit()
        raise
    except BaseException:
        if pending is not None:
            pending.discard()
        raise
    if pending is not None:
        pending.commit()
    return 2 if refused else 0


def _run(args: Any, engine: CompletionEngine, items: list[BatchItem],
         request: Callable[[str, str, str | None], CompletionRequest],
         emit: Callable[[str, TextIO], None], out: TextIO) -> int:
    """Complete the items, writing a row each; the number refused."""
    from tqdm import tqdm

    refused = 0
    for item in tqdm(items, desc="complete", file=sys.stderr, disable=args.quiet):
        problem = item.problem
        if problem is None:
            try:
                res = engine.complete(request(item.left, item.right, item.language))
            except Exception as err:  # one bad item must not end the batch
                problem = str(err).splitlines()[0] if str(err) else type(err).__name__
        if problem is not None:
            refused += 1
            emit(f"seam: {args.jsonl}:{item.line}: {problem}", sys.stderr)
            emit(json.dumps({"id": item.id, "middle": None, "stop": "error",
                             "error": problem}), out)
            continue
        emit(json.dumps(_row(item, res)), out)
    return refused
