"""Held-out Go from real projects, and Go's own parser as the oracle (issue 33).

The Go benchmark needs Go files that people wrote and that Seam's Go grammar was not written
from.  Debian's ``golang-*-dev`` packages carry the sources of real Go projects; this module
pins fourteen of them (different authors and kinds of code), by package name, version and the
sha256 of the ``.deb``, fetches each once with ``apt-get download`` into
``~/.cache/seam/corpus/go`` and reads the ``.go`` files straight out of the archive (a ``.deb``
is an ``ar`` archive whose ``data.tar.*`` member holds the files), never installing anything.

Files kept: under ``/usr/share/gocode/src/``, not ``_test.go`` (test files are mostly tables
of literals, which would weigh the cases towards one kind of code), not under ``testdata/``
or ``vendor/``, not generated ("DO NOT EDIT"), 20 to 3,000 lines, UTF-8, and accepted by
``gofmt -e`` — the oracle every verdict is checked against (the paper keeps only the Python
files ``ast.parse`` accepts).

Tests never download: they build small ``.deb`` archives themselves.

    .venv/bin/python -m benchmarks.go_corpus      # fetch if needed, list projects, files, lines
"""

from __future__ import annotations

import argparse
import hashlib
import io
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

CACHE = Path.home() / ".cache" / "seam" / "corpus" / "go"
SOURCE_ROOT = "usr/share/gocode/src/"
_GENERATED = ("DO NOT EDIT", "Code generated")


@dataclass(frozen=True)
class GoPackage:
    """One Debian package of Go sources: pinned name, version and archive digest."""

    name: str
    version: str
    sha256: str
    author: str
    domain: str

    @property
    def deb(self) -> str:
        """The archive's file name, as ``apt-get download`` writes it."""
        version = self.version.split(":", 1)[-1]
        return f"{self.name}_{version}_all.deb"


#: Debian 12 packages, digests of the archives as downloaded on 2026-11-28.
PACKAGES = (
    GoPackage("golang-github-spf13-cobra-dev", "1.6.1-1",
              "4f5d20855133319beef3c5b49d3c21a0406f270bf94fb4b6f4d406b691283cb2",
              "spf13", "command-line framework"),
    GoPackage("golang-github-burntsushi-toml-dev", "1.2.0-2",
              "eb0bc9f96d02b33034311604f787ca7ab071de026c9abdffa6ae40a63362f7b8",
              "BurntSushi", "TOML lexer, parser, encoder"),
    GoPackage("golang-github-google-uuid-dev", "1.3.0-1",
              "f79ead959ee04842fcb410347e7023a3c4c357c17f77b9bb13cff30ef4353351",
              "Google", "UUID generation and parsing"),
    GoPackage("golang-github-gorilla-mux-dev", "1.8.0-1",
              "0880a4019fe68496a0e0a749c2948c029e489f49edd448bed2fedaba33f848c2",
              "Gorilla", "HTTP router"),
    GoPackage("golang-github-sirupsen-logrus-dev", "1.9.0-1",
              "51fb87b05452e96be38b97c03d5f997f6ce3a144421f911338d6c4ea2e8aa118",
              "Sirupsen", "structured logging"),
    GoPackage("golang-github-mattn-go-runewidth-dev", "0.0.14-1",
              "422dd4fbccebaab51df46ee3c454ddd94b26b0be86c5b4d5a2c13d6555fc834b",
              "mattn", "Unicode display width tables"),
    GoPackage("golang-github-cespare-xxhash-dev", "2.1.1-2",
              "58e371a185bc1c41fefa1eb6eaacd4a39bf8a579645547c12f0121f4fe6daf95",
              "cespare", "hashing"),
    GoPackage("golang-github-dustin-go-humanize-dev", "1.0.0-3",
              "b4d1a9d00e0c8af421a30e683bf36e14ba99fa621d3f698220f9af0420bd330c",
              "dustin", "number and time formatting"),
    GoPackage("golang-github-hashicorp-golang-lru-dev", "0.5.4-2",
              "060ce36c6213ec4084c0604440ba0a62ebd66a64902dbb71d3422f5eb5719141",
              "HashiCorp", "LRU and ARC caches"),
    GoPackage("golang-gopkg-yaml.v3-dev", "3.0.1-3",
              "3ad4febd49700bc670f0f143f3291ecab4e032cc227d69521bacadbc493cfbbe",
              "Canonical", "YAML parser and emitter"),
    GoPackage("golang-github-gobwas-glob-dev", "0.2.3+git20180208.19c076c-2",
              "a3d0ba6c1ff0760f85ecd740483926bc2bb2738735ad93f79dfc69c4f69f9d7f",
              "gobwas", "glob compiler and matchers"),
    GoPackage("golang-github-tidwall-gjson-dev", "1.14.4-2",
              "371a327817349c0f7cca6b1f27e202f31a658b18e1ad5e42847de5694f591c13",
              "tidwall", "JSON path queries"),
    GoPackage("golang-github-google-btree-dev", "1.0.0-1",
              "7a5fec774bb6e904c22436e1481aad7eb4c23d82ad3832d28ffc4e79379d9ce8",
              "Google", "in-memory B-tree"),
    GoPackage("golang-github-pmezard-go-difflib-dev", "1.0.0-3",
              "e40784b6b23b94127c81010189ad0bc582c20b3bbdc145aa8a52c9622f8192f9",
              "pmezard", "sequence diffs"),
)


