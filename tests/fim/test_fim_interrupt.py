"""Ctrl-C on the seam command line: a clean exit that keeps every finished answer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

RANDOM = ["--model", "random:santacoder", "--device", "cpu", "--dtype", "fp32", "--quiet"]
ROOT = Path(__file__).resolve().parents[2]


def _interrupt_once(cmd: list[str], ready, timeout: float = 120.0):
    """Start ``cmd``, send SIGINT once ``ready()`` holds, return (exit code, stderr)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "fim", *cmd], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + timeout
        while not ready():
            if proc.poll() is not None:
                pytest.fail(f"finished before it could be interrupted: {proc.communicate()}")
            if time.monotonic() > deadline:
                pytest.fail("never became ready to interrupt")
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        return proc.returncode, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_ctrl_c_during_a_batch_keeps_the_finished_rows(tmp_path):
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    rows = [{"id": i, "prefix": f"def f{i}(x):\n    return ", "suffix": "\n"} for i in range(500)]
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, err = _interrupt_once(
        ["complete", "--jsonl", str(inp), "--out", str(out), *RANDOM, "--max-tokens", "16"],
        ready=lambda: len(_lines(out)) >= 2)
    assert code == 130
    assert "seam: interrupted" in err and "Traceback" not in err
    done = [json.loads(line) for line in _lines(out)]  # every row whole: no torn last line
    assert 2 <= len(done) < len(rows)
    assert [r["id"] for r in done] == list(range(len(done)))


def test_ctrl_c_during_eval_reports_the_finished_cases(tmp_path):
    folder = tmp_path / "src"
    folder.mkdir()
    for i in range(40):
        (folder / f"m{i}.py").write_text(
            f"import os\n\n\ndef f{i}(path):\n    return os.path.join(path, 'x{i}')\n")
    records, report = tmp_path / "r.jsonl", tmp_path / "r.json"
    code, err = _interrupt_once(
        ["eval", "--folder", str(folder), "--cases", "40", "--max-tokens", "8",
         "--records", str(records), "--report", str(report), *RANDOM],
        ready=lambda: len(_lines(records)) >= 3)
    assert code == 130
    assert "interrupted" in err and "Traceback" not in err
    data = json.loads(report.read_text())
    assert data["config"]["interrupted"] is True
    assert 3 <= len(data["records"]) < 3 * 80
    assert len(data["records"]) == len(_lines(records))
