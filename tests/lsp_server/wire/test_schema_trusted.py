"""The schema check skips the fields the strict converter already guarantees, and only those.

A "Replace All" ``didChange`` carries tens of thousands of ranges; walking each position again
after the strict hooks had checked it cost the event loop as much as structuring it.
"""

from __future__ import annotations

import typing

import attrs
import pytest
from cattrs.errors import CattrsError
from lsprotocol import types

from lsp_server.server import SeamServer
from lsp_server.wire import schema
from lsp_server.wire.schema import _trusted, schema_problem_of

_SAMPLES = {str: "x", int: 1, float: 1.5, bool: True}
_WRONG = {str: [1, None, True], int: ["1", 1.5, True, None], float: ["1", None, True],
          bool: [1, "true", None]}


def _key(name: str) -> str:
    """The JSON name of an lsprotocol field (``range_length`` is ``rangeLength``)."""
    first, *rest = name.split("_")
    return first + "".join(part.title() for part in rest)


def _valid(cls: type) -> dict:
    """A JSON object for trusted ``cls`` with every field set."""
    hints = typing.get_type_hints(cls)
    return {_key(f.name): _SAMPLES[hints[f.name]] if hints[f.name] in _SAMPLES
            else _valid(hints[f.name]) for f in attrs.fields(cls)}


def _leaves(cls: type, path: tuple = ()) -> list[tuple[tuple, type]]:
    hints = typing.get_type_hints(cls)
    found = []
    for field in attrs.fields(cls):
        declared = hints[field.name]
        key = path + (_key(field.name),)
        found += [(key, declared)] if declared in _SAMPLES else _leaves(declared, key)
    return found


#: Every lsprotocol class the check trusts (Position, Range, Location, ... 46 of them).
TRUSTED = sorted((cls for cls in vars(types).values()
                  if isinstance(cls, type) and attrs.has(cls) and _trusted(cls)),
                 key=lambda cls: cls.__name__)


def test_the_classes_a_didchange_holds_are_trusted() -> None:
    assert {types.Position, types.Range, types.VersionedTextDocumentIdentifier,
            types.TextDocumentContentChangeWholeDocument} <= set(TRUSTED)


@pytest.mark.parametrize("cls", TRUSTED, ids=lambda c: c.__name__)
def test_a_trusted_class_refuses_every_wrong_kind_in_the_converter(cls) -> None:
    converter = SeamServer().protocol._converter
    try:
        converter.structure(_valid(cls), cls)
    except CattrsError:
        pytest.skip("a field's validator wants a particular value (a kind's name)")
    for path, declared in _leaves(cls):
        for wrong in _WRONG[declared]:
            data = _valid(cls)
            inner = data
            for key in path[:-1]:
                inner = inner[key]
            inner[path[-1]] = wrong
            with pytest.raises(CattrsError):
                converter.structure(data, cls)


def test_unions_and_optionals_are_not_trusted() -> None:
    assert not _trusted(types.TextDocumentItem)  # languageId: LanguageKind | str
    assert not _trusted(types.TextDocumentContentChangePartial)  # rangeLength: int | None
    assert not _trusted(types.DidChangeTextDocumentParams)


def test_a_replace_all_is_checked_in_a_step_or_two_per_change(monkeypatch) -> None:
    """Fails on the walk that visited every range and position (about 10 steps a change)."""
    converter = SeamServer().protocol._converter
    changes = [{"range": {"start": {"line": i, "character": 9},
                          "end": {"line": i, "character": 17}}, "text": "new_name"}
               for i in range(2000)]
    params = converter.structure({"textDocument": {"uri": "file:///a.py", "version": 2},
                                  "contentChanges": changes}, types.DidChangeTextDocumentParams)
    calls = 0
    real = schema._problem

    def counting(*args, **kwargs):
        nonlocal calls
        calls += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(schema, "_problem", counting)
    assert schema_problem_of(params) is None
    assert calls <= 2 * len(changes) + 10, calls


def test_a_wrong_kind_outside_the_trusted_fields_is_still_named() -> None:
    converter = SeamServer().protocol._converter
    params = converter.structure(
        {"textDocument": {"uri": "file:///a.py", "languageId": 7, "version": 1, "text": ""}},
        types.DidOpenTextDocumentParams)
    assert schema_problem_of(params) == \
        "params.text_document.language_id: a number is not allowed here"
