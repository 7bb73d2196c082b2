"""The ``seam`` command line on bad input, its help, its names, and where its output lands."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fim import cli_args
from fim.cli import build_parser
from fim.cli import main as fim_main
from fim.options import DEFAULT_MODEL, SCOPES
from lsp_server.cli import main as seam_main
from lsp_server.cli import seam_parser, serve_parser
from lsp_server.settings import Settings, merge

ROOT = Path(__file__).resolve().parents[2]
RANDOM = ["--model", "random:santacoder", "--device", "cpu", "--quiet"]

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("def f(x):\n    return x\n")
    return path


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert "Traceback" not in err and "usage:" not in err, err
    return err


BAD_COMPLETE = [
    (["--time-budget-ms", "-5"], "--time-budget-ms"),
    (["--time-budget-ms", "0"], "--time-budget-ms"),
    (["--temperature", "nan"], "finite"),
    (["--temperature", "inf"], "finite"),
    (["--temperature", "-1"], "--temperature"),
    (["--max-tokens", "0"], "--max-tokens"),
    (["--top-k", "many"], "--top-k"),
    (["--left-share", "2"], "--left-share"),
    (["--context-tokens", "8"], "at least 16"),
    (["--dtype", "float8"], "unknown dtype"),
    (["--device", "tpu"], "unknown device"),
    (["--scope", "everything"], "--scope"),
    (["--model", "  "], "empty"),
]


@pytest.mark.parametrize("extra,says", BAD_COMPLETE)
def test_bad_complete_options_are_one_line_and_exit_2(source, capsys, extra, says) -> None:
    assert seam_main(["complete", f"{source}:2:12", *RANDOM, *extra]) == 2
    assert says in one_line_error(capsys)


def test_bad_paths_are_one_line_and_exit_2(tmp_path, source, capsys) -> None:
    cases = [
        (["complete", "--jsonl", str(tmp_path), *RANDOM], "is a directory"),
        (["complete", "--jsonl", str(tmp_path / "none.jsonl"), *RANDOM], "no such file"),
        (["complete", "--jsonl", str(source), "--out", str(tmp_path / "no" / "out.jsonl"),
          *RANDOM], "does not exist"),
        (["complete", "--jsonl", str(source), "--out", str(tmp_path), *RANDOM],
         "is a directory"),
        (["complete", f"{tmp_path}:1:1", *RANDOM], "is a directory"),
        (["eval", "--report", str(tmp_path / "no" / "r.json"), *RANDOM], "does not exist"),
        (["eval", "--folder", str(source), *RANDOM], "not a directory"),
        (["eval", "--cases", "0", *RANDOM], "--cases"),
        (["nonsense"], "invalid choice"),
        ([], "required"),
    ]
    for argv, says in cases:
        assert seam_main(argv) == 2, argv
        assert says in one_line_error(capsys), argv


@pytest.mark.parametrize("argv,says", [
    (["--dtype", "float8"], "unknown dtype"),
    (["--device", "gpu"], "unknown device"),
    (["--log-level", "LOUD"], "--log-level"),
    (["--max-message-mb", "0"], "--max-message-mb"),
    (["--tcp", "70000"], "port out of range"),
    (["--token-file", "/no/such/dir/token"], "does not exist"),
    (["--stdio", "--tcp", "5"], "not allowed with"),
])
def test_bad_serve_options_are_one_line_and_exit_2(capsys, argv, says) -> None:
    assert seam_main(["serve", *argv]) == 2
    assert says in one_line_error(capsys)


def test_through_the_real_entry_point(source) -> None:
    # The console script's exit code and stderr, not just main()'s return value.
    proc = subprocess.run([sys.executable, "-m", "lsp_server.cli", "complete",
                           f"{source}:2:12", "--temperature", "nan", *RANDOM],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr


def test_a_bad_batch_line_is_reported_and_the_batch_goes_on(tmp_path, capsys) -> None:
    inp = tmp_path / "in.jsonl"
    lines = [
        json.dumps({"id": "good-1", "prefix": "x = ", "suffix": "\n"}),
        json.dumps({"id": "surrogate", "prefix": "s = '\ud800'\nx = ", "suffix": "\n"}),
        "{not json",
        json.dumps(["not", "an", "object"]),
        json.dumps({"id": "no-suffix", "prefix": "x = "}),
        json.dumps({"id": "good-2", "prefix": "y = ", "suffix": "\n"}),
    ]
    inp.write_bytes("\n".join(lines).encode("utf-8") + b"\n\xff\xfe\n")
    out = tmp_path / "out.jsonl"
    code = seam_main(["complete", "--jsonl", str(inp), "--out", str(out), *RANDOM,
                      "--mode", "unconstrained", "--max-tokens", "3"])
    assert code == 2  # some lines were refused; every line still has its row
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["good-1", "surrogate", 3, 4, "no-suffix", "good-2", 7]
    assert [r["stop"] == "error" for r in rows] == [False, True, True, True, True, False, True]
    assert "lone surrogate" in rows[1]["error"]
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 5 and all(line.startswith(f"seam: {inp}:") for line in err), err


def test_batch_lines_name_the_text_left_and_right_or_by_the_older_names(tmp_path) -> None:
    from fim.cli_batch import read_jsonl

    inp = tmp_path / "in.jsonl"
    inp.write_text("\n".join(json.dumps(x) for x in (
        {"id": "new", "left": "x = ", "right": "\n"},
        {"id": "old", "prefix": "y = ", "suffix": "\n"},
        {"id": "mixed", "left": "z = ", "suffix": "\n"},
        {"id": "both", "left": "a = ", "prefix": "a = ", "right": "\n"},
        {"id": "none", "left": "b = "},
    )) + "\n")
    items = {i.id: i for i in read_jsonl(inp)}
    assert [(items[k].left, items[k].right, items[k].problem) for k in ("new", "old", "mixed")] \
        == [("x = ", "\n", None), ("y = ", "\n", None), ("z = ", "\n", None)]
    assert "both 'left' and its older name 'prefix'" in items["both"].problem
    assert items["none"].problem == "needs a string field 'right' (or 'suffix', its older name)"


def test_help_lists_every_command_and_nothing_else(capsys) -> None:
    assert seam_main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: seam"), out[:200]
    for command in ("complete", "eval", "serve"):
        assert re.search(rf"^\s+{command}\s+\S", out, re.M), (command, out)


def _option_actions(parser):
    for action in parser._actions:
        # (--help and --version say what they do; they have no default to state)
        if action.option_strings and action.dest not in ("help", "version"):
            yield action
        if hasattr(action, "choices") and isinstance(action.choices, dict):
            for sub in action.choices.values():
                yield from _option_actions(sub)


def test_every_option_says_its_default() -> None:
    parsers = [seam_parser(), serve_parser()]
    undocumented = [
        (action.option_strings[0], action.help)
        for parser in parsers for action in _option_actions(parser)
        if not action.help or "default" not in action.help.lower()]
    assert not undocumented, undocumented
    positional = [a for a in build_parser()._subparsers._group_actions[0].choices[
        "complete"]._actions if not a.option_strings]
    assert all("default" in a.help for a in positional)


@pytest.mark.parametrize("short,long", [("fp32", "float32"), ("bf16", "bfloat16"),
                                        ("fp16", "float16"), ("half", "float16"),
                                        ("float32", "float32"), ("auto", "auto")])
def test_one_dtype_vocabulary_everywhere(short, long) -> None:
    assert cli_args.dtype(short) == long
    parsed = build_parser().parse_args(["complete", "f.py:1:1", "--dtype", short])
    assert parsed.dtype == long
    assert serve_parser().parse_args(["--dtype", short]).dtype == long
    settings, problems = merge(Settings(), {"dtype": short})
    assert not problems and settings.dtype == long


def test_bundled_names_the_bundled_model_everywhere() -> None:
    assert build_parser().parse_args(["complete", "f.py:1:1", "--model", "bundled"]).model \
        == DEFAULT_MODEL
    assert serve_parser().parse_args(["--model", "bundled"]).model == DEFAULT_MODEL
    assert merge(Settings(), {"model": "bundled"})[0].model == DEFAULT_MODEL


def test_scopes_agree_with_the_engine() -> None:
    from fim.options import SCOPES as ENGINE_SCOPES

    assert tuple(SCOPES) == tuple(ENGINE_SCOPES)


def _screen(data: str) -> list[str]:
    """What a terminal shows for ``data``: carriage returns overwrite, escapes move up."""
    lines, row, col = [""], 0, 0
    for token in re.findall(r"\x1b\[\d*[A-Za-z]|\r|\n|[^\r\n\x1b]+", data):
        if token == "\n":
            row += 1
            col = 0
            if row == len(lines):
                lines.append("")
        elif token == "\r":
            col = 0
        elif token.startswith("\x1b["):
            if token.endswith("A"):
                row = max(0, row - int(token[2:-1] or 1))
        else:
            line = lines[row]
            line = line[:col].ljust(col) + token + line[col + len(token):]
            lines[row] = line
            col += len(token)
    return [line.rstrip() for line in lines]


def test_results_never_share_a_line_with_a_progress_bar(tmp_path) -> None:
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps({"id": i, "prefix": f"v{i} = ", "suffix": "\n"}) + "\n"
                           for i in range(4)))
    # stdout and stderr into one pipe, as on a terminal; progress bars drawn (no --quiet).
    proc = subprocess.run(
        [sys.executable, "-m", "lsp_server.cli", "complete", "--jsonl", str(inp),
         "--model", "random:santacoder", "--device", "cpu", "--mode", "unconstrained",
         "--max-tokens", "3"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300,
        env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stdout[-2000:]
    screen = _screen(proc.stdout.decode())
    with_rows = [line for line in screen if '"id"' in line]
    assert len(with_rows) == 4, screen
    for line in with_rows:
        assert line.startswith("{"), f"a result shares a line with a bar: {line!r}"
        json.loads(line)
    assert any("complete:" in line for line in screen)  # the bar was drawn


def test_single_completion_prints_on_its_own_line(source) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "lsp_server.cli", "complete", f"{source}:2:12", "--json",
         "--model", "random:santacoder", "--device", "cpu", "--mode", "unconstrained",
         "--max-tokens", "3"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300,
        env=dict(os.environ, PYTHONPATH=str(ROOT)))
    screen = _screen(proc.stdout.decode())
    assert "{" in screen, screen  # the JSON result begins on a line of its own
    assert fim_main is not None


def test_serve_is_the_servers_own_subcommand(capsys) -> None:
    # `fim` builds complete and eval and knows nothing of the package above it; the console
    # script's parser (lsp_server.cli) adds serve, team-server and doctor.
    assert fim_main(["serve"]) == 2
    assert "invalid choice: 'serve'" in one_line_error(capsys)
    commands = seam_parser()._subparsers._group_actions[0].choices
    assert set(commands) == {"complete", "eval", "serve", "team-server", "doctor"}
    assert set(build_parser()._subparsers._group_actions[0].choices) == {"complete", "eval"}
