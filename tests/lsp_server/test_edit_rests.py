"""A plain client's edits taken as the cursor's resting place (``lsp_server.edit_rests``): where
the rest is, which later event replaces or stops it, and that a client sending its own cursor
is never second-guessed. The timers are a fake run by hand, so nothing races a clock."""

from __future__ import annotations

from lsprotocol import types

from lsp_server.documents import Document
from lsp_server.edit_rests import AT_ONCE_S, EDIT_REST_S, EditRests, edit_end, is_keystroke
from lsp_server.messages import CursorMessage

URI = "file:///w/a.py"


class FakeTimers:
    """``call_later`` kept in a list; ``fire`` runs the ones not cancelled."""

    def __init__(self) -> None:
        self.armed: list[list] = []  # [delay, callback, cancelled]

    def later(self, delay, callback):
        entry = [delay, callback, False]
        self.armed.append(entry)

        class Handle:
            def cancel(self) -> None:
                entry[2] = True
        return Handle()

    def fire(self) -> None:
        due, self.armed = self.armed, []
        for _, callback, cancelled in due:
            if not cancelled:
                callback()


def partial(sl: int, sc: int, el: int, ec: int, text: str
            ) -> types.TextDocumentContentChangePartial:
    return types.TextDocumentContentChangePartial(
        range=types.Range(start=types.Position(line=sl, character=sc),
                          end=types.Position(line=el, character=ec)), text=text)


def changed(text: str, *changes, encoding=types.PositionEncodingKind.Utf16) -> Document:
    doc = Document(URI, text, 1, "python", encoding)
    doc.apply_changes(list(changes))
    return doc


def rests() -> tuple[EditRests, FakeTimers, list[CursorMessage]]:
    timers, seen = FakeTimers(), []
    return EditRests(seen.append, later=timers.later), timers, seen


def test_the_rest_is_at_the_end_of_what_the_last_change_put_in():
    one = partial(1, 4, 1, 4, "x = [\n        1,\n    ]")
    doc = changed("def f():\n    \n", one)
    assert doc.text == "def f():\n    x = [\n        1,\n    ]\n"
    assert edit_end(doc, [one]) == types.Position(line=3, character=5)
    # A deletion rests where it began; a backwards range is applied from its earlier end.
    gone = partial(0, 8, 0, 4, "")
    assert edit_end(changed("def fgh():\n", gone), [gone]) == types.Position(line=0, character=4)
    # Several changes apply in order: the last one's end, in the final text's coordinates.
    two = [partial(0, 0, 0, 0, "# a\n"), partial(1, 7, 1, 7, "x")]
    assert edit_end(changed("def f(): pass\n", *two), two) == types.Position(line=1, character=8)
    # Columns are in the client's encoding: the emoji is two UTF-16 units.
    emoji = partial(0, 5, 0, 5, "😋'")
    assert edit_end(changed("s = '\n", emoji), [emoji]) == types.Position(line=0, character=8)
    whole = types.TextDocumentContentChangeWholeDocument(text="x = 1\n")
    assert edit_end(changed("y\n", whole), [whole]) is None
    assert edit_end(changed("y\n"), []) is None


def test_an_edit_rests_after_the_debounce_and_a_later_edit_replaces_it():
    er, timers, seen = rests()
    first = partial(0, 0, 0, 0, "i")
    er.edited(changed("\n", first), [first])
    assert [t[0] for t in timers.armed] == [EDIT_REST_S] and not seen
    second = partial(1, 0, 1, 0, "os.pa")
    er.edited(changed("import os\n\n", second), [second])
    timers.fire()
    assert seen == [CursorMessage(URI, 1, 5)]
    assert er.pending() == 0


KEYSTROKES = {
    "a typed character": partial(2, 4, 2, 4, "x"),
    "an emoji (two UTF-16 units, one character)": partial(2, 4, 2, 4, "😋"),
    "backspace": partial(2, 3, 2, 4, ""),
    "backspace over an emoji": partial(2, 2, 2, 4, ""),
    "backspace at a line start": partial(1, 9, 2, 0, ""),
    "a range sent backwards": partial(2, 4, 2, 3, ""),
    "enter with indentation": partial(2, 4, 2, 4, "\n        "),
    "tab": partial(2, 4, 2, 4, "    "),
    "an auto-closed pair": partial(2, 4, 2, 4, "()"),
    "a character typed over one": partial(2, 4, 2, 5, ")"),
}
NOT_KEYSTROKES = {
    "a cut on one line": partial(2, 4, 2, 20, ""),
    "a cut over lines": partial(1, 4, 3, 0, ""),
    "a whole line deleted": partial(2, 0, 3, 0, ""),
    "a paste": partial(2, 4, 2, 4, "os.getcwd()"),
    "an accepted suggestion over a selection": partial(2, 4, 2, 6, "return x"),
    "a whole document": types.TextDocumentContentChangeWholeDocument(text="x = 1\n"),
}


