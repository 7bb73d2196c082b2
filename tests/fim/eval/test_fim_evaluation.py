"""Metrics and tables of the evaluation harness."""

from __future__ import annotations

from fim.api import Engine
from fim.engines.transformers_engine import backend_from_loaded
from fim.eval import evaluation
from tests.support.reference_language import ReferenceLanguage


def test_edit_distance_and_similarity():
    assert evaluation.edit_distance("kitten", "sitting") == 3
    assert evaluation.edit_distance("", "abc") == 3
    assert evaluation.edit_similarity("abc", "abc") == 1.0
    assert evaluation.edit_similarity(None, "abc") == 0.0
    assert evaluation.edit_similarity("", "") == 1.0
    assert abs(evaluation.edit_similarity("abcd", "abce") - 0.75) < 1e-9


def _rec(case_id, mode, success):
    return {"id": case_id, "dataset": case_id.split("/")[0], "mode": mode, "success": success,
            "middle": "x" if success else None, "exact": False, "edit_similarity": 0.5,
            "tokens": 2, "model_ms": 4.0, "constraint_ms": 1.0, "setup_ms": 3.0, "stop": "eos",
            "lang_mode": "exact"}


def test_summary_table_layout():
    rows = []
    # (unconstrained, checked, constrained) outcomes of four cases.
    for i, (u, c, k) in enumerate([(1, 1, 1), (0, 1, 1), (0, 0, 1), (0, 0, 0)]):
        cid = f"boundary/f.py#{i}"
        rows += [_rec(cid, "unconstrained", bool(u)), _rec(cid, "checked", bool(c)),
                 _rec(cid, "constrained", bool(k))]
    s = evaluation.summarize(rows)["boundary"]
    t = s["table"]
    assert t["unconstrained_ok"] == {"constrained_ok": 1, "constrained_fail": 0, "total": 1}
    assert t["unconstrained_fail"] == {"constrained_ok": 1, "constrained_fail": 0, "total": 1}
    assert t["checked_fail"] == {"constrained_ok": 1, "constrained_fail": 1, "total": 2}
    assert t["total"] == {"constrained_ok": 3, "constrained_fail": 1, "total": 4}
    assert s["modes"]["constrained"]["success"] == 0.75
    assert s["modes"]["unconstrained"]["model_ms_per_token"] == 2.0
    text = evaluation.format_summary({"boundary": s})
    assert "Stack-Boundary: 4 cases" in text and "Checked Unconstrained ✗" in text
    md = evaluation.format_markdown({"boundary": s})
    assert "#### Stack-Boundary (4 cases)" in md
    assert "| Checked unconstrained ✗ | 1 | 1 | 2 |" in md
    assert "| Total | 3 | 1 | 4 |" in md
    assert "| constrained | 75.0% | 0.0% | 0.500 | 2.0 | 2 | 0.500 / 0.500 | eos 4 |" in md


def test_run_case_records(random_loaded):
    engine = Engine(backend_from_loaded(random_loaded),
                    language_factory=ReferenceLanguage.for_python)
    case = {"id": "randspan/a.py#0", "left": "x = ", "right": "\n", "middle": "1"}
    recs = evaluation.run_case(engine, case, max_tokens=3, top_k=5, scope="free")
    assert [r["mode"] for r in recs] == ["unconstrained", "checked", "constrained"]
    for r in recs:
        if r["success"]:
            assert r["middle"] is not None
    # Checked is derived from the same generation as unconstrained.
    assert recs[0]["tokens"] == recs[1]["tokens"]


def test_run_resumes_and_fills_only_missing_modes(random_loaded, tmp_path):
    import json

    engine = Engine(backend_from_loaded(random_loaded),
                    language_factory=ReferenceLanguage.for_python)
    case = {"id": "boundary/a.py#0", "left": "x = ", "right": "\n", "middle": "1"}
    path = tmp_path / "records.jsonl"
    first = evaluation.run_case(engine, case, max_tokens=2, top_k=5, scope="free",
                                modes=["unconstrained"])
    assert [r["mode"] for r in first] == ["unconstrained", "checked"]
    path.write_text("".join(json.dumps(r) + "\n" for r in first))
    records = evaluation.run(engine, [case], max_tokens=2, top_k=5, scope="free",
                             records_path=path)
    assert sorted(r["mode"] for r in records) == sorted(evaluation.EVAL_MODES)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [r["mode"] for r in lines] == ["unconstrained", "checked", "constrained"]


def test_run_in_chosen_modes_decodes_only_those(random_loaded, tmp_path):
    engine = Engine(backend_from_loaded(random_loaded),
                    language_factory=ReferenceLanguage.for_python)
    asked = []
    real = engine.complete
    engine.complete = lambda req, cancel=None: asked.append(req.mode) or real(req, cancel)
    case = {"id": "boundary/a.py#0", "left": "x = ", "right": "\n", "middle": "1"}
    path = tmp_path / "records.jsonl"
    records = evaluation.run(engine, [case], max_tokens=2, top_k=5, scope="free",
                             records_path=path, modes=["constrained"])
    assert [r["mode"] for r in records] == ["constrained"]
    assert asked == ["constrained"]
    # A later run in every mode adds the others and does not decode constrained again.
    evaluation.run(engine, [case], max_tokens=2, top_k=5, scope="free", records_path=path)
    assert asked == ["constrained", "unconstrained"]


def test_ide_policy_asks_what_the_editor_asks(random_loaded):
    from fim.editor_policy import EMPTY_LINE, MID_LINE

    engine = Engine(backend_from_loaded(random_loaded),
                    language_factory=ReferenceLanguage.for_python)
    asked = []
    real = engine.complete
    engine.complete = lambda req, cancel=None: asked.append(req) or real(req, cancel)
    mid = {"id": "boundary/a.py#0", "left": "x = foo(", "right": ")\n", "middle": "1"}
    empty = {"id": "boundary/b.py#0", "left": "def f():\n    ", "right": "\n    return 1\n",
             "middle": "y = 2"}
    for case in (mid, empty):
        recs = evaluation.run_case(engine, case, max_tokens=7, top_k=5, scope="free",
                                   policy="ide", context_tokens=512)
        assert {r["mode"] for r in recs} == {"unconstrained", "checked", "constrained"}
    assert [(r.scope, r.max_tokens, r.line_stop, r.context_tokens) for r in asked] == [
        (MID_LINE.scope, MID_LINE.max_tokens, True, 512)] * 2 + [
        (EMPTY_LINE.scope, EMPTY_LINE.max_tokens, False, 512)] * 2
