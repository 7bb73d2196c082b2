"""The fresh-code benchmark's table of several suggestions per place: what each ranking shows
first, and whether the truth is among the suggestions, from rows made here."""

from __future__ import annotations

from benchmarks.fresh_tables import suggestions_table


def row(kind: str, truth: str, candidates: list, among: bool) -> dict:
    return {"corpus": "fresh", "kind": kind, "config": "ranked3", "truth": truth,
            "candidates": candidates, "among": among, "count": len(candidates),
            "decode_seconds": 1.0}


def cells(table: str, name: str) -> list[str]:
    line = next(x for x in table.splitlines() if f"| {name} |" in x)
    return [c.strip() for c in line.strip("|").split("|")]


def test_each_ranking_shows_its_own_first():
    rows = [
        # likelihood: "a" (-1); per token: "bcd" (-1.5 over 3 tokens and the end); greedy: "e"
        row("rest_of_line", "bcd", [["a", -1.0, 1, False], ["bcd", -1.5, 3, False],
                                    ["e", -5.0, 1, True]], True),
        # on an empty line only the first line is shown
        row("empty_line", "x = 1", [["x = 1\ny = 2", -0.5, 8, True], ["z", -3.0, 1, False]],
            True),
    ]
    table = suggestions_table(rows, ["fresh"], ["shipped", "ranked3"])
    mid = cells(table, "mid-line")
    assert mid[2:7] == ["ranked3", "1", "0% / 100% / 0%", "0.00 / 1.00 / 0.00", "100%"]
    empty = cells(table, "empty line")
    assert empty[4:6] == ["100% / 100% / 100%", "1.00 / 1.00 / 1.00"]
    assert cells(table, "all")[4] == "50% / 100% / 50%"
    assert cells(table, "all")[6] == "100%"


def test_no_table_without_ranked_rows():
    rows = [{"corpus": "fresh", "kind": "empty_line", "config": "shipped", "truth": "x"}]
    assert suggestions_table(rows, ["fresh"], ["shipped"]) == ""


def test_an_empty_middle_is_not_shown_first_by_likelihood():
    """As the engine ranks: ending at once is likeliest, but shows nothing, so the likelihood
    rankings show the middle that writes something; greedy's stays greedy's."""
    rows = [row("rest_of_line", "bcd", [["", -0.2, 1, True], ["bcd", -2.0, 3, False]], True)]
    mid = cells(suggestions_table(rows, ["fresh"], ["ranked3"]), "mid-line")
    assert mid[4] == "100% / 100% / 0%"
