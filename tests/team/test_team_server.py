"""``seam team-server`` as a process: stopped with SIGTERM (a service manager's stop), it stops
the vLLM server it started instead of leaving it running. (Serving through it is covered by
test_vllm_server.py, whose constrained server is started by this command.)"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from tests.support.team import REPO, TEAM_PYTHON, need_team_python


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_sigterm_stops_the_vllm_server(tmp_path):
    need_team_python()
    from tests.support.tiny_qwen import write_tiny_qwen

    model = write_tiny_qwen(tmp_path / "tiny-qwen")
    proc = subprocess.Popen(
        [str(TEAM_PYTHON), "-m", "lsp_server.cli", "team-server", "--model", str(model),
         "--port", "0", "--", "--enforce-eager"],
        env=dict(os.environ, PYTHONPATH=str(REPO)), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, cwd=tmp_path)
    try:
        for _ in range(600):  # until vLLM's server process exists
            vllm = _children(proc.pid)
            if vllm:
                break
            time.sleep(0.1)
        assert vllm, "team-server started no vLLM process"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) != 0
        assert not any(_alive(pid) for pid in vllm)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
