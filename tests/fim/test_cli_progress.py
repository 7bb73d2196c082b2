"""``seam complete`` shows the prompt being read and the middle being written on a terminal,
and nothing when stderr is not one or with --quiet / --json."""

from __future__ import annotations

import io
import sys

from fim import cli


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_names_the_phase_and_counts_tokens(monkeypatch):
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    progress, close = cli._decode_progress(quiet=False)
    progress("prefill", 256, 812)
    progress("decode", 3, 32)
    close()
    shown = term.getvalue()
    assert "reading the prompt: 256/812 tokens" in shown
    assert "writing the middle: 3/32 tokens" in shown


def test_no_progress_when_quiet_or_not_a_terminal(monkeypatch):
    monkeypatch.setattr(sys, "stderr", Terminal())
    assert cli._decode_progress(quiet=True)[0] is None
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert cli._decode_progress(quiet=False)[0] is None