def test_what_one_key_press_sends_is_told_from_cuts_pastes_and_undos():
    for what, change in KEYSTROKES.items():
        assert is_keystroke([change]), what
    for what, change in NOT_KEYSTROKES.items():
        assert not is_keystroke([change]), what
    # Several cursors typing at once are typing; one of them pasting is not.
    assert is_keystroke([KEYSTROKES["a typed character"], partial(5, 4, 5, 4, "x")])
    assert not is_keystroke([KEYSTROKES["a typed character"], NOT_KEYSTROKES["a paste"]])
    assert not is_keystroke([])


def test_a_cut_or_a_paste_rests_at_once_and_a_keystroke_after_the_debounce():
    text = "def f(x):\n    y = 1\n    return os.path.join(x, y)\n"
    for change, delay in ((KEYSTROKES["backspace"], EDIT_REST_S),
                          (NOT_KEYSTROKES["a cut on one line"], AT_ONCE_S),
                          (NOT_KEYSTROKES["a paste"], AT_ONCE_S)):
        er, timers, seen = rests()
        doc = changed(text, change)
        er.edited(doc, [change])
        assert [t[0] for t in timers.armed] == [delay], change
        timers.fire()
        end = edit_end(doc, [change])
        assert seen == [CursorMessage(URI, end.line, end.character)]
    # A request sent with the cut still takes the rest's place.
    er, timers, seen = rests()
    cut = NOT_KEYSTROKES["a cut on one line"]
    er.edited(changed(text, cut), [cut])
    er.asked(URI)
    timers.fire()
    assert seen == []


def test_a_request_a_close_or_a_whole_text_leaves_no_rest():
    for stop in ("asked", "closed"):
        er, timers, seen = rests()
        change = partial(0, 0, 0, 0, "x")
        er.edited(changed("\n", change), [change])
        getattr(er, stop)(URI)
        timers.fire()
        assert seen == [] and er.pending() == 0, stop
    er, timers, seen = rests()
    change = partial(0, 0, 0, 0, "x")
    er.edited(changed("\n", change), [change])
    whole = types.TextDocumentContentChangeWholeDocument(text="y = 2\n")
    er.edited(changed("x\n", whole), [whole])  # the earlier rest is replaced by none
    timers.fire()
    assert seen == []


def test_a_client_that_sends_its_cursor_is_not_guessed_for():
    er, timers, seen = rests()
    change = partial(0, 0, 0, 0, "x")
    er.edited(changed("\n", change), [change])
    er.cursor_sent()  # the pending rest goes too
    er.edited(changed("\n", change), [change])
    timers.fire()
    assert seen == [] and timers.armed == [] and er.client_sends_cursor


def test_rests_of_two_documents_are_kept_apart():
    er, timers, seen = rests()
    a = Document("file:///w/a.py", "a\n", 1, "python")
    b = Document("file:///w/b.py", "b\n", 1, "python")
    change = partial(0, 1, 0, 1, "c")
    a.apply_changes([change])
    b.apply_changes([change])
    er.edited(a, [change])
    er.edited(b, [change])
    er.asked("file:///w/a.py")
    timers.fire()
    assert seen == [CursorMessage("file:///w/b.py", 0, 2)]


def opened(uri: str, text: str = "import os\n\nos.getcwd()\n") -> Document:
    return Document(uri, text, 1, "python")


def test_an_opened_document_rests_at_its_start_and_only_the_latest_open_counts():
    er, timers, seen = rests()
    er.opened(opened("file:///w/a.py"))
    assert [t[0] for t in timers.armed] == [EDIT_REST_S] and er.pending() == 1
    er.opened(opened("file:///w/b.py"))  # a session reopening files: the last one is warmed
    timers.fire()
    assert seen == [CursorMessage("file:///w/b.py", 0, 0)]
    assert er.pending() == 0


def test_any_edit_or_request_takes_the_place_of_an_opened_documents_rest():
    for act in ("asked", "edited"):
        er, timers, seen = rests()
        er.opened(opened("file:///w/b.py"))
        if act == "asked":
            er.asked(URI)  # a request in another document says where the user is
        else:
            change = partial(0, 0, 0, 0, "x")
            er.edited(changed("\n", change), [change])
        timers.fire()
        assert seen == ([] if act == "asked" else [CursorMessage(URI, 0, 1)]), act


def test_closing_the_opened_document_or_sending_a_cursor_leaves_no_open_rest():
    er, timers, seen = rests()
    er.opened(opened("file:///w/b.py"))
    er.closed(URI)  # another document: the open's rest stays
    er.closed("file:///w/b.py")
    timers.fire()
    assert seen == []
    er.opened(opened("file:///w/b.py"))
    er.cursor_sent()
    er.opened(opened("file:///w/c.py"))  # never guessed once the client sends its cursor
    timers.fire()
    assert seen == [] and er.pending() == 0