@dataclass(frozen=True)
class GoFile:
    """One Go source file of a project."""

    package: str
    path: str  # below usr/share/gocode/src/, e.g. ``github.com/spf13/cobra/command.go``
    text: str


class CorpusError(RuntimeError):
    """An archive is missing, does not match its pinned digest, or is not a ``.deb``."""


def gofmt_accepts(text: str, gofmt: str | None = None) -> bool:
    """Whether Go's own parser accepts ``text`` as a source file (``gofmt -e`` exits 0).

    ``-e`` reports all errors rather than the first ten; only the exit status matters here.
    The text goes in as a file, not on stdin: on stdin gofmt also accepts a fragment (a
    declaration or statement list without a package clause), which is no Go file.  Raises
    :class:`CorpusError` when there is no ``gofmt`` (an oracle that cannot run must not read
    as "rejected").
    """
    exe = gofmt or shutil.which("gofmt")
    if exe is None or not Path(exe).exists():
        raise CorpusError(f"gofmt is not installed ({exe or 'not on PATH'}; Debian: "
                          "apt-get install golang-go)")
    with tempfile.TemporaryDirectory(prefix="seam-gofmt-") as tmp:
        path = Path(tmp) / "hole.go"
        path.write_text(text, encoding="utf-8")
        proc = subprocess.run([exe, "-e", str(path)], capture_output=True, timeout=60)
    return proc.returncode == 0


def archive(pkg: GoPackage, cache: Path = CACHE, fetch: bool = True) -> Path:
    """The package's ``.deb`` in ``cache`` (downloaded when missing), its digest checked."""
    path = cache / pkg.deb
    if not path.exists():
        if not fetch:
            raise CorpusError(f"{pkg.deb} is not in {cache}")
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(["apt-get", "download", "-q", f"{pkg.name}={pkg.version}"], cwd=cache,
                       check=True, capture_output=True)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != pkg.sha256:
        raise CorpusError(f"{path} has sha256 {digest}, pinned {pkg.sha256}")
    return path


def ar_members(data: bytes) -> dict[str, bytes]:
    """The members of an ``ar`` archive (the ``.deb`` container) by name."""
    if not data.startswith(b"!<arch>\n"):
        raise CorpusError("not an ar archive")
    out: dict[str, bytes] = {}
    pos = 8
    while pos + 60 <= len(data):
        header = data[pos:pos + 60]
        name = header[:16].decode("ascii").strip().rstrip("/")
        size = int(header[48:58].decode("ascii").strip())
        out[name] = data[pos + 60:pos + 60 + size]
        pos += 60 + size + (size & 1)  # members are padded to an even offset
    return out


def _go_members(deb: Path) -> list[tuple[str, bytes]]:
    members = ar_members(deb.read_bytes())
    data_name = next((n for n in members if n.startswith("data.tar")), None)
    if data_name is None:
        raise CorpusError(f"{deb} has no data.tar member")
    out = []
    with tarfile.open(fileobj=io.BytesIO(members[data_name])) as tar:
        for m in tar.getmembers():
            name = m.name.removeprefix("./")
            if m.isfile() and name.startswith(SOURCE_ROOT) and name.endswith(".go"):
                f = tar.extractfile(m)
                if f is not None:
                    out.append((name[len(SOURCE_ROOT):], f.read()))
    return out


def usable(path: str, text: str, min_lines: int = 20, max_lines: int = 3000) -> bool:
    """A file a person wrote, of a size to cut cases from (before the gofmt check)."""
    parts = path.split("/")
    if path.endswith("_test.go") or "testdata" in parts or "vendor" in parts:
        return False
    lines = text.count("\n")
    return min_lines <= lines <= max_lines and not any(g in text[:2000] for g in _GENERATED)


def read_archive(deb: Path, package: str, gofmt: str | None = None) -> list[GoFile]:
    """The usable Go files in the ``.deb`` at ``deb`` that gofmt accepts, sorted by path."""
    out = []
    for name, data in _go_members(deb):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if usable(name, text) and gofmt_accepts(text, gofmt):
            out.append(GoFile(package, name, text))
    return sorted(out, key=lambda f: f.path)


def corpus(cache: Path = CACHE, fetch: bool = True,
           packages: tuple[GoPackage, ...] = PACKAGES) -> list[GoFile]:
    """Every usable file of every pinned package, packages in their listed order."""
    return [f for pkg in packages for f in read_archive(archive(pkg, cache, fetch), pkg.name)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cache", type=Path, default=CACHE)
    p.add_argument("--offline", action="store_true", help="fail instead of downloading")
    args = p.parse_args(argv)
    print("| package | version | author | kind of code | files | lines |")
    print("| --- | --- | --- | --- | --- | --- |")
    total_files = total_lines = 0
    for pkg in PACKAGES:
        files = read_archive(archive(pkg, args.cache, not args.offline), pkg.name)
        lines = sum(f.text.count("\n") for f in files)
        total_files, total_lines = total_files + len(files), total_lines + lines
        print(f"| {pkg.name} | {pkg.version} | {pkg.author} | {pkg.domain} | {len(files)} | "
              f"{lines:,} |")
    print(f"| total | | | | {total_files} | {total_lines:,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
