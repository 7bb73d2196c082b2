"""The model's state in the last ``seam serve`` session, read back from the server's log.

``seam doctor`` runs in a process of its own and cannot ask the editor's server for
``seam/status``; the server's log (``lsp_server.logs``) records each change of the model's
state (``lsp_server.model_host``: loading, ready, failed with the hint shown to the user, the
vLLM server's errors), so the doctor reads those lines back. Kept apart so that the messages it
depends on are in one place, and the tests that read a real server's log test exactly this.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class ServerState(enum.StrEnum):
    """What the last line about the model says."""

    STARTING = "starting"  # the server started; no model asked for yet
    LOADING = "loading"
    READY = "ready"
    ERROR = "error"  # the load failed; the message is the hint the user was shown
    UNREACHABLE = "unreachable"  # the vLLM server failed a request or a check
    #: the model server was unreachable and the local model loaded or served in its place
    #: (``fallback: "local"``); the message says which server since when
    FALLBACK = "fallback"


@dataclass(frozen=True)
class LogState:
    """The model's state in the last server session a log records."""

    started: str  # the session's first line's timestamp
    state: ServerState
    at: str  # the timestamp of the line that said so
    message: str


#: How ``lsp_server.model_host`` starts its lines about the model server's state (``vLLM
#: server`` in logs written before it served other servers too), the fallback's state, and
#: ``lsp_server.fallback`` the local model's failure.
SERVER_PREFIXES = ("model server ", "vLLM server ")
FALLBACK_PREFIX = "fallback: "
LOCAL_FAILED = "the local fallback model "


def last_session(text: str) -> LogState | None:
    """The last ``seam serve`` session's model state, from the log's text (its end).

    Lines are ``DATE TIME LEVEL LOGGER [THREAD] MESSAGE`` (``lsp_server.logs``); the states
    are read from the messages ``lsp_server.model_host`` writes as the model's state changes.
    """
    session: list[str] | None = None
    for line in text.splitlines():
        if line.endswith("seam serve starting") or "seam serve starting;" in line:
            session = [line]
        elif session is not None:
            session.append(line)
    if not session:
        return None
    stamp = _stamp(session[0])
    state = LogState(stamp, ServerState.STARTING, stamp,
                     "the server started; no model was asked for yet")
    for line in session[1:]:
        parts = line.split(" ", 4)
        if len(parts) < 5 or "] " not in parts[4]:
            continue  # a traceback's line, or not one of Seam's
        level, message = parts[2], parts[4].split("] ", 1)[1]
        if message.startswith("loading model "):
            state = LogState(stamp, ServerState.LOADING, _stamp(line), message)
        elif message.startswith("model ") and message.endswith(" ready"):
            state = LogState(stamp, ServerState.READY, _stamp(line), message)
        elif message.startswith("model load failed: "):
            state = LogState(stamp, ServerState.ERROR, _stamp(line),
                             message[len("model load failed: "):])
        elif message.startswith(FALLBACK_PREFIX):
            state = LogState(stamp, ServerState.FALLBACK, _stamp(line),
                             message[len(FALLBACK_PREFIX):])
        elif message.startswith(LOCAL_FAILED) and " failed to load: " in message:
            state = LogState(stamp, ServerState.ERROR, _stamp(line), message)
        elif message.startswith(SERVER_PREFIXES):
            if message.endswith(": ready"):
                state = LogState(stamp, ServerState.READY, _stamp(line), message)
            elif state.state is ServerState.FALLBACK:
                continue  # another failed try while the local model serves: still fallback
            elif level in ("WARNING", "ERROR") or message.endswith(": error"):
                state = LogState(stamp, ServerState.UNREACHABLE, _stamp(line), message)
    return state


def _stamp(line: str) -> str:
    """The ``asctime`` at the start of a log line (date and time)."""
    return " ".join(line.split(" ", 2)[:2])
