"""Go's own parser as ground truth: `gofmt -e` (Debian's golang-go, installed by
scripts/setup.sh), and the Go standard library's sources as real Go files."""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path

import pytest

GOFMT = shutil.which("gofmt")
needs_gofmt = pytest.mark.skipif(
    GOFMT is None, reason="gofmt is missing: install Debian's golang-go (scripts/setup.sh does "
    "it when run as root) to compare Seam's Go language with Go's own parser")


@functools.lru_cache(maxsize=4096)
def gofmt_accepts(text: str) -> bool:
    """Whether `gofmt -e` parses `text` as a whole Go file without an error.

    The text is passed as the file ``/dev/stdin``: gofmt reading plain stdin also accepts
    fragments (a declaration or statement list without a package clause)."""
    assert GOFMT is not None
    done = subprocess.run([GOFMT, "-e", "/dev/stdin"],
                          input=text.encode("utf-8", "surrogatepass"),
                          capture_output=True, timeout=60, check=False)
    return done.returncode == 0


def go_sources() -> list[Path]:
    """The standard library's Go files shipped with golang-go, outside testdata (which holds
    files with deliberate errors), sorted; empty when Go is not installed."""
    roots = sorted(Path("/usr/lib").glob("go-1.*/src"))
    if GOFMT is not None:
        real = Path(GOFMT).resolve().parent.parent / "src"
        roots = [real] if real.is_dir() else roots
    if not roots:
        return []
    return sorted(p for p in roots[-1].rglob("*.go") if "testdata" not in p.parts)


def needs_sources() -> list[Path]:
    """`go_sources()`, or skip the test with the reason."""
    files = go_sources()
    if not files:
        pytest.skip("the Go standard library's sources are missing: install Debian's golang-go")
    return files
