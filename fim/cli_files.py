"""Reading the files the ``seam`` command line is given, without hanging or running out of
memory.

``seam complete FILE:LINE:COL`` and ``--jsonl IN`` once read their path with
``Path.read_bytes``: a FIFO blocked forever (``open`` waits for a writer), ``/dev/zero`` read
until a ``MemoryError``, a directory gave an ``OSError``. Here a path must be a regular file
no larger than a stated limit; anything else is one :class:`~fim.cli_args.UsageError` line
(exit code 2) before anything is read. The file is opened without blocking and checked again
on the open descriptor, so a path swapped for a FIFO between the two checks cannot hang either,
and at most ``limit + 1`` bytes are ever read.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from fim import lines
from fim.cli_args import UsageError

#: The largest source file ``seam complete FILE:LINE:COL`` reads (far beyond any Python file
#: a model's window can hold; the language server's own message limit is 64 MB).
MAX_SOURCE_BYTES = 16 * 1024 * 1024
#: The largest ``--jsonl`` input (it is read whole, to report every bad line up front).
MAX_JSONL_BYTES = 512 * 1024 * 1024


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _check(path: Path, st: os.stat_result, limit: int, what: str) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{path} is {_kind(st.st_mode)}, not a {what}: give a regular file")
    if st.st_size > limit:
        raise UsageError(f"{path} is {st.st_size:,} bytes; a {what} may be at most "
                         f"{limit:,} bytes")


def read_regular_file(path: Path, limit: int, what: str) -> bytes:
    """The bytes of ``path``, a regular file of at most ``limit`` bytes; ``UsageError`` for
    anything else (missing, unreadable, a FIFO, a device, a directory, too large)."""
    try:
        _check(path, os.stat(path), limit, what)
        # O_NONBLOCK: should the path have become a FIFO since the stat, open returns at
        # once instead of waiting for a writer, and the fstat below refuses it.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) |
                     getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except OSError as err:
        raise UsageError(f"{path}: cannot read ({err.strerror or err})") from None
    try:
        _check(path, os.fstat(fd), limit, what)
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as err:
        if err.errno == errno.EAGAIN:
            raise UsageError(f"{path} is not a regular file, not a {what}") from None
        raise UsageError(f"{path}: cannot read ({err.strerror or err})") from None
    finally:
        os.close(fd)
    if size > limit:  # the file grew after the check
        raise UsageError(f"{path} is over {limit:,} bytes, the most a {what} may be")
    return b"".join(chunks)


def read_source(path: Path) -> str:
    """A source file's text as an editor opens it: UTF-8, its byte order mark dropped, line
    breaks kept (``fim.lines`` counts them)."""
    data = read_regular_file(path, MAX_SOURCE_BYTES, "source file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UsageError(f"{path}: not UTF-8 text (invalid byte at offset {err.start})") from None
    text = lines.strip_bom(text)
    if not text:
        raise UsageError(f"{path}: the file is empty; there is no context to complete in")
    return text


def parse_position(spec: str) -> tuple[Path, int, int]:
    """``FILE:LINE:COL`` (the file name may itself contain colons)."""
    parts = spec.rsplit(":", 2)
    if len(parts) != 3:
        raise UsageError(f"expected FILE:LINE:COL, got {spec!r}")
    try:
        line, col = int(parts[1]), int(parts[2])
    except ValueError:
        raise UsageError(f"LINE and COL must be integers in {spec!r}") from None
    return Path(parts[0]), line, col


def offset_of(text: str, line: int, col: int, path: Path | str = "<file>") -> int:
    """The offset of 1-based ``line`` and code-point ``col`` (``fim.lines``: LSP's line
    breaks); ``UsageError`` naming ``path`` outside the text."""
    try:
        return lines.offset_of(text, line, col)
    except lines.LineColumnError as err:
        raise UsageError(f"{path}: {err}") from None
