"""Ctrl-C on the seam command line: a clean exit that keeps every finished answer.

These tests must not race the wall clock (CI may share the cores with other work): the signal
is sent only once the command is inside its work, seen from what it has written (finished
rows, finished records), and the work is made far longer than any plausible wait for that
(tens of thousands of rows, thousands of cases: minutes of work even on a free machine), so
it cannot end before the signal arrives however busy the machine. The timeouts below only
stop a hung run; nothing is asserted about how long anything takes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

RANDOM = ["--model", "random:santacoder", "--device", "cpu", "--dtype", "fp32", "--quiet"]
ROOT = Path(__file__).resolve().parents[2]
HANG_S = 600  # a stuck run, not a slow one

pytestmark = pytest.mark.timeout(3 * HANG_S)


def _interrupt_once(cmd: list[str], ready: Callable[[], bool]) -> tuple[int, str]:
    """Start ``cmd``, send SIGINT once ``ready()`` holds, return (exit code, stderr)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    # Ctrl-C's default, even when this run inherited SIGINT ignored (a shell's background
    # job does): a child started with it ignored keeps ignoring it, as it should.
    proc = subprocess.Popen([sys.executable, "-m", "fim", *cmd], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + HANG_S
        while not ready():
            if proc.poll() is not None:
                pytest.fail(f"finished before it could be interrupted: {proc.communicate()}")
            if time.monotonic() > deadline:
                pytest.fail("never became ready to interrupt")
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=HANG_S)
        return proc.returncode, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except FileNotFoundError:
        return []


def _pending_rows(out: Path) -> int:
    """Rows written so far: they go to ``.OUT.XXXX.part`` beside OUT until the batch ends."""
    return sum(len(_lines(p)) for p in out.parent.glob(f".{out.name}.*.part"))


def test_ctrl_c_during_a_batch_keeps_the_finished_rows(tmp_path):
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    rows = [{"id": i, "prefix": f"def f{i}(x):\n    return ", "suffix": "\n"}
            for i in range(20_000)]
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, err = _interrupt_once(
        ["complete", "--jsonl", str(inp), "--out", str(out), *RANDOM, "--max-tokens", "16"],
        ready=lambda: _pending_rows(out) >= 2)
    assert code == 130
    assert "seam: interrupted" in err and "Traceback" not in err
    done = [json.loads(line) for line in _lines(out)]  # every row whole: no torn last line
    assert 2 <= len(done) < len(rows)
    assert [r["id"] for r in done] == list(range(len(done)))
    assert not list(tmp_path.glob("*.part")) and not list(tmp_path.glob(".*.part"))


def test_ctrl_c_when_out_is_the_input_keeps_the_input(tmp_path):
    inp = tmp_path / "in.jsonl"
    rows = [{"id": i, "prefix": f"x{i} = ", "suffix": "\n"} for i in range(20_000)]
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = inp.read_bytes()
    code, err = _interrupt_once(
        ["complete", "--jsonl", str(inp), "--out", str(inp), *RANDOM, "--max-tokens", "16"],
        ready=lambda: _pending_rows(inp) >= 2)
    assert code == 130 and "Traceback" not in err
    assert inp.read_bytes() == before
    partial = tmp_path / "in.jsonl.partial"
    assert f"{partial}" in err
    assert len(_lines(partial)) >= 2


def test_ctrl_c_during_eval_reports_the_finished_cases(tmp_path):
    folder = tmp_path / "src"
    folder.mkdir()
    body = "".join(f"\n\ndef f{j}(path):\n    return os.path.join(path, 'x{j}')\n"
                   for j in range(60))
    for i in range(40):
        (folder / f"m{i}.py").write_text(f"import os\n{body}\nVALUE = {i}\n")
    records, report = tmp_path / "r.jsonl", tmp_path / "r.json"
    code, err = _interrupt_once(
        ["eval", "--folder", str(folder), "--cases", "2000", "--per-file", "50",
         "--max-tokens", "8", "--records", str(records), "--report", str(report), *RANDOM],
        ready=lambda: len(_lines(records)) >= 3)
    assert code == 130
    assert "interrupted" in err and "Traceback" not in err
    data = json.loads(report.read_text())
    assert data["config"]["interrupted"] is True
    assert 3 <= len(data["records"]) < 4000
    assert len(data["records"]) == len(_lines(records))
