"""Logging: a rotating log file plus ``window/logMessage`` to the editor; never stdout.

Seam's own loggers (``lsp_server``, ``fim``, ``quotient``, ``lexer``) go to both sinks. pygls
logs every message it sends at INFO; it is held at WARNING, and its records never go to the
editor (each logMessage it sent would log itself again).
"""

from __future__ import annotations

import logging
import logging.handlers
import os
from collections.abc import Callable
from pathlib import Path

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


class EditorLogHandler(logging.Handler):
    """Forwards records to the editor through ``send(MessageType, text)``.

    ``send`` must be safe to call from any thread (the server marshals it onto its event loop).
    """

    def __init__(self, send: Callable[[types.MessageType, str], None],
                 level: int = logging.INFO) -> None:
        super().__init__(level)
        self._send = send
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

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
        raise ValueError(f"unknown log level {level!r}")
    root = logging.getLogger()
    root.setLevel(logging.WARNING)
    for name in OWN_LOGGERS:
        logging.getLogger(name).setLevel(numeric)
    logging.getLogger("pygls").setLevel(logging.WARNING)
    fmt = logging.Formatter(_FORMAT)
    stderr = logging.StreamHandler()  # stderr: stdout carries the protocol
    stderr.setFormatter(fmt)
    stderr.setLevel(logging.WARNING)
    root.addHandler(stderr)
    if log_file == "":
        return None
    path = Path(log_file) if log_file is not None else default_log_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.handlers.RotatingFileHandler(
            path, maxBytes=5_000_000, backupCount=2, encoding="utf-8")
    except OSError as exc:
        logging.getLogger(__name__).warning("cannot open log file %s: %s", path, exc)
        return None
    handler.setFormatter(fmt)
    root.addHandler(handler)
    return path
