"""The plugin against a vLLM that lacks one runner's interface, and the version check.

Each runner's interface is imported apart (``fim.vllm.runner_compat``): with one runner's module
made unimportable (``sys.modules[name] = None``, as a vLLM that dropped it), the processor
module still loads in a fresh interpreter, serves the other runner and masks a row there.  A
vLLM outside the supported range is refused with a message naming both ranges.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests.support.team import REPO, need_vllm

need_vllm()

from fim.vllm import runner_compat  # noqa: E402

# Run in a fresh interpreter: the module is made missing before anything of vLLM's runner
# loads, as in a vLLM without it (reloading modules here would split class identities).
_WITHOUT = textwrap.dedent("""
    import sys
    sys.modules[{missing!r}] = None
    import torch
    from fim.engines.random_model import build_tokenizer
    from fim.vllm import processor, runner_compat
    from fim.vllm.rows import SeamArgs, TokenTable
    from vllm import SamplingParams
    tok = build_tokenizer()
    table = TokenTable.from_tokenizer(tok, len(tok))
    params = SamplingParams(temperature=0.0, extra_args=SeamArgs(
        "def f(a):\\n    return a +", "\\n").to_extra_args())
    rows = processor.SeamRows(table, penalties_after={v1})
    logits = torch.randn(1, table.size)
    if {v1}:
        proc = processor.SeamLogitsProcessor.over(rows)
        proc.update_state(runner_compat.BatchUpdate(batch_size=1, removed=[], moved=[],
                                                    added=[(0, params, [1], [])]))
    else:
        import vllm.v1.worker.gpu.sample.logits_processor as v2
        assert v2.LogitsProcRequestState is runner_compat.LogitsProcRequestState
        rows.add(0, params, None, [])
        proc = processor.SeamLogitsProcessor.over(rows)
    proc.apply(logits)
    bases = [b.__module__ for b in processor.SeamLogitsProcessor.__bases__]
    print(runner_compat.runners(), int(torch.isfinite(logits[0]).sum()), bases)
""")


def _run_without(missing: str, v1: bool) -> str:
    code = _WITHOUT.format(missing=missing, v1=v1)
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def test_without_v2_the_v1_runner_still_loads_and_masks():
    line = _run_without(runner_compat.V2_MODULE, v1=True)
    # Only V1 is served; its greedy row is masked to one survivor; the class has V1's base
    # and the stand-in for V2's.
    assert line.startswith("['V1'] 1 ["), line
    assert "vllm.v1.sample.logits_processor" in line and "runner_compat" in line


def test_without_v1_the_v2_runner_still_loads_and_masks():
    line = _run_without(runner_compat.V1_MODULE, v1=False)
    assert line.startswith("['V2'] 1 ["), line
    assert "vllm.v1.worker.gpu.sample.logits_processor" in line and "runner_compat" in line


@pytest.mark.parametrize("version", ["0.32.0", "0.32.0+cpu", "0.32.7", "0.32.1rc1"])
def test_supported_versions_load(version):
    runner_compat.check_version(version)


@pytest.mark.parametrize("version", ["0.31.9", "0.33.0", "1.0.0", "unknown"])
def test_other_versions_are_refused_by_name(version, monkeypatch):
    monkeypatch.delenv(runner_compat.ANY_VERSION_ENV, raising=False)
    with pytest.raises(runner_compat.UnsupportedVllm) as err:
        runner_compat.check_version(version)
    assert runner_compat.SUPPORTED_TEXT in str(err.value) and version in str(err.value)


def test_the_override_loads_another_version_with_a_warning(monkeypatch, caplog):
    monkeypatch.setenv(runner_compat.ANY_VERSION_ENV, "1")
    with caplog.at_level("WARNING", logger="vllm.seam"):
        runner_compat.check_version("0.40.0")
    assert "0.40.0" in caplog.text
