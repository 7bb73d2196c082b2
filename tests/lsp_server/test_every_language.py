"""Every file type the editor opens gets suggestions, through a real ``seam serve``.

A JavaScript, a YAML and a shell document are completed with the same engine as a Python one;
the server's ``seam/status`` answer records their completions as ``unchecked`` (no grammar,
no parse check) and the Python one's as ``exact``, and names the language ids it checks, which
the editors use for their label.  ``languages: ["python"]`` limits it to Python again.
"""

from __future__ import annotations

import importlib.util

import pytest

from tests.support.seam_lsp_client import (
    TEST_MODEL,
    inline,
    items_of,
    lsp_session,
    open_doc,
    status,
    wait_ready,
)

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(300)]

needs_fim = pytest.mark.skipif(importlib.util.find_spec("fim.api") is None,
                               reason="fim is not installed")

DOCUMENTS = {
    "app.js": ("javascript", "function add(a, b) {\n  return a + b;\n}\n\nconst total = "),
    "ci.yaml": ("yaml", "name: build\non: [push]\njobs:\n  test:\n    runs-on: "),
    "run.sh": ("shellscript", "#!/bin/sh\nset -eu\nfor f in *.txt; do\n  echo "),
    "mod.py": ("python", "def add(a, b):\n    return a + b\n\n\ntotal = "),
}


def _record_of(st: dict, uri: str) -> dict:
    records = [r for r in st["recent"] if r["uri"] == uri and r["source"] == "model"]
    assert records, st["recent"]
    return records[-1]


@needs_fim
async def test_each_file_type_is_completed_and_labelled(tmp_path) -> None:
    async with lsp_session(tmp_path, {"seam": {"model": TEST_MODEL, "maxTokens": 6,
                                               "timeBudgetMs": 60000}}) as lc:
        ready = await wait_ready(lc)
        assert ready["checked"] == ["python", "go"]  # the languages with a grammar
        for name, (language, text) in DOCUMENTS.items():
            uri = (tmp_path / name).as_uri()
            open_doc(lc, uri, text, language=language)
            line = text.count("\n")
            result = await inline(lc, uri, line, len(text.rsplit("\n", 1)[-1]))
            assert isinstance(items_of(result), list)
            record = _record_of(await status(lc), uri)
            assert record["mode"] == ("exact" if language == "python" else "unchecked"), record
            assert record["stop"] != "error", record


@needs_fim
async def test_the_languages_setting_limits_them(tmp_path) -> None:
    async with lsp_session(tmp_path, {"seam": {"model": TEST_MODEL, "maxTokens": 4,
                                               "languages": ["python"]}}) as lc:
        await wait_ready(lc)
        language, text = DOCUMENTS["app.js"]
        uri = (tmp_path / "app.js").as_uri()
        open_doc(lc, uri, text, language=language)
        assert items_of(await inline(lc, uri, text.count("\n"), 14)) == []
        assert not [r for r in (await status(lc))["recent"] if r["uri"] == uri]
