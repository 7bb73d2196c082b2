"""Similar code as project context: what is found, what is never read, and that the choice
holds still while the user types in one place (the model's cache depends on it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lsp_server.project.python_definitions import DefinitionIndex
from lsp_server.project.similar_code import (
    MIN_SIMILARITY,
    PLACE_LINES,
    SimilarCode,
    identifiers,
    query_of,
    similarity,
)
from lsp_server.project.sources import ContextCollector, ContextSources, OpenDocument
from lsp_server.project.workspace import Workspace

# A sibling module with a handler much like the one being written, and one unlike it.
HANDLERS = '''import json


def handle_create(request, store):
    payload = json.loads(request.body)
    record = store.new_record(payload["name"])
    record.owner = request.user
    store.save(record)
    audit_log.write("create", record.key)
    return Response(record.to_dict(), status=201)


def unrelated(a, b):
    return a + b
'''
FILLER = "".join(f"def filler_{i}(x):\n    return x * {i}\n\n\n" for i in range(30))
# The document: the cursor sits on the empty line after the first three lines of a handler.
DOC = ('import json\n\n\n' + FILLER +
       'def handle_update(request, store):\n'
       '    payload = json.loads(request.body)\n'
       '    record = store.new_record(payload["name"])\n'
       '    \n'
       '    return Response(record.to_dict(), status=200)\n')
CURSOR = DOC.index('    \n') + 4


@pytest.fixture
def project(tmp_path: Path) -> dict:
    root = tmp_path / "app"
    root.mkdir()
    (root / "handlers.py").write_text(HANDLERS)
    (root / "views.py").write_text(DOC)
    ws = Workspace()
    ws.add(root.as_uri())
    return {"root": root, "ws": ws, "uri": (root / "views.py").as_uri()}


def finder(ws: Workspace) -> SimilarCode:
    return SimilarCode(ws, DefinitionIndex(ws))


def anchor_of(text: str, cursor: int, lines_above: int = 3) -> int:
    return text.count("\n", 0, cursor) - lines_above


def test_the_handler_next_door_is_found_with_what_followed_it(project):
    found = finder(project["ws"]).snippets(project["uri"], DOC, CURSOR,
                                           anchor_of(DOC, CURSOR), [])
    assert found, "the sibling's handler reads like the lines above the cursor"
    best = found[-1]  # the best last, nearest the file
    assert best.uri.endswith("/handlers.py") and best.score >= MIN_SIMILARITY
    # What came next there is what the model may copy.
    assert "record.owner = request.user" in best.text
    assert "def unrelated" not in "".join(s.text for s in found if s.score > best.score)


def test_the_prompts_own_window_is_left_out_but_the_file_above_it_counts(project):
    # The same handler earlier in the document itself, far above the prompt's window.
    early = HANDLERS.replace("handle_create", "handle_delete").replace("import json\n", "")
    text = early + FILLER + DOC
    cursor = text.index("    \n", len(early) + len(FILLER)) + 4
    anchor = anchor_of(text, cursor)
    found = SimilarCode(Workspace(), DefinitionIndex(Workspace())).snippets(
        "file:///nowhere/views.py", text, cursor, anchor, [])
    assert [s.text for s in found if "handle_delete" in s.text]
    cursor_line = text.count("\n", 0, cursor)
    for s in found:
        assert s.start + 12 <= anchor or s.start >= cursor_line + 24, "inside the window"
    # Where the server would widen the prompt to while the cursor rests counts as the window
    # too: the widened prompt shows the earlier handler itself.
    widened = SimilarCode(Workspace(), DefinitionIndex(Workspace())).snippets(
        "file:///nowhere/views.py", text, cursor, anchor, [], widest_line=lambda: 0)
    assert not [s for s in widened if s.uri == "file:///nowhere/views.py"
                and s.start < cursor_line + 24]


def test_open_documents_are_read_from_the_editor_and_the_document_never_from_disk(project):
    # On disk the document still holds, far below the cursor, a handler the user deleted in
    # the editor: it reads most like the lines above the cursor, and must not come back.
    deleted = HANDLERS.replace("handle_create", "handle_deleted").replace(
        "audit_log.write", "DELETED_audit_log.write").replace("import json\n", "")
    (project["root"] / "views.py").write_text(DOC + FILLER + deleted)
    # The sibling is open with unsaved changes: those are what count.
    edited = HANDLERS.replace("record.owner = request.user", "record.owner = request.editor")
    found = finder(project["ws"]).snippets(
        project["uri"], DOC, CURSOR, anchor_of(DOC, CURSOR),
        [((project["root"] / "handlers.py").as_uri(), edited)])
    joined = "\n".join(s.text for s in found)
    assert "request.editor" in joined and "request.user" not in joined
    assert "DELETED" not in joined


def test_nothing_is_read_outside_the_workspace(project, tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "leak.py").write_text(HANDLERS.replace("json.loads", "LEAKED.loads"))
    os.symlink(outside / "leak.py", project["root"] / "leak.py")
    found = finder(project["ws"]).snippets(project["uri"], DOC, CURSOR,
                                           anchor_of(DOC, CURSOR), [])
    assert found and all("LEAKED" not in s.text for s in found)
    # A document outside every folder: no file next to it is read.
    (outside / "views.py").write_text(DOC)
    none = finder(project["ws"]).snippets((outside / "views.py").as_uri(), DOC, CURSOR,
                                          anchor_of(DOC, CURSOR), [])
    assert all("LEAKED" not in s.text and "record.owner" not in s.text for s in none)


def test_the_choice_holds_while_typing_in_one_place_and_changes_at_another(project):
    code = finder(project["ws"])
    anchor = anchor_of(DOC, CURSOR)
    first = code.snippets(project["uri"], DOC, CURSOR, anchor, [])
    # Typing: the text and the query change, the prompt start does not.
    typed = DOC[:CURSOR] + "x = unrelated(1, 2)\n    y = x" + DOC[CURSOR:]
    assert code.snippets(project["uri"], typed, CURSOR + 28, anchor, []) == first
    # The server widens the prompt start while the cursor rests: still the same.
    assert code.snippets(project["uri"], typed, CURSOR + 28, 5, []) == first
    # A jump far up to a new prompt start chooses again, for the lines there.
    far = typed.index("def filler_3(") + len("def filler_3(x):\n    ")
    assert abs(typed.count("\n", 0, far) - typed.count("\n", 0, CURSOR)) > PLACE_LINES
    again = code.snippets(project["uri"], typed, far, anchor_of(typed, far, 1), [])
    assert again != first


def test_nothing_similar_gives_nothing(project):
    text = "def f():\n    zebra_quux = 1\n    \n"
    found = finder(project["ws"]).snippets(project["uri"], text, len(text) - 1, 0, [])
    assert found == ()


def test_the_collector_keeps_the_source_within_its_share(project):
    collector = ContextCollector(project["ws"])
    sources = ContextSources(definitions=False, open_files=False, recent_edits=False,
                             budget=128)

    def count(text: str) -> int:
        return len(text.split())

    ctx = collector.collect(project["uri"], DOC, anchor_of(DOC, CURSOR), sources,
                            [OpenDocument(project["uri"], DOC)], count, cursor=CURSOR)
    used = dict(ctx.tokens)["similar_code"]
    assert 0 < used <= 128 and ctx.files[-1].path == "handlers.py"
    # Without the cursor the source cannot place itself: nothing, not a guess.
    blind = ContextCollector(project["ws"]).collect(
        project["uri"], DOC, anchor_of(DOC, CURSOR), sources, [], count)
    assert blind.files == ()


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab_ cd\n1=.()", max_size=80),
       st.text(alphabet="ab_ cd\n1=.()", max_size=80))
def test_similarity_is_a_symmetric_fraction(a: str, b: str):
    x, y = identifiers(a), identifiers(b)
    s = similarity(x, y)
    assert 0.0 <= s <= 1.0 and s == similarity(y, x)
    assert (s == 1.0) == (x == y and bool(x))


def test_the_query_is_the_lines_above_the_cursor_without_keywords():
    before = "def f(alpha):\n\n    beta = alpha\n    if gam"
    assert query_of(before) == {"f", "alpha", "beta", "gam"}
    many = "".join(f"v{i} = {i}\n" for i in range(30)) + "w"
    assert "v0" not in query_of(many) and "v29" in query_of(many)


def test_a_huge_document_is_not_cut_but_its_neighbours_still_count(project):
    # Past the workspace's file limit (a generated table): its own windows are skipped, as the
    # workspace skips such files, so a new place does not cost cutting megabytes.
    from lsp_server.project.workspace import MAX_FILE_BYTES

    early = HANDLERS.replace("handle_create", "handle_huge").replace("import json\n", "")
    pad = "# " + "x" * 78 + "\n"
    huge = early + pad * (MAX_FILE_BYTES // len(pad) + 1) + DOC
    cursor = huge.index("    \n", len(huge) - len(DOC)) + 4
    found = finder(project["ws"]).snippets(project["uri"], huge, cursor,
                                           anchor_of(huge, cursor), [])
    assert found and all(s.uri.endswith("/handlers.py") for s in found)


def test_a_document_behind_a_link_loop_is_no_crash(project):
    # A client may name any path: one through a loop of links still gets the handler next
    # door from the open documents, and nothing raises.
    os.symlink(project["root"] / "loop_b", project["root"] / "loop_a")
    os.symlink(project["root"] / "loop_a", project["root"] / "loop_b")
    uri = (project["root"] / "loop_a" / "views.py").as_uri()
    sibling = ((project["root"] / "handlers.py").as_uri(), HANDLERS)
    found = finder(project["ws"]).snippets(uri, DOC, CURSOR, anchor_of(DOC, CURSOR), [sibling])
    assert found and found[-1].uri == sibling[0]
