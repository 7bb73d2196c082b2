"""Logging: a rotating log file plus ``window/logMessage`` to the editor; never stdout.

Seam's own loggers (``lsp_server``, ``fim``, ``quotient``, ``lexer``) go to both sinks. pygls
logs every message it sends at INFO; it is held at WARNING, and its records never go to the
editor (each logMessage it sent would log itself again).

The log is private: the file is created 0600, in a directory Seam creates 0700 (and its own
default directory is tightened to 0700). No document text is written at the default level:
pygls's records carry whole messages in their arguments, so below DEBUG each argument is
reduced to its type and size. Tracebacks go to the file only; the editor and stderr get one
line per record.
"""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsprotocol import types

OWN_LOGGERS = ("lsp_server", "fim", "quotient", "lexer")
_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(threadName)s] %(message)s"


def default_log_file() -> Path:
    """``$XDG_STATE_HOME/seam/server.log`` (``~/.local/state/seam/server.log``)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state")
    return Path(base) / "seam" / "server.log"


_LEVELS = {
    logging.ERROR: types.MessageType.Error,
    logging.WARNING: types.MessageType.Warning,
    logging.INFO: types.MessageType.Info,
}


class OneLineFormatter(logging.Formatter):
    """A record as one line: an exception is named, its traceback left to the log file."""

    def format(self, record: logging.LogRecord) -> str:
        record.message = record.getMessage()
        if self.usesTime():
            record.asctime = self.formatTime(record, self.datefmt)
        text = self.formatMessage(record)
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None:
            text += f" ({type(exc).__name__})"
        return text


def _summary(value: Any) -> Any:
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    if isinstance(value, str) and len(value) <= 40 and value.isprintable():
        return value
    size = len(value) if isinstance(value, (str, bytes, list, dict, tuple)) else None
    return f"<{type(value).__name__}{'' if size is None else f' of {size}'}>"


class RedactContent(logging.Filter):
    """Reduce a third-party record's arguments to type and size (they may hold document
    text), and its exception to the exception's name."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.split(".")[0] in OWN_LOGGERS:
            return True
        if isinstance(record.args, dict):
            record.args = {k: _summary(v) for k, v in record.args.items()}
        elif record.args:
            record.args = tuple(_summary(a) for a in record.args)
        if record.exc_info and record.exc_info[1] is not None:
            record.msg = f"{record.msg} ({type(record.exc_info[1]).__name__})"
        record.exc_info = None
        record.exc_text = None
        return True


class _PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """A rotating log whose files only their owner can read."""

    def _open(self):  # noqa: ANN202 - as in logging.FileHandler
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with contextlib.suppress(OSError):  # e.g. /dev/null
            if os.path.isfile(self.baseFilename):
                os.fchmod(fd, 0o600)
        return os.fdopen(fd, "a", encoding=self.encoding, errors=self.errors)


def _private_directory(path: Path, own: bool) -> None:
    """Create ``path`` 0700; tighten it if it is Seam's own default directory."""
    if not path.exists():
        path.mkdir(parents=True, mode=0o700)
        return
    if own:
        with contextlib.suppress(OSError):
            os.chmod(path, 0o700)


class EditorLogHandler(logging.Handler):
    """Forwards records to the editor through ``send(MessageType, text)``.

    ``send`` must be safe to call from any thread (the server marshals it onto its event loop).
    """

    def __init__(self, send: Callable[[types.MessageType, str], None],
                 level: int = logging.INFO) -> None:
        super().__init__(level)
        self._send = send
        self.setFormatter(OneLineFormatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.split(".")[0] not in OWN_LOGGERS:
            return
        kind = next((t for lvl, t in _LEVELS.items() if record.levelno >= lvl),
                    types.MessageType.Log)
        try:
            self._send(kind, self.format(record))
        except Exception:
            self.handleError(record)


def setup_logging(log_file: str | os.PathLike | None, level: str = "INFO") -> Path | None:
    """Route logs to ``log_file`` (created if needed) and stderr; return the file used.

    ``log_file`` of ``None`` picks :func:`default_log_file`; ``""`` disables the file. A file
    that cannot be opened is reported on stderr and skipped: logging must not stop the server.
    """
    numeric = getattr(logging, str(level).upper(), None)
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}; use DEBUG, INFO, WARNING or ERROR")
    root = logging.getLogger()
    root.setLevel(logging.WARNING)
    for name in OWN_LOGGERS:
        logging.getLogger(name).setLevel(numeric)
    logging.getLogger("pygls").setLevel(logging.WARNING)
    redact = numeric > logging.DEBUG
    stderr = logging.StreamHandler()  # stderr: stdout carries the protocol
    stderr.setFormatter(OneLineFormatter(_FORMAT))
    stderr.setLevel(logging.WARNING)
    if redact:
        stderr.addFilter(RedactContent())
    root.addHandler(stderr)
    if log_file == "":
        return None
    path = Path(log_file) if log_file is not None else default_log_file()
    try:
        _private_directory(path.parent, own=log_file is None)
        handler = _PrivateRotatingFileHandler(
            path, maxBytes=5_000_000, backupCount=2, encoding="utf-8")
    except OSError as exc:
        logging.getLogger(__name__).warning("cannot open log file %s: %s", path,
                                            exc.strerror or exc)
        return None
    handler.setFormatter(logging.Formatter(_FORMAT))
    if redact:
        handler.addFilter(RedactContent())
    root.addHandler(handler)
    return path
