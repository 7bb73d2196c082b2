"""What the team-server tests share: where the team environment is, and the rule for tests that
need vLLM itself.

vLLM lives in its own environment (``.venv-team``, made by ``scripts/setup_team.sh``), never in
the main one.  Tests that import vLLM skip where it is not installed, except when
``SEAM_TEAM_TESTS=1`` (``scripts/test_team.sh`` sets it), where its absence fails.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TEAM_PYTHON = REPO / ".venv-team" / "bin" / "python"


def team_tests_required() -> bool:
    """Whether a missing vLLM is a failure here rather than a reason to skip."""
    return os.environ.get("SEAM_TEAM_TESTS") == "1" or bool(os.environ.get("CI"))


def need_vllm() -> None:
    """Skip (or fail, see the module docstring) unless vLLM imports in this interpreter."""
    if importlib.util.find_spec("vllm") is None:
        message = ("vLLM is not installed in this environment; run the team tests with "
                   "scripts/test_team.sh (it uses .venv-team, made by scripts/setup_team.sh)")
        if os.environ.get("SEAM_TEAM_TESTS") == "1":
            pytest.fail(message)
        pytest.skip(message, allow_module_level=True)


def need_team_python() -> None:
    """Skip (or fail where the team tests are required) unless ``.venv-team`` exists."""
    if not TEAM_PYTHON.exists():
        message = f"{TEAM_PYTHON} is absent: run scripts/setup_team.sh"
        if team_tests_required():
            pytest.fail(message)
        pytest.skip(message)
