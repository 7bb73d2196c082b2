"""The command a figures block records (``benchmarks.report.command_line``): typed from the
repository root with the interpreter that ran it, so a vLLM benchmark's block names
``.venv-team``'s python (``.venv``'s has no vLLM: the command would not run)."""

from __future__ import annotations

import sys

from benchmarks import report


def test_the_recorded_command_names_the_interpreter_that_ran(monkeypatch):
    root = report.ROOT
    monkeypatch.setattr(sys, "argv", [str(root / "benchmarks" / "bench_vllm_processor.py"),
                                      "--tokenizer", str(root / "models" / "x"), "--steps", "2"])
    monkeypatch.setattr(sys, "executable", str(root / ".venv-team" / "bin" / "python"))
    assert report.command_line() == (".venv-team/bin/python -m benchmarks.bench_vllm_processor "
                                     "--tokenizer models/x --steps 2")
    monkeypatch.setattr(sys, "executable", str(root / ".venv" / "bin" / "python"))
    assert report.command_line().startswith(".venv/bin/python -m benchmarks.")


def test_an_interpreter_outside_the_repository_is_shown_as_the_projects(monkeypatch):
    monkeypatch.setattr(sys, "executable", "/usr/bin/python3")
    assert report.interpreter() == ".venv/bin/python"
