"""The team benchmarks' own arithmetic: which logged engine steps count as steady, the GPU
projection written from them, and how concurrent sessions share the files (no vLLM here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.bench_team import session_files
from benchmarks.vllm_step_log import Step, read_steps, steady
from benchmarks.vllm_step_report import projection


def _log(tmp_path: Path, rows: list[int], apply_s: float = 0.002, step_s: float = 0.5) -> Path:
    path = tmp_path / "steps.jsonl"
    lines = [json.dumps({"t": k * step_s, "apply": apply_s, "update": 0.0001,
                         "advance": apply_s / 2, "mask": apply_s / 2, "batch": r, "rows": r})
             for k, r in enumerate(rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_steady_steps_are_full_batches_away_from_joins_and_leaves(tmp_path):
    # Rows join over two steps (a prefill), decode at 4, then leave one by one.
    path = _log(tmp_path, [0, 2, 4, 4, 4, 4, 3, 1, 0])
    steps = read_steps(path, 0)
    assert [s.length for s in steps[:-1]] == [0.5] * 8
    kept = steady(steps, 4)
    # Index 2 follows a step with 2 rows (a join), index 5 precedes one with 3: both out.
    assert [s.t for s in kept] == [1.5, 2.0]
    assert steady(steps, 2) == []


def test_read_steps_starts_at_the_given_line(tmp_path):
    path = _log(tmp_path, [1, 1, 1, 4, 4, 4])
    assert [s.rows for s in read_steps(path, 3)] == [4, 4, 4]


def _steps(n: int, processor_ms: float, advance_share: float) -> list[Step]:
    p = processor_ms / 1e3
    return [Step(t=k, update=0.0, advance=p * advance_share, mask=p * (1 - advance_share),
                 apply=p, rows=n, batch=n, length=0.4) for k in range(5)]


def test_projection_reports_the_share_of_a_gpu_step_and_the_factor_needed():
    text = projection({16: _steps(16, 20.0, 0.8)}, gpu_step_ms=20.0)
    # 20 ms of processor on a 20 ms step: half of the 40 ms step.
    assert "the step would grow to 40.0 ms and the processor would be 50% of it" in text
    # 10% of the step is 20/9 = 2.22 ms: 9.0 times less than 20 ms.
    assert "2.22 ms" in text and "9.0 times less" in text
    assert "the constraint's own work (advancing and checking, 16.00 ms) dominates" in text


def test_projection_within_target_needs_nothing_moved():
    text = projection({1: _steps(1, 0.5, 0.5), 16: _steps(16, 1.0, 0.2)}, gpu_step_ms=20.0)
    assert "At 16 concurrent requests" in text
    assert "within the 10% target" in text and "times less" not in text


def test_projection_says_how_few_steps_it_rests_on():
    text = projection({4: _steps(4, 1.0, 0.5), 16: _steps(16, 8.0, 0.5)[:1]}, gpu_step_ms=20.0)
    assert "At 16 concurrent requests" in text
    assert "(median of 1 steady step; p90 8.00 ms)" in text
    assert "(Fewer than 5 steady steps at this size" in text


def test_projection_says_masking_first_when_masking_dominates():
    text = projection({16: _steps(16, 10.0, 0.1)}, gpu_step_ms=20.0)
    assert "the array work of masking (9.00 ms) dominates" in text
    assert "compiled core is needed too" not in text  # advancing (1 ms) fits 2.22 ms


def test_sessions_edit_different_files_while_there_are_enough():
    files = [Path(f"f{k}.py") for k in range(6)]
    first = [session_files(i, 1, files)[0] for i in range(6)]
    assert len(set(first)) == 6
    assert session_files(1, 2, files) == [files[2], files[3]]
    assert session_files(7, 1, files) == [files[1]]  # more sessions than files: wraps


def test_same_prompt_client_sends_the_local_engines_prompt_ids():
    from benchmarks.vllm_quality import SamePromptVllm
    from fim import api
    from fim.vllm.client import ServerInfo

    local = api.Engine.load("random:santacoder", heal=False)
    remote = SamePromptVllm("http://127.0.0.1:9")  # never contacted: the facts are set
    remote._info = ServerInfo("http://127.0.0.1:9", "m", 2048, local.template, (0,))
    remote.local = local
    req = api.CompletionRequest("def f(x):\n    return x +", "\n", mode="constrained",
                                max_tokens=8, context_tokens=64)
    body = remote.body(req, remote.prompt_for(req))
    assert body["prompt"] == local.prompt_for(req).ids
    assert all(isinstance(i, int) for i in body["prompt"])
    assert body["vllm_xargs"]  # still constrained by Seam's arguments on the server


def test_projection_is_judged_at_p90():
    steps = _steps(16, 1.0, 0.5) * 2 + _steps(16, 10.0, 0.5)[:3]  # 10 typical, 3 slow steps
    text = projection({16: steps}, gpu_step_ms=20.0)
    assert "the median step is within it, but the p90 needs 4.5 times less" in text
    assert "within the 10% target" not in text


def test_steady_steps_are_pooled_over_phases(tmp_path):
    from benchmarks.vllm_step_log import pooled

    a = read_steps(_log(tmp_path, [4, 4, 4, 3, 3, 3, 3]), 0)
    b = read_steps(_log(tmp_path, [1, 3, 3, 3, 2]), 0)
    assert [s.rows for s in pooled([a, b], 3)] == [3, 3, 3]
    # Steps of different phases are never neighbours: a's last step has no successor.
    assert len(pooled([a, b], 4)) == 1


def test_sampling_modes_are_read_in_order_once_and_unknown_ones_named():
    from benchmarks.vllm_step_log import SAMPLING_MODES, sampling_modes

    got = sampling_modes("topp0.95, greedy,topp0.95")
    assert [m.name for m in got] == ["topp0.95", "greedy"]
    with pytest.raises(ValueError, match="unknown sampling mode topp9.*known: greedy"):
        sampling_modes("greedy,topp9")
    with pytest.raises(ValueError, match="no sampling mode"):
        sampling_modes(" , ")
    assert SAMPLING_MODES["llamavim"].fields() == {"top_k": 40, "top_p": 0.9}
    assert SAMPLING_MODES["t0.8"].fields() == {}
    assert SAMPLING_MODES["greedy"].label == "greedy"
    assert SAMPLING_MODES["t0.8"].label == "temperature 0.8, drawn by Seam"
    assert SAMPLING_MODES["topp0.95"].label == "temperature 0.8, top-p 0.95"


def test_sampled_client_sends_the_modes_settings_and_no_seed():
    from benchmarks.bench_vllm_step import sampled_client
    from benchmarks.vllm_step_log import SAMPLING_MODES
    from fim.api import CompletionRequest
    from fim.vllm.client import RemotePrompt, ServerInfo

    info = ServerInfo("http://127.0.0.1:9", "m", 2048, None, (0,))
    prompt = RemotePrompt([1, 2, 3], None, 0, 0)
    req = CompletionRequest("x = (", ")\n", mode="constrained", max_tokens=4, temperature=0.8)
    for name, want in (("llamavim", {"top_k": 40, "top_p": 0.9}), ("t0.8", {})):
        engine = sampled_client(SAMPLING_MODES[name])("http://127.0.0.1:9")
        engine._info = info  # never contacted: the server's facts are set
        body = engine.body(req, prompt)
        assert {k: body[k] for k in ("top_k", "top_p") if k in body} == want
        assert body["temperature"] == 0.8 and "seed" not in body
        assert body["vllm_xargs"]
    greedy = sampled_client(SAMPLING_MODES["greedy"])("http://127.0.0.1:9")
    greedy._info = info
    req.temperature = 0.0
    body = greedy.body(req, prompt)
    assert "seed" in body and "top_k" not in body and "top_p" not in body


def test_counted_steps_give_checks_and_ids_left_per_row(tmp_path):
    from benchmarks.vllm_step_report import checks_per_row, left_per_row

    path = tmp_path / "steps.jsonl"
    lines = [{"t": k, "apply": 0.001, "update": 0.0, "advance": 0.0, "mask": 0.001,
              "batch": 2, "rows": 2, "checked": c, "check": 0.0005, "masked": 2, "left": 2 * c}
             for k, c in enumerate((10, 30))]
    lines.append({"t": 2, "apply": 0.001, "update": 0.0, "advance": 0.0, "mask": 0.001,
                  "batch": 2, "rows": 2})  # a log line from before the timer counted
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    steps = read_steps(path, 0)
    assert steps[2].checked == 0 and steps[2].masked == 0
    assert checks_per_row(steps) == 10.0  # 40 checks over 4 rows
    assert left_per_row(steps) == 20.0
    assert checks_per_row(steps[2:]) is None


def test_table_has_one_block_per_sampling_mode():
    from benchmarks.vllm_step_log import SAMPLING_MODES
    from benchmarks.vllm_step_report import table

    answers = {4: [{"parses": True, "middle": "x"}] * 3}
    blocks = [(SAMPLING_MODES["greedy"], {4: _steps(4, 2.0, 0.5)}, answers),
              (SAMPLING_MODES["topk40"], {4: []}, answers)]
    lines = table(blocks).splitlines()
    assert len(lines) == 4
    assert all(line.count("|") == lines[0].count("|") for line in lines)
    assert lines[2].startswith("| greedy | 4 | 5 |")
    assert lines[3].startswith("| temperature 0.8, top-k 40 | 4 | 0 |")
    assert lines[2].endswith("| – / – | 3 / 3 / 3 |")


def test_sampled_projection_splits_checks_from_array_work():
    from benchmarks.vllm_step_log import SAMPLING_MODES
    from benchmarks.vllm_step_report import projection, projections

    steps = [Step(t=k, update=0.0, advance=0.001, mask=0.010, apply=0.011, rows=16, batch=16,
                  checked=16 * 40, check=0.008, masked=16, left=16 * 40, length=0.4)
             for k in range(5)]
    text = projection({16: steps}, 20.0, SAMPLING_MODES["topk40"], explain=False)
    assert text.startswith("**Projection for a GPU, temperature 0.8, top-k 40.**")
    assert "(8.00 ms of it in 40.0 viability checks per row" in text
    assert "A top-k or top-p row" in text and "GIL" not in text
    assert " per step (median of 5 steady steps; p90 11.00 ms) on this CPU" in text
    assert "Fewer than" not in text
    assert "batch. On a GPU whose step takes 20 ms the step would grow to 31.0 ms" in text
    # advancing 1 ms + checking 8 ms against 2 ms of array work
    assert "the constraint's own work (advancing and checking, 9.00 ms) dominates" in text
    both = projections([(SAMPLING_MODES["greedy"], {16: steps}, {}),
                        (SAMPLING_MODES["t0.8"], {16: []}, {})], 20.0)
    assert both.count("under the GIL") == 1
    assert "No steady steps were measured with temperature" in both


def _phase(rows: list[int], added: list[int], update_s: float, apply_s: float,
           waited_s: float = 0.0) -> list[Step]:
    """Steps one second apart; a step that admits starts builds for ``update_s`` and waits
    ``waited_s`` for one of them (inside ``apply``)."""
    return [Step(t=k, update=update_s if a else 0.0, advance=apply_s / 2, mask=apply_s / 2,
                 apply=apply_s + (waited_s if a else 0.0), rows=r, batch=r, added=a,
                 joined=a, blocked=int(bool(a and waited_s)),
                 blocked_s=waited_s if a else 0.0, length=1.5 if a else 1.0)
            for k, (r, a) in enumerate(zip(rows, added, strict=True))]


def test_whole_phase_table_counts_admissions_and_every_step():
    from benchmarks.vllm_step_log import SAMPLING_MODES
    from benchmarks.vllm_step_report import whole_phase_table

    # 4 rows join in the first step (0.2 s starting builds and waiting, 0.05 s a request),
    # 2 more later (0.1 s a request); an empty step is not a step of the phase's rows.
    steps = _phase([4, 4, 4, 6, 6, 0], [4, 0, 0, 2, 0, 0], update_s=0.05, apply_s=0.004,
                   waited_s=0.15)
    text = whole_phase_table([(SAMPLING_MODES["greedy"], {4: steps})])
    line = text.splitlines()[2]
    tokens = 4 + 4 + 4 + 6 + 6
    mean = (0.4 + 5 * 0.004) / tokens * 1e3  # every step's processor time over the tokens
    assert f"| 5 / {tokens / 5:.1f} |" in line
    assert f"{mean:.2f} ({0.4 / tokens * 1e3:.2f})" in line
    assert "| 75.0 / 100.0 |" in line  # per request: median of 50 and 100 ms, and the max
    assert "| 6 / 2 |" in line  # requests admitted, of them waited for their language
    assert "| 1500 / 1000 |" in line  # the step time while admitting and while not
    assert line.endswith(f"| {(0.2 + 0.004) * 1e3:.1f} |")


def test_admissions_paragraph_compares_admitting_with_masking():
    from benchmarks.vllm_step_report import admissions

    slow = _phase([2, 2, 2], [2, 0, 0], update_s=0.001, apply_s=0.001, waited_s=0.199)
    text = admissions([slow], gpu_step_ms=20.0)
    assert "100.0 ms per request median and 100.0 ms at most (2 requests admitted in 1 " \
        "steps" in text
    assert "1 of the 2 rows had to wait for their build, 0.20 s in all" in text
    assert "adds 5.0 steps' worth" in text
    assert "admitting took 0.20 s, more than the 0.00 s" in text
    assert "1500 ms median in the 1 steps that admitted a request, 1000 ms in the 2" in text
    fast = _phase([2, 2, 2], [2, 0, 0], update_s=0.001, apply_s=0.01)
    assert "less than the 0.03 s" in admissions([fast], gpu_step_ms=20.0)
    assert "no figure" in admissions([_phase([1], [0], 0.0, 0.001)], gpu_step_ms=20.0)
    # Where the builds ran is said as the server ran them.
    assert "2 child processes" in text and "hold none of the engine's GIL" in text
    threads = admissions([slow], gpu_step_ms=20.0, processes=0)
    assert "threads in the engine's process" in threads and "holds the GIL" in threads
