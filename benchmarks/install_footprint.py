"""What installing Seam costs: disk and time of fresh virtual environments, before and after.

Issue 31 made the default install light (the llama.cpp engine, no torch or transformers). This
script measures that claim instead of asserting it: for each variant it exports a commit's
tree (``git archive``), makes a fresh virtual environment under a temporary directory, installs
the tree non-editable with pip (no pip cache: every package is fetched as on a fresh
machine), and records the wall and CPU time of that install, the environment's size on disk,
the number of distributions in it, whether torch is among them, and whether ``seam
--version`` and ``seam doctor`` run there.

Variants (``--variants``):

* ``light``: ``pip install .`` at the measured commit, what ``pip install seam-complete`` gives;
* ``light-bundled``: ``pip install '.[bundled]'``, what ``scripts/demo.sh`` installs now;
* ``before-bundled``: ``pip install '.[bundled]'`` at ``--before`` (a commit before the light
  install), what ``scripts/demo.sh`` installed then (torch and transformers included);
* ``before``: ``pip install .`` at ``--before``.

llama-cpp-python has no binary wheel on the registry. Every variant installs it from the wheel
``scripts/install_llama_cpp.sh`` built and cached on this machine (as ``scripts/setup.sh``
does), so the times below do not include that one-off build (about ten minutes on two cores,
once per machine); the sizes include the installed engine. The downloads come from the
machine's package index configuration (the registry, plus local mirrors where configured),
so the times depend on the network as well as the CPU.

``--figures docs/benchmarks.md`` writes the table into that page's ``install`` section.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.report import ROOT, RunRecord, command_line, publish

LLAMA_VERSION = "0.3.36"
VARIANTS = ("light", "light-bundled", "before", "before-bundled")


@dataclass(frozen=True)
class Measured:
    """One fresh environment's install."""

    variant: str
    commit: str
    spec: str
    wall_s: float
    cpu_s: float
    bytes_on_disk: int
    distributions: int
    torch: bool
    version: str  # what `seam --version` printed, or why it did not
    doctor: str  # "ok", "N problems: ...", "no such command" or "failed: ..."


