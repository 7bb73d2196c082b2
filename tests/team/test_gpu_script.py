"""``scripts/gpu_benchmarks.sh`` without a GPU: its dry run checks the pieces (docs/team.md's GPU
sections, the benchmarks' arguments) and prints the commands it would run, for CUDA and for this
CPU; a bad argument or a page without the sections stops it.  (The real runs need a CUDA
machine; ``--device cpu`` runs them tiny here, minutes, not in the tests.)"""

from __future__ import annotations

import os
import shutil
import subprocess

from tests.support.team import REPO, need_team_python

SCRIPT = REPO / "scripts" / "gpu_benchmarks.sh"


def _run(*args: str, cwd=REPO) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(cwd / "scripts" / "gpu_benchmarks.sh"), *args],
                          capture_output=True, text=True, timeout=300, cwd=cwd,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))


def test_the_dry_run_prints_the_cuda_commands():
    done = _run("--dry-run")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    step = next(line for line in lines if "benchmarks.bench_vllm_step" in line)
    quality = next(line for line in lines if "benchmarks.vllm_quality" in line)
    assert "--section gpu-vllm-step" in step and "--figures docs/team.md" in step
    assert "--section gpu-vllm-quality" in quality and "--cases 25" in quality
    assert any("pip install -q -e .[team-cuda]" in line for line in lines)


def test_the_cpu_dry_run_writes_into_a_copy(tmp_path):
    need_team_python()  # the CPU path runs vLLM from .venv-team
    done = subprocess.run(["bash", str(SCRIPT), "--dry-run", "--device", "cpu"],
                          capture_output=True, text=True, timeout=300, cwd=REPO,
                          env=dict(os.environ, TMPDIR=str(tmp_path)))
    assert done.returncode == 0, done.stderr
    step = next(line for line in done.stderr.splitlines() if "bench_vllm_step" in line)
    assert f"--figures {tmp_path}/seam-gpu-benchmarks/team.md" in step
    assert "--concurrency 1 " in step and "team-cuda" not in done.stderr


def test_bad_arguments_and_a_page_without_the_sections_stop_it(tmp_path):
    assert _run("--device", "tpu").returncode == 2
    assert _run("--bogus").returncode == 2
    copy = tmp_path / "repo"
    (copy / "scripts").mkdir(parents=True)
    (copy / "docs").mkdir()
    shutil.copy(SCRIPT, copy / "scripts")
    (copy / "docs" / "team.md").write_text("# no GPU sections\n")
    done = _run("--dry-run", cwd=copy)
    assert done.returncode == 1 and "no section gpu-vllm-quality" in done.stderr
