"""Issue 29's paired run without a model: the stored llama.vim rows and their keys, the greedy
anchor's request, the paired comparisons and the Done-when verdicts."""

from __future__ import annotations

from pathlib import Path

from benchmarks.cursor_kinds import Place
from benchmarks.held_out import HeldOut
from benchmarks.llama_vim import LlamaVimSettings, local_context, request_body
from benchmarks.paired_anchors import ANCHORS, AnchorStore, interleave, key
from benchmarks.paired_tables import done_when, paired, summary


def _cursor(place=Place.INSIDE_WORD) -> HeldOut:
    src = "def f():\n    return value\n"
    return HeldOut(f"proj/m.py:2:{place}", "fresh2", "proj", Path("m.py"), place, src, 15,
                   20, 1)


def test_greedy_anchor_asks_for_the_most_likely_token():
    text = "def f():\n    return \n"
    ctx = local_context(text, 20, LlamaVimSettings())
    assert request_body(ctx, [], LlamaVimSettings())["top_k"] == 40
    greedy = ANCHORS["llama_vim_greedy"]
    body = request_body(ctx, [], greedy)
    assert body["top_k"] == 1 and (body["t_max_prompt_ms"], body["t_max_predict_ms"]) == (0, 0)
    assert not greedy.auto and ANCHORS["llama_vim"].auto


def test_anchor_rows_are_kept_under_their_key(tmp_path):
    cur = _cursor()
    k = key(cur, "llama_vim", "build a", 0, 3)
    # Another server build, settings, seed or set of open documents is another row.
    assert len({k, key(cur, "llama_vim", "build b", 0, 3), key(cur, "llama_vim_greedy",
                "build a", 0, 3), key(cur, "llama_vim", "build a", 1, 3),
                key(cur, "llama_vim", "build a", 0, 2)}) == 5
    store = AnchorStore(tmp_path / "rows.jsonl")
    assert store.get(k) is None
    store.put(k, {"shown": "x", "truth": cur.truth})
    again = AnchorStore(tmp_path / "rows.jsonl")  # read back by a later run
    assert again.get(k, cur.truth) == {"shown": "x", "truth": cur.truth}
    assert again.get(key(cur, "llama_vim", "b", 0, 3)) is None
    # The same line and place with another span held out is another cursor.
    assert again.get(k, cur.truth + "x") is None


def test_interleave_takes_the_lists_in_turn():
    assert interleave([[1, 2, 3], ["a"], [10, 20]]) == [1, "a", 10, 2, 20, 3]
    assert interleave([]) == []


def _row(cid, config, client, place, exact, sim, seconds=1.0, unparsable=False):
    return {"id": cid, "corpus": "fresh2", "config": config, "client": client,
            "place": place, "exact": exact, "edit_similarity": sim, "seconds": seconds,
            "unparsable": unparsable}


def test_comparisons_are_paired_on_the_cursors_both_have():
    rows = [_row("a", "seam", "plain", "inside_word", True, 1.0),
            _row("b", "seam", "plain", "inside_word", False, 0.5),
            _row("a", "llama_vim_greedy", "llama.vim", "inside_word", False, 0.2)]
    s, o = paired(rows, "fresh2", ("seam", "plain"), ("llama_vim_greedy", "llama.vim"),
                  "inside_word")
    assert (s["n"], s["exact"], s["sim"]) == (1, 1.0, 1.0) and o["sim"] == 0.2
    mid = summary([r for r in rows if r["config"] == "seam"])
    assert mid["n"] == 2 and mid["exact"] == 0.5 and mid["p50"] == 1.0


def _verdicts(rows):
    return {line.split(" (n=")[0].split(": **")[0]: line.rsplit("**", 2)[1]
            for line in done_when(rows, "fresh2", "plain")}


def test_done_when_inside_a_word_needs_strictly_better_edit_similarity():
    tie = [_row("a", "seam", "plain", "inside_word", True, 0.9),
           _row("a", "seam_unconstrained", "plain", "inside_word", True, 0.9)]
    got = _verdicts(tie)
    strict = [k for k in got if "strictly" in k and "inside a word" in k]
    assert strict and got[strict[0]] == "NOT met"
    better = [tie[0], _row("a", "seam_unconstrained", "plain", "inside_word", True, 0.8)]
    assert _verdicts(better)[strict[0]] == "met"
    # A group no row falls in is said to be so, not counted as met.
    assert any(v == "no rows" for k, v in got.items() if "empty line" in k)


def test_done_when_floors_latency_and_unparsable():
    rows = [_row(str(i), "seam", "plain", "before_nothing", i < 2, 0.8, seconds=1.0 + i)
            for i in range(4)]
    got = _verdicts(rows)
    floor = next(k for k in got if k.startswith("- mid-line (all) ≥"))
    assert got[floor] == "met"  # 50% exact, 0.8 edit similarity
    p50 = next(k for k in got if "p50" in k)
    assert got[p50] == "NOT met"  # median of 1, 2, 3, 4 s
    assert got[next(k for k in got if "unparsable" in k)] == "met"
    rows[0]["unparsable"] = True
    got = _verdicts(rows)
    assert got[next(k for k in got if "unparsable" in k)] == "NOT met"


def test_the_same_window_check_leaves_out_cursors_whose_prompts_differ():
    """Seam lost ``a`` on a shorter prompt than ``constrained: false`` ran: the check beside
    the Done-when lines leaves it out; ``b`` (same prompt) and ``c`` (an early answer, no
    record) stay."""
    from benchmarks.paired_tables import same_window

    def row(cid, config, exact, prompt):
        out = _row(cid, config, "plain", "inside_word", exact, 1.0 if exact else 0.5)
        out["server"] = {"prompt_tokens": prompt}
        return out

    rows = [row("a", "seam", False, 187), row("a", "seam_unconstrained", True, 253),
            row("b", "seam", True, 190), row("b", "seam_unconstrained", False, 190),
            row("c", "seam", True, None), row("c", "seam_unconstrained", True, None)]
    lines = same_window(rows, "fresh2", "plain")
    assert "1 of 3" in lines[0]
    inside = next(line for line in lines if line.startswith("- inside a word"))
    assert "(n=2)" in inside and "**met**" in inside
    # Rows without server records (older runs): no check.
    assert same_window([{**r, "server": {}} for r in rows], "fresh2", "plain") == []
