"""The per-document prompt starts (``lsp_server.prompt_anchors``), with one token per word."""

from __future__ import annotations

from lsp_server.prompt_anchors import AnchorPlanner

# 200 lines of five words: a "token" is a word here.
TEXT = "".join(f"w{i} a b c d\n" for i in range(200))
URI = "file:///m.py"


def words(text: str) -> int:
    return len(text.split())


def line_start(n: int) -> int:
    return TEXT.index(f"w{n} ")


def planner(left_max: int = 400, left_first: int = 50) -> AnchorPlanner:
    return AnchorPlanner(words, left_max, left_first)


def test_a_new_anchor_sits_left_first_tokens_above_the_cursor() -> None:
    p = planner()
    start = p.left_start(URI, TEXT, line_start(100))
    assert start == line_start(90)  # ten lines of five words
    assert words(TEXT[start:line_start(100)]) == 50


def test_moving_down_a_little_or_typing_keeps_the_anchor() -> None:
    p = planner()
    start = p.left_start(URI, TEXT, line_start(100))
    assert p.left_start(URI, TEXT, line_start(100) + 3) == start
    assert p.left_start(URI, TEXT, line_start(105)) == start  # 25 tokens past its reach
    assert p.left_start(URI, TEXT, line_start(95)) == start  # back up: all of it cached


def test_a_jump_further_than_a_fresh_start_moves_the_anchor() -> None:
    # Running the 60 lines between would cost more than the 50 tokens of a new start.
    p = planner()
    p.left_start(URI, TEXT, line_start(100))
    assert p.left_start(URI, TEXT, line_start(160)) == line_start(150)


def test_steps_within_left_first_walk_the_reach_down_until_left_max() -> None:
    p = planner(left_max=200)
    start = p.left_start(URI, TEXT, line_start(100))
    for n in range(105, 131, 5):
        assert p.left_start(URI, TEXT, line_start(n)) == start
    # 40 lines (200 tokens) from the anchor is the most a prompt holds.
    assert p.left_start(URI, TEXT, line_start(135)) == line_start(125)


def test_an_edit_above_the_anchor_does_not_lose_it() -> None:
    p = planner()
    start = p.left_start(URI, TEXT, line_start(100))
    edited = "new line above\n" + TEXT
    shift = len("new line above\n")
    assert p.left_start(URI, edited, line_start(100) + shift) == start + shift


def test_a_cursor_above_the_anchor_gets_a_new_one() -> None:
    p = planner()
    p.left_start(URI, TEXT, line_start(100))
    assert p.left_start(URI, TEXT, line_start(40)) == line_start(30)


def test_a_wider_start_is_offered_then_adopted() -> None:
    p = planner(left_max=100)
    cursor = line_start(100)
    start = p.left_start(URI, TEXT, cursor)
    wider = p.wider(URI, TEXT[:cursor], cursor)
    # left_max less a quarter above: room for the cursor to move down and keep it
    assert wider == line_start(85) and wider < start
    p.adopt(URI, TEXT[:cursor], wider)
    assert p.left_start(URI, TEXT, cursor) == wider
    assert p.wider(URI, TEXT[:cursor], cursor) is None  # nothing wider left to warm


def test_a_full_window_slides_down_on_an_engine_that_moves_cached_cells() -> None:
    # A widened window (lines 60-100, 200 tokens: full) and the cursor five lines further.
    for slides, want in ((True, line_start(75)), (False, line_start(95))):
        p = AnchorPlanner(words, 200, 50, slides=slides)
        p.left_start(URI, TEXT, line_start(100))
        p.adopt(URI, TEXT[:line_start(100)], line_start(60))
        # Sliding: a quarter of left_max below full (150 tokens); else a narrow new start.
        assert p.left_start(URI, TEXT, line_start(105)) == want
    # The slid window is wide already: no widening is worth a whole prompt's run.
    assert p.wider(URI, TEXT, line_start(105)) is not None  # (the one that does not slide)
    slid = AnchorPlanner(words, 200, 50, slides=True)
    slid.left_start(URI, TEXT, line_start(100))
    slid.adopt(URI, TEXT[:line_start(100)], line_start(60))
    assert slid.left_start(URI, TEXT, line_start(105)) == line_start(75)
    assert slid.wider(URI, TEXT, line_start(105)) is None
    # Moving on within the slack keeps the slid start; a jump past the reach by more than
    # left_first would run all of that anyway: a narrow new start.
    assert slid.left_start(URI, TEXT, line_start(110)) == line_start(75)
    assert slid.left_start(URI, TEXT, line_start(140)) == line_start(130)


