"""Every file type gets suggestions: the language registry and the unchecked path.

A file in a language Seam has no grammar for is decoded with the same engine, unconstrained
but for the right-context stop by text, and its result says ``unchecked``; a Python file keeps
its exact constraint and parse check.  The scripted model says a JavaScript middle and then
re-writes what follows the cursor: the middle must end where the re-write begins.
"""

from __future__ import annotations

import pytest
from test_editor_requests import Scripted

from fim import languages
from fim.api import CompletionRequest, Engine
from fim.engines.transformers_engine import backend_from_loaded
from fim.language_cache import LanguageCache
from quotient.constraint import LanguageMode


def scripted_engine(random_loaded, text: str) -> tuple[Engine, Scripted]:
    backend = backend_from_loaded(random_loaded)
    tok = backend.tokenizer
    script = Scripted(backend.step_model.vocab_size, tok.encode(text),
                      tok.token_id("<|endoftext|>"))
    backend.step_model = script
    return Engine(backend, heal=False), script


@pytest.mark.parametrize(("lookup", "expected"), [
    (lambda: languages.by_lsp_id("shellscript"), "shell"),
    (lambda: languages.by_lsp_id("typescriptreact"), "typescript"),
    (lambda: languages.by_path("/a/b/c.YML"), "yaml"),
    (lambda: languages.by_path("file:///x/y/main.rs"), "rust"),
    (lambda: languages.by_path("src/app.py"), "python"),
    (lambda: languages.by_id(" Python "), "python"),
    (lambda: languages.by_id("javascriptreact"), "javascript"),
    (lambda: languages.by_path("Makefile"), "text"),
    (lambda: languages.by_id("cobol"), "cobol"),
])
def test_lookups_name_the_language(lookup, expected):
    assert lookup().id == expected


def test_python_and_go_are_checked_and_unknown_names_are_served_unchecked():
    for name in ("python", "go"):
        assert languages.by_id(name).checked and languages.by_id(name).check == "exact"
    assert languages.by_path("/src/main.go").id == "go"
    assert languages.by_lsp_id("go").id == "go"
    for name in ("javascript", "yaml", "shell", "cobol", ""):
        lang = languages.by_id(name)
        assert not lang.checked and lang.check == "unchecked" and lang.parses("x") is None
        constraint = lang.constraint("a = ", "\n", "statement")
        assert constraint.mode == LanguageMode.UNCHECKED
        state = constraint.initial().feed("}}}{{ not python")
        assert state is not None and state.is_complete()


def test_the_language_cache_keeps_grammars_apart_and_does_not_keep_unchecked_ones():
    cache = LanguageCache(2)
    python = cache.get("x = ", "\n", "statement")
    assert python.language.language.mode == LanguageMode.EXACT
    js = cache.get("x = ", "\n", "statement", languages.by_id("javascript"))
    assert js.language.language.mode == LanguageMode.UNCHECKED and not js.reused
    # the Python language is still there, the unchecked one never was
    assert len(cache) == 1 and cache.built == 1
    again = cache.get("x = 1", "\n", "statement")
    assert again.reused and again.language.of is languages.PYTHON


JS_LEFT = "function add(a, b) {\n  return "
JS_RIGHT = ";\n}\n\nmodule.exports = { add };\n"


def test_an_unchecked_file_ends_its_middle_where_the_right_context_is_rewritten(random_loaded):
    engine, script = scripted_engine(random_loaded, "a + b;\n}\n\nmodule.exports = { add };")
    res = engine.complete(CompletionRequest(JS_LEFT, JS_RIGHT, max_tokens=32,
                                            scope="free", language="javascript"))
    assert (res.middle, res.stop) == ("a + b", "right_context")
    assert res.mode == LanguageMode.UNCHECKED
    assert res.parses is None and res.error is None  # nothing parsed it as Python


def test_an_unchecked_file_keeps_what_python_would_refuse(random_loaded):
    """``a => a * 2`` is no Python: a Python file's check would cut it; a JavaScript file
    keeps it whole."""
    said = "x => x * 2"
    left, right = "double = ", ";\n"
    engine, _ = scripted_engine(random_loaded, said)
    js = engine.complete(CompletionRequest(left, right, max_tokens=16, language="javascript"))
    assert js.middle == said and js.stop == "eos"
    engine, _ = scripted_engine(random_loaded, said)
    py = engine.complete(CompletionRequest(left, right, max_tokens=16, language="python"))
    assert py.mode == LanguageMode.EXACT and py.middle != said


@pytest.mark.parametrize("mode", ["unconstrained", "checked"])
def test_other_modes_report_unchecked_and_never_cut_by_python(random_loaded, mode):
    said = "x => x * 2"
    engine, _ = scripted_engine(random_loaded, said)
    res = engine.complete(CompletionRequest("const double = ", ";\n", max_tokens=16,
                                            mode=mode, language="yaml"))
    assert res.mode == LanguageMode.UNCHECKED
    assert res.middle == said and res.parses is None


def test_a_go_file_gets_go_s_exact_constraint_and_parser():
    """The go record builds go_language's constraint (not Python's, not unchecked): a middle
    Go accepts and Python refuses fits, one that leaves the call open does not end there."""
    go = languages.by_id("go")
    left = "package main\n\nfunc main() {\n\tx := "
    right = "\n\tprintln(x)\n}\n"
    constraint = go.constraint(left, right, "statement")
    assert constraint.mode == LanguageMode.EXACT
    state = constraint.initial().feed("[]int{1, 2}")
    assert state is not None and state.is_complete()
    open_call = constraint.initial().feed("f(")
    assert open_call is not None and not open_call.is_complete()
    assert constraint.initial().feed("}}") is None
    assert go.parses(left + "[]int{1, 2}" + right)
    assert not go.parses(left + "f(" + right)
    cache = LanguageCache(2)
    hit = cache.get(left, right, "statement", go)
    assert hit.language.of is go and hit.language.language.mode == LanguageMode.EXACT
    assert cache.get(left + "[]", right, "statement", go).reused
