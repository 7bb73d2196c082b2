"""Where a measured figure comes from, and how it gets into docs/figures.md.

Every benchmark that owns figures in `docs/figures.md` records, next to its numbers, the commit
it measured (and whether the tree had uncommitted changes), the versions of the packages the
measured code depends on, the machine, and the machine's load before and after the run: the
project machine is shared, so wall-clock figures mean little without the load, and the scripts
also report CPU time.

With ``--figures docs/figures.md`` (or another page: ``docs/evaluation.md``,
``docs/latency.md``) a script replaces its own section of that file, the text between
``<!-- figures:NAME -->`` and ``<!-- /figures:NAME -->``, so no figure there is typed by hand.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Packages the engine and the Python language run on.
PACKAGES = ("lark", "regex")


def _git(*args: str) -> str:
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                             timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip()


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return None


def _load() -> tuple[float, float, float] | None:
    try:
        return os.getloadavg()
    except OSError:
        return None


@dataclass
class RunRecord:
    """The provenance of one benchmark run; `finish` stamps the end."""

    command: str
    commit: str = field(default_factory=lambda: _git("rev-parse", "--short=12", "HEAD"))
    # Uncommitted changes to tracked files, other than the pages in docs/ (the scripts write
    # them; no measured code lives there).
    dirty: bool = field(default_factory=lambda: bool(_git(
        "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)docs/*.md")))
    python: str = field(default_factory=lambda: platform.python_version())
    packages: dict[str, str] = field(default_factory=dict)
    machine: str = field(default_factory=lambda: (
        f"{_cpu_model()}, {os.cpu_count()} cores"
        + (f", {_memory_gib():.0f} GiB" if _memory_gib() else "")
        + f", {platform.system()} {platform.release()}"))
    load_before: tuple[float, float, float] | None = field(default_factory=_load)
    load_after: tuple[float, float, float] | None = None
    started: str = field(default_factory=lambda: time.strftime("%Y-%m-%d %H:%M %Z"))

    def __post_init__(self) -> None:
        for name in PACKAGES:
            try:
                self.packages[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                self.packages[name] = "not installed"

    def finish(self) -> RunRecord:
        self.load_after = _load()
        return self

    def as_dict(self) -> dict:
        return dict(self.__dict__)

    def markdown(self, verb: str = "Measured", load: bool = True) -> str:
        """One paragraph for the figures' section: ``verb`` (e.g. "Rendered" for a script that
        only formats records made earlier) and the load average unless ``load`` is false."""
        def avg(x: tuple[float, float, float] | None) -> str:
            return "unknown" if x is None else " / ".join(f"{v:.2f}" for v in x)

        packages = ", ".join(f"{k} {v}" for k, v in self.packages.items())
        tree = f"`{self.commit}`" + (" with uncommitted changes" if self.dirty else "")
        loads = (f" Load average (1/5/15 min) before the run {avg(self.load_before)},"
                 f" after it {avg(self.load_after)}." if load else "")
        return (
            f"{verb} {self.started} at commit {tree}; Python {self.python}, {packages}; "
            f"{self.machine}.{loads}\n\n```\n{self.command}\n```\n"
        )


def model_packages() -> dict[str, str]:
    """Versions of what model benchmarks run on, for ``RunRecord(packages=...)``."""
    out = {}
    for name in ("llama-cpp-python", "transformers", "torch", "numpy"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def command_line() -> str:
    """The command that ran this script, as typed from the repository root: a benchmark as
    the module it is (``python -m benchmarks.x``, however it was started)."""
    script = Path(sys.argv[0]).resolve()
    try:
        relative = script.relative_to(ROOT)
    except ValueError:
        relative = None
    if relative is not None and relative.parent == Path("benchmarks") and script.suffix == ".py":
        run = ["-m", f"benchmarks.{script.stem}"]
    else:
        run = [str(relative if relative is not None else script)]
    # Paths inside the repository are shown relative to it, as they would be typed there.
    args = [a.replace(f"{ROOT}/", "") for a in sys.argv[1:]]
    return shlex.join([interpreter(), *run, *args])


def interpreter() -> str:
    """The interpreter running this, as typed from the repository root: a benchmark that
    needs vLLM runs under ``.venv-team``'s, not ``.venv``'s; one outside the repository is
    shown as the project's usual ``.venv/bin/python``."""
    exe = Path(sys.executable)  # not resolved: a venv's python is a link to the base one
    try:
        return str(exe.relative_to(ROOT))
    except ValueError:
        return ".venv/bin/python"


def write_section(path: Path, name: str, body: str) -> None:
    """Replace the text between the section's markers in `path` with `body`."""
    begin, end = f"<!-- figures:{name} -->", f"<!-- /figures:{name} -->"
    text = path.read_text(encoding="utf-8")
    if begin not in text or end not in text:
        raise SystemExit(f"{path} has no section {begin} ... {end}")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    path.write_text(f"{head}{begin}\n{body.rstrip()}\n{end}{tail}", encoding="utf-8")


def publish(body: str, record: RunRecord, figures: Path | None, section: str,
            verb: str = "Measured", load: bool = True) -> None:
    """Print a benchmark's tables and its run record, and write both into ``figures``'s
    section when a page is given (how every script puts its figures into docs/); ``verb`` and
    ``load`` as in ``RunRecord.markdown``."""
    stamp = record.markdown(verb, load)
    print(body)
    print()
    print(stamp)
    if figures is not None:
        write_section(figures, section, body.rstrip() + "\n\n" + stamp)


def save_rows(path: Path | None, record: RunRecord, rows: list) -> None:
    """Write the run record and the rows to ``path`` as JSON (nothing when ``None``)."""
    if path is not None:
        path.write_text(json.dumps({"run": record.as_dict(), "rows": rows}, indent=1),
                        encoding="utf-8")
