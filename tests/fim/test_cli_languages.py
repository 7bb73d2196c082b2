"""``seam complete`` picks the file's language: from FILE's extension, ``--language``, or a
JSONL row's ``language`` field; a language Seam has no grammar for is completed unchecked
with a note, never refused."""

from __future__ import annotations

import json

from fim.cli import main

RANDOM = ["--model", "random:santacoder", "--device", "cpu", "--dtype", "fp32", "--quiet"]


def test_the_extension_picks_the_language(tmp_path, capsys):
    js = tmp_path / "app.js"
    js.write_text("function f(x) {\n  return x;\n}\n")
    code = main(["complete", f"{js}:2:10", *RANDOM, "--max-tokens", "4", "--json"])
    res = json.loads(capsys.readouterr().out)
    assert res["mode"] == "unchecked" and res["parses"] is None
    assert code == (0 if res["middle"] is not None else 1)
    py = tmp_path / "m.py"
    py.write_text("def f(x):\n    return x\n")
    main(["complete", f"{py}:2:12", *RANDOM, "--max-tokens", "4", "--json"])
    assert json.loads(capsys.readouterr().out)["mode"] == "exact"
    go = tmp_path / "main.go"
    go.write_text("package main\n\nfunc main() {\n\tx := 1\n\tprintln(x)\n}\n")
    main(["complete", f"{go}:4:7", *RANDOM, "--max-tokens", "4", "--json"])
    res = json.loads(capsys.readouterr().out)
    assert res["mode"] == "exact"
    assert res["parses"] is True or not res["middle"]  # Go's parser judged the file
    # --language wins over the extension
    main(["complete", f"{py}:2:12", *RANDOM, "--max-tokens", "4", "--json",
          "--language", "yaml"])
    assert json.loads(capsys.readouterr().out)["mode"] == "unchecked"


def test_a_file_with_no_grammar_gets_a_note(tmp_path, capsys):
    sh = tmp_path / "run.sh"
    sh.write_text("#!/bin/sh\necho hi\n")
    main(["complete", f"{sh}:2:6", "--model", "random:santacoder", "--device", "cpu",
          "--dtype", "fp32", "--max-tokens", "3"])
    assert "no grammar for 'shell'" in capsys.readouterr().err


def test_jsonl_rows_name_their_language(tmp_path, capsys):
    inp = tmp_path / "in.jsonl"
    rows = [{"id": "py", "left": "x = ", "right": "\n"},
            {"id": "js", "left": "let x = ", "right": ";\n", "language": "javascript"},
            {"id": "odd", "left": "a: ", "right": "\n", "language": "klingon"},
            {"id": "bad", "left": "a", "right": "b", "language": 7}]
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    assert main(["complete", "--jsonl", str(inp), "--out", str(out), *RANDOM,
                 "--max-tokens", "3"]) == 2  # the bad row is refused, the others answered
    got = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert got["py"]["mode"] == "exact" and "note" not in got["py"]
    assert got["js"]["mode"] == "unchecked" and "'javascript'" in got["js"]["note"]
    assert got["odd"]["mode"] == "unchecked" and "'klingon'" in got["odd"]["note"]
    assert got["bad"]["stop"] == "error" and "language" in got["bad"]["error"]
    assert "language" in capsys.readouterr().err