def llama_wheel() -> Path:
    """The llama-cpp-python wheel ``scripts/install_llama_cpp.sh`` cached on this machine."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "seam" / "wheels"
    found = sorted(base.glob(f"llama-cpp-python-{LLAMA_VERSION}-*/llama_cpp_python-*.whl"),
                   key=lambda p: p.stat().st_mtime)
    if not found:
        raise SystemExit("no cached llama-cpp-python wheel: run bash scripts/install_llama_cpp.sh")
    return found[-1]


def export(commit: str, dest: Path) -> Path:
    """The tree of ``commit`` in ``dest`` (what a user's clone or sdist holds)."""
    dest.mkdir(parents=True)
    archive = dest.with_suffix(".tar")
    subprocess.run(["git", "archive", "--format=tar", "-o", str(archive), commit], cwd=ROOT,
                   check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    archive.unlink()
    return dest


def disk_usage(path: Path) -> int:
    """Bytes the tree takes on disk (allocated blocks, as ``du`` counts; links once)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for base, dirs, files in os.walk(path):
        for name in dirs + files:
            st = os.lstat(os.path.join(base, name))
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
    return total


def _refused(done: subprocess.CompletedProcess) -> bool:
    """Whether ``seam`` did not know the command or option (a version before it existed)."""
    return done.returncode == 2 and ("invalid choice" in done.stderr
                                     or "unrecognized arguments" in done.stderr
                                     or "the following arguments" in done.stderr)


def _version(venv: Path) -> str:
    done = subprocess.run([str(venv / "bin" / "seam"), "--version"], capture_output=True,
                          text=True, timeout=120, cwd=venv)
    if done.returncode == 0:
        return done.stdout.strip()
    return "no such option" if _refused(done) else f"failed (exit {done.returncode})"


def _doctor(venv: Path) -> str:
    done = subprocess.run([str(venv / "bin" / "seam"), "doctor", "--json"], capture_output=True,
                          text=True, timeout=300, cwd=venv)
    if _refused(done):
        return "no such command"
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"failed (exit {done.returncode}): {tail[:120]}"
    problems = [f["summary"] for f in report["findings"] if f["verdict"] == "problem"]
    if not problems:
        return "ok"
    return f"{len(problems)} problem(s): " + "; ".join(p[:100] for p in problems)


def measure(variant: str, commit: str, work: Path, wheel: Path) -> Measured:
    src = export(commit, work / f"src-{variant}")
    venv = work / f"venv-{variant}"
    base_python = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base_python, "-m", "venv", str(venv)], check=True)
    spec = str(src) + ("[bundled]" if variant.endswith("bundled") else "")
    env = dict(os.environ, PIP_NO_CACHE_DIR="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(wheel), spec], env=env,
                   check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    listed = subprocess.run([str(venv / "bin" / "pip"), "list", "--format=json"], env=env,
                            capture_output=True, text=True, check=True)
    names = {d["name"].lower() for d in json.loads(listed.stdout)}
    has_seam = (venv / "bin" / "seam").exists()
    version = _version(venv) if has_seam else "no seam command"
    doctor = _doctor(venv) if has_seam else "no seam command"
    size = disk_usage(venv)
    shutil.rmtree(venv)
    shutil.rmtree(src)
    return Measured(variant, commit, spec.replace(str(src), "."), wall, cpu, size, len(names),
                    "torch" in names, version, doctor)


def table(rows: list[Measured]) -> str:
    out = ["| variant | commit | install | wall | CPU | disk | distributions | torch | "
           "`seam --version` | `seam doctor` |",
           "| --- | --- | --- | ---: | ---: | ---: | ---: | --- | --- | --- |"]
    for r in rows:
        out.append(f"| {r.variant} | `{r.commit}` | `pip install '{r.spec}'` | "
                   f"{r.wall_s:.0f} s | {r.cpu_s:.0f} s | {r.bytes_on_disk / 2**30:.2f} GiB "
                   f"({r.bytes_on_disk / 1e9:.2f} GB) | {r.distributions} | "
                   f"{'yes' if r.torch else 'no'} | {r.version} | {r.doctor} |")
    out.append("")
    out.append("Wall: the `pip install` command, downloads included; CPU: its user and system "
               "time. Disk: the environment's allocated blocks, as `du` counts them (GiB, and "
               "GB of 10^9 bytes). Distributions: `pip list`, pip and setuptools included. "
               "`seam doctor` is run with the default settings and no server log.")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--variants", default="light,light-bundled,before-bundled",
                   help=f"comma-separated, of {', '.join(VARIANTS)}")
    p.add_argument("--commit", default="HEAD", help="the light install's commit (default HEAD)")
    p.add_argument("--before", default=None,
                   help="a commit before the light install, for the before* variants")
    p.add_argument("--work", type=Path, default=None,
                   help="where the environments are made (default: a new directory in /tmp)")
    p.add_argument("--figures", type=Path, default=None,
                   help="write the table into this page's 'install' section")
    args = p.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        p.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    if any(v.startswith("before") for v in variants) and not args.before:
        p.error("the before* variants need --before COMMIT")

    def short(rev: str) -> str:
        return subprocess.run(["git", "rev-parse", "--short=12", rev], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout.strip()

    record = RunRecord(command=command_line())
    record.packages["pip"] = subprocess.run(
        [getattr(sys, "_base_executable", sys.executable), "-m", "pip", "--version"],
        capture_output=True, text=True).stdout.split(" ")[1]
    wheel = llama_wheel()
    record.packages["llama-cpp-python"] = LLAMA_VERSION + " (cached wheel)"
    work = args.work or Path(tempfile.mkdtemp(prefix="seam-install-"))
    # Resolved once: a commit made while the script runs must not change what it measures.
    commits = {"light": short(args.commit),
               "before": short(args.before) if args.before else ""}
    rows = []
    try:
        for variant in variants:
            commit = commits[variant.split("-")[0]]
            print(f"install_footprint: {variant} at {commit} ...", file=sys.stderr, flush=True)
            rows.append(measure(variant, commit, work, wheel))
            print(table(rows[-1:]), file=sys.stderr, flush=True)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    record.finish()
    body = table(rows)
    publish(body, record, args.figures, "install")
    return 0


if __name__ == "__main__":
    sys.exit(main())
