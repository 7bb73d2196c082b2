"""benchmarks/paired_compare.py: runs grouped by commit, latencies paired cursor by cursor."""

from __future__ import annotations

import json

import pytest

from benchmarks.paired_compare import main


def _run(path, commit, seconds, shown=None):
    rows = [{"id": f"f.py:{i}:empty_line", "config": "seam", "client": "plain",
             "seconds": s, "shown": (shown or {}).get(i, "x")} for i, s in enumerate(seconds)]
    path.write_text(json.dumps({"run": {"commit": commit, "started": "2026-11-29 06:49 UTC",
                                        "load_before": [0.5, 0.5, 0.5]}, "rows": rows}))
    return str(path)


def test_the_ratio_pairs_cursors_and_averages_each_commits_runs(tmp_path, capsys):
    """Cursor 0: new 1.0 and 3.0 (mean 2.0) over old 1.0 and 1.0: 2.0; cursor 1: 1.0 over
    2.0: 0.5; cursor 2: 1.0 over 1.0.  A script that compared run medians, or the first run
    of each commit only, or divided the other way, gives other numbers."""
    runs = [_run(tmp_path / "1.json", "new000", [1.0, 1.0, 1.0]),
            _run(tmp_path / "2.json", "old000", [1.0, 2.0, 1.0]),
            _run(tmp_path / "3.json", "old000", [1.0, 2.0, 1.0]),
            _run(tmp_path / "4.json", "new000", [3.0, 1.0, 1.0], shown={2: "y"})]
    assert main(runs + ["--baseline", "old"]) == 0
    out = capsys.readouterr().out
    assert "`new000`'s mean latency over `old000`'s (n = 3): median 1.000, mean 1.167" in out
    assert "the same suggestion in every run at 2 of 3 cursors" in out
    assert "| 4 | `new000` |" in out and "| 1.00 s | 1.67 s |" in out


def test_without_a_baseline_the_first_runs_commit_divides(tmp_path, capsys):
    runs = [_run(tmp_path / "1.json", "aaa", [2.0]), _run(tmp_path / "2.json", "bbb", [1.0])]
    main(runs)
    assert "`bbb`'s mean latency over `aaa`'s (n = 1): median 0.500" in capsys.readouterr().out


def test_runs_of_other_than_two_commits_are_refused(tmp_path):
    runs = [_run(tmp_path / f"{c}.json", c, [1.0]) for c in ("a", "b", "c")]
    with pytest.raises(SystemExit, match="two commits"):
        main(runs)
    with pytest.raises(SystemExit, match="baseline"):
        main(runs[:2] + ["--baseline", "z"])


def test_a_file_that_is_no_paired_run_or_runs_without_a_common_cursor_end_in_one_line(
        tmp_path):
    """A missing file, one that is not JSON and one without rows each end with one line
    naming the file (not a traceback); two runs at different cursors share nothing to pair."""
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    rowless = tmp_path / "rowless.json"
    rowless.write_text('{"run": {}}')
    good = _run(tmp_path / "1.json", "aaa", [1.0])
    for path in (tmp_path / "missing.json", bad, rowless):
        with pytest.raises(SystemExit, match=f"{path.name}: not a paired_run.py JSON file"):
            main([good, str(path)])
    other = tmp_path / "2.json"
    other.write_text(json.dumps({"run": {"commit": "bbb", "started": "", "load_before": None},
                                 "rows": [{"id": "g.py:1:empty_line", "config": "seam",
                                           "client": "plain", "seconds": 1.0, "shown": ""}]}))
    with pytest.raises(SystemExit, match="share no cursor"):
        main([good, str(other)])


def test_requests_that_found_their_prompt_read_are_counted_per_commit(tmp_path, capsys):
    """Only requests with a prompt count (an early answer has no record); a prompt counts as
    read when all of it came from the cache, not part of it."""
    def run(path, commit, servers):
        rows = [{"id": f"f.py:{i}:empty_line", "config": "seam", "client": "plain",
                 "seconds": 1.0, "shown": "x", "server": s} for i, s in enumerate(servers)]
        path.write_text(json.dumps({"run": {"commit": commit, "started": "",
                                            "load_before": None}, "rows": rows}))
        return str(path)

    old = run(tmp_path / "1.json", "old000", [{"prompt_tokens": 180, "cached_tokens": 1},
                                              {"prompt_tokens": 180, "cached_tokens": 180},
                                              {}])
    new = run(tmp_path / "2.json", "new000", [{"prompt_tokens": 180, "cached_tokens": 180},
                                              {"prompt_tokens": 180, "cached_tokens": 179},
                                              {"prompt_tokens": None}])
    main([old, new])
    assert "already read (over all runs of each commit): `old000` 1 of 2, `new000` 1 of 2." \
        in capsys.readouterr().out
