"""The model's load shown as LSP work-done progress (a progress bar in the editor).

Apart from the server class because its rules are its own: a reload closes the previous
load's bar (no bar hangs forever), a load that ended before the client created the token gets
no bar at all (``begin`` after the end would make a client read an error as success), and
reports come from the loading thread, so they are posted to the event loop.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from lsprotocol import types

from lsp_server.model_host import HostState, LoadState

log = logging.getLogger(__name__)


class LoadProgress:
    """One session's load progress. ``progress`` gives pygls's ``WorkDoneProgress`` of the
    session, ``state`` the model host's state now, ``post`` runs a function on the event
    loop."""

    def __init__(self, progress: Callable[[], Any], state: Callable[[], HostState],
                 post: Callable[[Callable[[], None]], None]) -> None:
        self._progress = progress
        self._state = state
        self._post = post
        self._token: str | None = None

    def begin(self, model: str, supported: bool) -> None:
        """A load of ``model`` starts; ``supported``: the client takes work-done progress."""
        # A reload supersedes the previous load: close its progress so no bar hangs forever.
        self.end(HostState(LoadState.LOADING, model, f"superseded by {model}"))
        if not supported:
            self._token = None
            return
        token = f"seam-load-{uuid.uuid4().hex[:8]}"
        self._token = token

        def begin(*_: Any) -> None:
            if self._token != token:
                return
            if self._state().state in (LoadState.READY, LoadState.ERROR):
                # The load finished before the client answered: seam/status (and, for an
                # error, showMessage) already said how. A begin now would make clients show
                # "loading" and then read the end as success, hiding an error.
                self._token = None
                return
            self._progress().begin(token, types.WorkDoneProgressBegin(
                title="Seam", message=f"loading {model}", percentage=0, cancellable=False))

        try:
            self._progress().create(token, callback=begin)
        except Exception:
            log.exception("could not create a progress token")
            self._token = None

    def report(self, fraction: float, message: str) -> None:
        """How far the load is (called on the loading thread)."""
        token = self._token
        if token is None:
            return
        pct = max(0, min(100, int(round(fraction * 100))))

        def report() -> None:
            progress = self._progress()
            if token in progress.tokens:
                progress.report(token, types.WorkDoneProgressReport(message=message,
                                                                    percentage=pct))

        self._post(report)

    def end(self, state: HostState) -> None:
        """The load ended (or was superseded): close the bar with the state's message."""
        token = self._token
        progress = self._progress()
        if token is None or token not in progress.tokens:
            return
        self._token = None
        progress.end(token, types.WorkDoneProgressEnd(message=state.message))
