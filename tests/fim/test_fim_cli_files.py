"""What ``seam complete`` reads and writes: only regular files of bounded size (a FIFO, a
device or a directory is one line and exit code 2, never a hang or a MemoryError), lines and
columns as the server and editors count them, and an ``--out`` file that a failed run leaves
as it was."""

from __future__ import annotations

import json
import os
import resource
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from fim.cli import UsageError, main, offset_of, read_source

ROOT = Path(__file__).resolve().parents[2]
RANDOM = ["--model", "random:santacoder", "--device", "cpu", "--dtype", "fp32", "--quiet"]
# Generous: a refusal takes well under a second, but the machine may be busy. What fails on
# a hang is this timeout, not a measured duration.
HANG_S = 60


def _limit_memory() -> None:
    # A reader without a limit must fail here, not take the machine's memory first.
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


def _seam(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fim", *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=HANG_S, preexec_fn=_limit_memory,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))


def _one_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, proc
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "fifo.py"
    os.mkfifo(path)
    return path


def test_a_fifo_source_is_refused_not_waited_on(fifo) -> None:
    assert "FIFO" in _one_line(_seam("complete", f"{fifo}:1:1", *RANDOM))


def test_a_fifo_batch_input_is_refused_not_waited_on(fifo) -> None:
    assert "not a regular file" in _one_line(_seam("complete", "--jsonl", str(fifo), *RANDOM))


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero here")
def test_an_endless_device_is_refused_not_read(tmp_path) -> None:
    assert "device" in _one_line(_seam("complete", "/dev/zero:1:1", *RANDOM))


def test_a_source_over_the_limit_is_refused_before_it_is_read(tmp_path, capsys) -> None:
    big = tmp_path / "big.py"
    with open(big, "wb") as f:  # sparse: 17 MiB on paper, no disk used
        f.truncate(17 << 20)
    assert main(["complete", f"{big}:1:1", *RANDOM]) == 2
    assert "may be at most 16,777,216 bytes" in capsys.readouterr().err


# ----- lines and columns: LSP's breaks, code points, no BOM ------------------------------

def test_a_lone_cr_breaks_lines_as_in_the_server(tmp_path) -> None:
    path = tmp_path / "lonecr.py"
    path.write_bytes(b"def f(x):\r    return x\r\rprint(f(1))\r")
    text = read_source(path)
    assert text[:offset_of(text, 2, 5)] == "def f(x):\r    "
    assert text[:offset_of(text, 4, 12)] == "def f(x):\r    return x\r\rprint(f(1))"
    assert text[:offset_of(text, 5, 1)] == text


def test_a_crlf_line_ends_before_its_break() -> None:
    text = "ab\r\ncd\r\n"
    assert offset_of(text, 1, 3) == 2  # the end of line 1 is before "\r\n", not inside it
    assert offset_of(text, 2, 1) == 4
    with pytest.raises(UsageError, match=r"outside the line \(1..3\)"):
        offset_of(text, 1, 4)


def test_a_byte_order_mark_is_not_a_column(tmp_path) -> None:
    path = tmp_path / "bom.py"
    path.write_bytes("\ufeffx = 1\n".encode())
    text = read_source(path)
    assert text[:offset_of(text, 1, 5)] == "x = "


def test_complete_on_a_lone_cr_file_answers_at_line_two(tmp_path, capsys) -> None:
    path = tmp_path / "lonecr.py"
    path.write_bytes(b"def f(x):\r    return x\r\rprint(f(1))\r")
    code = main(["complete", f"{path}:2:12", *RANDOM, "--mode", "unconstrained",
                 "--max-tokens", "2", "--json"])
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err
    assert "outside" not in captured.err
    assert "middle" in json.loads(captured.out)


# ----- --out is replaced only when there are rows for it ---------------------------------

def _batch(tmp_path: Path) -> Path:
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"id": 1, "prefix": "x = ", "suffix": "\n"}) + "\n")
    return inp


def test_out_is_intact_when_the_model_fails_to_load(tmp_path, capsys) -> None:
    inp, out = _batch(tmp_path), tmp_path / "out.jsonl"
    out.write_text("previous results\n")
    assert main(["complete", "--jsonl", str(inp), "--out", str(out),
                 "--model", "random:nonexistent", "--quiet"]) == 2
    assert "nonexistent" in capsys.readouterr().err
    assert out.read_text() == "previous results\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "out.jsonl"]


def test_out_equal_to_in_keeps_the_input_when_the_model_fails(tmp_path) -> None:
    inp = _batch(tmp_path)
    before = inp.read_bytes()
    assert main(["complete", "--jsonl", str(inp), "--out", str(inp),
                 "--model", "random:nonexistent", "--quiet"]) == 2
    assert inp.read_bytes() == before


def test_out_is_replaced_whole_and_keeps_its_permissions(tmp_path) -> None:
    inp, out = _batch(tmp_path), tmp_path / "out.jsonl"
    out.write_text("previous results\n")
    out.chmod(0o640)
    assert main(["complete", "--jsonl", str(inp), "--out", str(out), *RANDOM,
                 "--mode", "unconstrained", "--max-tokens", "2"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == [1]
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "out.jsonl"]


def test_out_through_a_link_replaces_the_file_it_names(tmp_path) -> None:
    inp, real = _batch(tmp_path), tmp_path / "real.jsonl"
    real.write_text("previous results\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    assert main(["complete", "--jsonl", str(inp), "--out", str(link), *RANDOM,
                 "--mode", "unconstrained", "--max-tokens", "2"]) == 0
    assert link.is_symlink()
    assert [json.loads(line)["id"] for line in real.read_text().splitlines()] == [1]
