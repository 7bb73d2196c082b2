"""The fresh-code benchmark's tables (``benchmarks.fresh_tables``): every configuration's
figures come from its own rows, and the llama.vim anchor's latency from the cursors it asked
at."""

from __future__ import annotations

from benchmarks.fresh_tables import anchor_note, groups_table, kinds_table, score, stats


def _row(config: str, shown: str | None, truth: str, seconds: float = 1.0, *,
         new_place: bool = True, cid: str = "a", **extra) -> dict:
    return {"id": cid, "corpus": "fresh", "project": "p", "kind": "inside_line",
            "text": "code", "config": config, "truth": truth, "shown": shown,
            "seconds": seconds, "latency_is_new_place": new_place, "stop": "eos",
            "unparsable": False, **score(shown, truth), **extra}


def _cells(table: str, config: str) -> list[str]:
    line = next(x for x in table.splitlines() if f"| {config} |" in x)  # the first
    return [c.strip() for c in line.strip("|").split("|")]


def test_accepted_chars_are_each_configurations_own() -> None:
    rows = [_row("shipped", "value)", "value)", cid="a"),
            _row("shipped", "x", "items", cid="b"),
            _row("llama_vim", "val", "value)", cid="a", requested=True),
            _row("llama_vim", "item", "items", cid="b", requested=True)]
    table = kinds_table(rows, ["fresh"], ["shipped", "llama_vim"])
    # accepted chars (share): shipped keeps 6 and 0 characters, llama_vim 3 and 4
    assert _cells(table, "shipped")[7] == "3.0 (50%)"
    assert _cells(table, "llama_vim")[7] == "3.5 (65%)"
    assert _cells(groups_table(rows, ["fresh"], ["shipped", "llama_vim"]), "llama_vim")[6] \
        == "3.5 (65%)"


def test_anchor_latency_is_over_the_cursors_it_asked_at() -> None:
    rows = [_row("llama_vim", "v", "value", 2.0, cid="a", requested=True),
            _row("llama_vim", None, "value", 0.0, new_place=False, cid="b", requested=False),
            _row("llama_vim", "w", "value", 4.0, cid="c", requested=True)]
    s = stats(rows)
    assert s["not_asked"] == 1 and s["p50_s"] == 3.0 and s["none"] == 1 / 3
    unasked = stats(rows[1:2])
    assert _cells(kinds_table(rows[1:2], ["fresh"], ["llama_vim"]), "llama_vim")[9] \
        == "(not asked)"
    assert unasked["cursors"] == 1
    cached = [_row("no_right_stop", "v", "value", new_place=False)]
    assert _cells(kinds_table(cached, ["fresh"], ["no_right_stop"]), "no_right_stop")[9] \
        == "(prompt cached)"


def test_anchor_note_says_how_often_it_asked_and_with_which_limits() -> None:
    rows = [_row("llama_vim", "v", "value", cid="a", requested=True, truncated=True),
            _row("llama_vim", None, "value", cid="b", requested=False)]
    settings = {"time_limits": True, "t_max_predict_ms": 250, "auto_fim": True,
                "max_line_suffix": 8, "server": {"threads": 2, "context": 8192,
                                                 "batch": 1024, "cache_reuse": 256}}
    note = anchor_note(rows, settings)
    assert "asked at 1 of 2 cursors" in note and "250 ms" in note and "2 threads" in note
    assert "1 answers with the context truncated" in note
    assert "time limits lifted" in anchor_note(rows, {**settings, "time_limits": False})
