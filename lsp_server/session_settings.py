"""The settings of one editor session: received, validated, applied, and each refusal shown once.

It exists apart from the protocol class (``server.SeamServer``, which hands it what arrives:
``initializationOptions``, ``workspace/didChangeConfiguration``, the answer to a
``workspace/configuration`` pull) so that the server keeps to its handlers. Parsing and
validation are ``settings``'; what a change sets off lives here: the llama.cpp threads, the
vLLM slowness limit and the local fallback (``fallback``) apply live, the suggestion cache is
emptied, and ``maxTokens`` is checked again once the model's window is known
(``check_budget``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from lsp_server.completion_service import CompletionService
from lsp_server.model_host import ModelHost
from lsp_server.request_plan import device_type
from lsp_server.settings import (
    SETTING_KEYS,
    Settings,
    SettingsShapeError,
    check_budget,
    merge,
    section_of,
    settings_json,
)

log = logging.getLogger(__name__)

#: How many distinct problems are remembered as already shown.
MAX_REMEMBERED_PROBLEMS = 256
REMOTE_CODE_REFUSED = (
    "Seam ignored seam.trustRemoteCode: a model's own code runs only when the server itself "
    "was started with `seam serve --trust-remote-code` (in VS Code: set seam.trustRemoteCode "
    "in your user settings, which passes that flag)."
)

#: Shows a warning to the user (``window/showMessage``).
Show = Callable[[str], None]
#: Asks the client for the ``seam`` section (``workspace/configuration``): its answer, or
#: ``None`` when the client cannot be asked or did not answer.
Pull = Callable[[], Awaitable[Any]]


class ShownOnce:
    """Messages already shown in this session (each distinct one is shown once), bounded."""

    def __init__(self) -> None:
        self._shown: set[str] = set()

    def fresh(self, keys: list[str]) -> list[str]:
        """Those of ``keys`` not shown before, in order; they count as shown from now on."""
        new = [k for k in dict.fromkeys(keys) if k not in self._shown]
        if len(self._shown) + len(new) > MAX_REMEMBERED_PROBLEMS:
            self._shown.clear()
        self._shown.update(new)
        return new


class SessionSettings:
    """The settings in force for a session (``service.settings``), and how new ones arrive.

    ``pinned``: keys the editor may not change (the command line's, and those the settings
    table pins); ``allow_remote_code``: ``seam serve --trust-remote-code``.
    """

    def __init__(self, service: CompletionService, host: ModelHost, pinned: frozenset[str],
                 allow_remote_code: bool, show: Show, pull: Pull) -> None:
        self.service = service
        self.host = host
        self.pinned = pinned | {k.name for k in SETTING_KEYS if k.pinned}
        self.allow_remote_code = allow_remote_code
        self.shown = ShownOnce()
        self._show = show
        self._pull = pull
        service.settings = dataclasses.replace(service.settings,
                                               trust_remote_code=allow_remote_code)

    @property
    def current(self) -> Settings:
        return self.service.settings

    def receive(self, payload: Any) -> bool:
        """Apply settings from any source; ``False`` when the payload held none."""
        try:
            section = section_of(payload)
        except SettingsShapeError as exc:
            self.report([str(exc)])
            return True
        if section is None:
            return False
        self._apply(section)
        return True

    async def pull(self) -> None:
        """Ask the client for the settings (``workspace/configuration``) and apply them."""
        result = await self._pull()
        if isinstance(result, (list, tuple)) and result and isinstance(result[0], dict):
            # The client answers with the section's contents (not wrapped in "seam").
            payload = result[0]
            if "seam" not in payload:
                payload = {"seam": payload}
            self.receive(payload)

    def _apply(self, section: dict[str, Any]) -> None:
        old = self.current
        messages: list[str] = []
        if section.get("trustRemoteCode") is True and not self.allow_remote_code:
            messages.append(REMOTE_CODE_REFUSED)
        ignored = sorted(k for k in section if k in self.pinned and k != "trustRemoteCode")
        if ignored:
            log.info("settings %s are fixed by the command line; ignoring the editor's", ignored)
        new, problems = merge(old, {k: v for k, v in section.items() if k not in self.pinned})
        new, budget = check_budget(new, old, *self.model_facts())
        messages.extend(p.message() for p in problems + budget)
        self.report(messages)
        self.service.settings = new
        if new.threads != old.threads:
            self.host.set_threads(new.threads)  # applies live: no reload
        if new.vllm_slow_after_ms != old.vllm_slow_after_ms:
            self.host.set_slow_after(new.vllm_slow_after_ms / 1000)  # live too
        if (new.fallback, new.local_spec) != (old.fallback, old.local_spec):
            self.host.set_fallback(new.fallback, new.local_spec)  # live: no reconnect
        if new != old:
            self.service.reset_suggestions()
            log.info("settings now %s", settings_json(new))

    def model_facts(self) -> tuple[str | None, int | None]:
        """Where the loaded model runs and its window; ``(None, None)`` before it loads."""
        engine = self.host.engine
        if engine is None:
            return ("cpu" if self.current.device == "cpu" else None), None
        return device_type(engine), engine.window

    def check_budget(self) -> None:
        """Re-check the token budget once the model (and its window) is known."""
        new, problems = check_budget(self.current, Settings(), *self.model_facts())
        if problems:
            self.report([p.message() for p in problems])
            self.service.settings = new

    def report(self, messages: list[str]) -> None:
        """Log every refused setting; show each distinct one to the user once per session."""
        for message in messages:
            log.warning("settings: %s", message)
        fresh = self.shown.fresh(messages)
        if fresh:
            self._show("Seam settings: " + " ".join(
                m if m.endswith(".") else m + "." for m in fresh))
