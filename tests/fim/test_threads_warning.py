"""A ``threads`` count above the CPUs this process may use is honoured and warned about
(issue 28, finding 8: ``threads: 256`` on 2 CPUs was accepted silently and made suggestions 15
times slower)."""

from __future__ import annotations

import logging

from fim.engines.cpu_load import ThreadGovernor


def test_more_threads_than_cpus_is_warned_about_once(caplog) -> None:
    caplog.set_level(logging.WARNING, logger="fim.engines.cpu_load")
    governor = ThreadGovernor(most=2, cpus=2, monitor=None, pinned=256)
    assert governor.choose().threads == 256  # honoured
    governor.pin(256)  # the same setting again (a settings reload): no second warning
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "256" in warned[0] and "2 CPUs" in warned[0]


def test_a_count_within_the_cpus_is_not_warned_about(caplog) -> None:
    caplog.set_level(logging.WARNING, logger="fim.engines.cpu_load")
    governor = ThreadGovernor(most=2, cpus=2, monitor=None, pinned=2)
    governor.pin(1)
    governor.pin(None)
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]
