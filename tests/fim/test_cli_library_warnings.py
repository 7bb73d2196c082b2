"""``seam complete`` prints no library's warning (issue 28, finding 8: ``seam complete --model
random:santacoder`` printed transformers' ``FutureWarning`` about ``past_key_values``), while
a warning of Seam's own still reaches the user."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from fim.cli import quiet_library_warnings

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
def test_complete_on_the_random_model_prints_no_library_warning(tmp_path) -> None:
    source = tmp_path / "a.py"
    source.write_text("def add(a, b):\n    return \n")
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1",
               HF_HOME=str(tmp_path / "hf"))
    env.pop("PYTHONWARNINGS", None)
    done = subprocess.run([sys.executable, "-m", "lsp_server.cli", "complete", "--model",
                           "random:santacoder", "--max-tokens", "4", f"{source}:2:12"],
                          capture_output=True, text=True, env=env, timeout=280, cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr
    assert "Warning" not in done.stderr, done.stderr


def test_only_other_modules_notices_are_dropped() -> None:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with quiet_library_warnings():
            warnings.warn_explicit("renamed", FutureWarning, "x.py", 1, module="transformers.x")
            warnings.warn_explicit("ours", FutureWarning, "y.py", 1, module="fim.api")
            warnings.warn_explicit("look", UserWarning, "z.py", 1, module="transformers.z")
    assert sorted(str(w.message) for w in seen) == ["look", "ours"]
