"""The prompt anchors tokenize text bounded by their token budgets, not by the document
(issue 28, finding 4): a 5 MB line was tokenized on the event loop at every request
(``fit`` then ``left_start``), blocking ``seam/status`` for 7 s."""

from __future__ import annotations

from lsp_server.prompt_anchors import MAX_CHARS_PER_TOKEN, AnchorPlanner

URI = "file:///long.py"


class Counting:
    """Words as tokens, remembering how many characters each call was given."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def __call__(self, text: str) -> int:
        self.sizes.append(len(text))
        return len(text.split())


def test_a_five_megabyte_line_is_never_tokenized_whole() -> None:
    count = Counting()
    planner = AnchorPlanner(count, left_max=1000, left_first=200)
    text = "x = [" + "1, " * 1_700_000 + "]\n"  # 5.1 MB on one line
    cursor = len(text) - 2
    start = planner.left_start(URI, text, cursor)
    assert start == 0  # the line's start: the prompt builder cuts it to the window
    planner.left_start(URI, text, cursor)  # again, with the anchor found
    planner.wider(URI, text, cursor)
    planner.adopt(URI, text[:cursor], 0)
    assert max(count.sizes, default=0) <= 1000 * MAX_CHARS_PER_TOKEN


def test_short_texts_are_still_counted_exactly() -> None:
    count = Counting()
    planner = AnchorPlanner(count, left_max=400, left_first=50)
    text = "".join(f"w{i} a b c d\n" for i in range(200))
    cursor = text.index("w100 ")
    assert planner.left_start(URI, text, cursor) == text.index("w90 ")
