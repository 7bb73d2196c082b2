"""The seam command line with the random model: positions, batches, bad input, eval."""

from __future__ import annotations

import json

import pytest

from fim.cli import main, offset_of


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("def f(x):\n    return x\n\nprint(f(1))\n")
    return path


RANDOM = ["--model", "random:santacoder", "--device", "cpu", "--dtype", "fp32", "--quiet"]


def test_offsets():
    text = "ab\ncd\n"
    assert offset_of(text, 1, 1) == 0
    assert offset_of(text, 2, 3) == 5
    assert offset_of(text, 3, 1) == 6


@pytest.mark.parametrize("pos,message", [
    ("9:1", "line 9 is outside the file"),
    ("1:40", "column 40 is outside the line"),
    ("0:1", "line 0 is outside"),
    ("x:1", "must be integers"),
])
def test_position_outside_the_file(source, capsys, pos, message):
    assert main(["complete", f"{source}:{pos}", *RANDOM]) == 2
    assert message in capsys.readouterr().err


def test_bad_files(tmp_path, capsys):
    latin = tmp_path / "latin.py"
    latin.write_bytes(b"s = '\xe9'\n")
    assert main(["complete", f"{latin}:1:1", *RANDOM]) == 2
    assert "not UTF-8" in capsys.readouterr().err
    empty = tmp_path / "empty.py"
    empty.write_text("")
    assert main(["complete", f"{empty}:1:1", *RANDOM]) == 2
    assert "empty" in capsys.readouterr().err
    assert main(["complete", f"{tmp_path / 'none.py'}:1:1", *RANDOM]) == 2
    assert "no such file" in capsys.readouterr().err


def test_bad_model_and_options(source, capsys):
    assert main(["complete", f"{source}:2:12", "--model", "nonsense", "--quiet"]) == 2
    assert "accepted forms" in capsys.readouterr().err
    assert main(["complete", f"{source}:2:12", *RANDOM, "--max-tokens", "0"]) == 2
    assert main(["complete", *RANDOM]) == 2
    assert "FILE:LINE:COL or --jsonl" in capsys.readouterr().err


def test_prompt_longer_than_the_window(source, capsys):
    # The random model's window is 1024 tokens: 2000 new tokens cannot fit.
    assert main(["complete", f"{source}:2:12", *RANDOM, "--mode", "unconstrained",
                 "--max-tokens", "2000"]) == 2
    assert "lower --max-tokens" in capsys.readouterr().err


def test_complete_unconstrained_prints_the_middle(source, capsys):
    code = main(["complete", f"{source}:2:13", *RANDOM, "--mode", "unconstrained",
                 "--max-tokens", "3", "--json"])
    assert code == 0
    res = json.loads(capsys.readouterr().out)
    assert res["decoding"] == "unconstrained" and res["tokens"] <= 3


def test_complete_jsonl(tmp_path, capsys):
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"id": "a", "prefix": "x = ", "suffix": "\n"}) + "\n"
                   + json.dumps({"id": "b", "prefix": "def f(", "suffix": "):\n    pass\n"})
                   + "\n")
    out = tmp_path / "out.jsonl"
    assert main(["complete", "--jsonl", str(inp), "--out", str(out), *RANDOM,
                 "--mode", "checked", "--max-tokens", "4"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["a", "b"]
    for r in rows:
        assert set(r) >= {"middle", "stop", "tokens", "setup_ms", "model_ms", "constraint_ms",
                          "mode"}
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1}\n')
    assert main(["complete", "--jsonl", str(bad), *RANDOM]) == 2
    assert "prefix" in capsys.readouterr().err


def test_complete_constrained_parses(source, capsys):
    code = main(["complete", f"{source}:2:13", *RANDOM, "--max-tokens", "6", "--json"])
    res = json.loads(capsys.readouterr().out)
    assert res["decoding"] == "constrained"
    if res["middle"] is not None:
        assert code == 0 and res["parses"] is True
    else:
        assert code == 1


def test_eval_end_to_end(tmp_path, capsys):
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "a.py").write_text("import os\n\n\ndef f(x):\n    return os.path.join(x, 'y')\n")
    (folder / "b.py").write_text("values = [1, 2, 3]\nprint(sum(values))\n")
    report = tmp_path / "r.json"
    records = tmp_path / "r.jsonl"
    args = ["eval", "--folder", str(folder), "--cases", "2", "--max-tokens", "4",
            "--report", str(report), "--records", str(records), *RANDOM]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "Stack-Boundary" in out and "Checked Unconstrained" in out
    data = json.loads(report.read_text())
    assert set(data["summary"]) == {"boundary", "randspan"}
    n_records = len(records.read_text().splitlines())
    assert n_records == len(data["records"]) == 3 * sum(
        s["cases"] for s in data["summary"].values())
    # A second run resumes from the records and computes nothing new.
    assert main(args) == 0
    assert len(records.read_text().splitlines()) == n_records
    # --report-only summarises the records without a model.
    only = tmp_path / "only.json"
    assert main(["eval", "--folder", str(folder), "--cases", "2", "--report-only",
                 "--records", str(records), "--report", str(only), "--quiet"]) == 0
    assert json.loads(only.read_text())["summary"] == data["summary"]