def test_a_narrow_window_does_not_slide_it_widens() -> None:
    p = AnchorPlanner(words, 200, 50, slides=True)
    start = p.left_start(URI, TEXT, line_start(100))
    assert p.wider(URI, TEXT, line_start(100)) == line_start(70) < start



def test_the_next_widening_keeps_the_last_start_while_it_holds_half_to_all_of_left_max() -> None:
    # An interrupted widening leaves its run in the cache: the next one starts where it did
    # while the cursor's text from there holds 100 to 200 tokens (the old rule placed each
    # one left_max above its cursor, a line lower for every line down, so each idle gap's
    # work was lost).
    p = planner(left_max=200, left_first=50)
    p.left_start(URI, TEXT, line_start(100))
    first = p.wider(URI, TEXT, line_start(100))
    assert first == line_start(70)  # 150 tokens: a quarter of left_max to move down in
    for n in (101, 105, 110, 95, 90):  # down to full, back up to half
        p.left_start(URI, TEXT, line_start(n))
        assert p.wider(URI, TEXT, line_start(n)) == first, n
    edited = "new line above\n" + TEXT  # an edit above it does not lose it
    shift = len("new line above\n")
    assert p.wider(URI, edited, line_start(105) + shift) == first + shift
    # Past full, or under half: a new start, kept in its turn.
    assert p.wider(URI, TEXT, line_start(111)) == line_start(81)
    assert p.wider(URI, TEXT, line_start(115)) == line_start(81)
    assert p.wider(URI, TEXT, line_start(95)) == line_start(65)
    # Once one is adopted, the next is placed afresh; forgetting a document forgets it.
    p.adopt(URI, TEXT[:line_start(95)], line_start(65))
    assert p.wider(URI, TEXT, line_start(95)) is None
    q = planner(left_max=200, left_first=50)
    q.left_start(URI, TEXT, line_start(100))
    assert q.wider(URI, TEXT, line_start(100)) == line_start(70)
    q.forget(URI)
    q.left_start(URI, TEXT, line_start(105))
    assert q.wider(URI, TEXT, line_start(105)) == line_start(75)


# ----- the held base (the document's window beyond the cursor) -----------------------------------


def test_a_base_ends_at_the_last_line_that_fits_left_max_less_the_margin() -> None:
    p = planner(left_max=116)  # 100 words after BASE_MARGIN's 16
    start = line_start(40)
    end = p.base_end(TEXT, start)
    assert end == line_start(60)  # twenty whole lines of five words
    assert p.base_end(TEXT, line_start(190)) == len(TEXT)  # the file ends first
    tiny = AnchorPlanner(words, 20, 10)  # 4 words after the margin
    assert tiny.base_end("one two three four five six seven", 0) == 0  # not one line fits


def test_a_cursor_anywhere_in_the_held_base_keeps_its_start() -> None:
    p = planner()
    start = p.left_start(URI, TEXT, line_start(100))
    p.adopt(URI, TEXT[:line_start(100)], start)
    p.hold(URI, TEXT, start, line_start(150))
    # 40 lines (200 tokens) below the reach: without the base a new anchor (the test above).
    assert p.left_start(URI, TEXT, line_start(140)) == start
    assert p.left_start(URI, TEXT, line_start(92)) == start  # and back up


def test_a_base_is_not_used_where_its_text_changed_or_beyond_its_end() -> None:
    p = planner()
    start = p.left_start(URI, TEXT, line_start(100))
    p.adopt(URI, TEXT[:line_start(100)], start)
    p.hold(URI, TEXT, start, line_start(150))
    # An edit between the start and the cursor: the cache no longer holds that text.
    edited = TEXT.replace("w120 a", "w120 z", 1)
    assert p.left_start(URI, edited, edited.index("w140 ")) > start
    p.adopt(URI, TEXT[:line_start(100)], start)
    p.hold(URI, TEXT, start, line_start(150))
    assert p.left_start(URI, TEXT, line_start(170)) > start  # below its end
    q = planner()
    start = q.left_start(URI, TEXT, line_start(100))
    q.adopt(URI, TEXT[:line_start(100)], start)
    q.hold("file:///other.py", TEXT, start, line_start(150))  # another document's
    assert q.left_start(URI, TEXT, line_start(140)) > start


def test_forgetting_the_document_drops_its_base() -> None:
    p = planner()
    p.hold(URI, TEXT, 0, line_start(50))
    p.forget(URI)
    assert p.base is None
