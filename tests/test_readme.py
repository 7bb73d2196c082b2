"""The README and the user's pages in docs/ keep their promises: a short README that starts with
the two quick-start commands, links that lead somewhere (anchors included, after text moved
between pages), extras and commands that exist.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, ROOT / "docs/user-guide.md", ROOT / "docs/benchmarks.md",
         ROOT / "docs/architecture.md", ROOT / "CHANGELOG.md"]
QUICK_START = ("bash scripts/demo.sh", "bash scripts/test.sh")


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}


def links(page: Path) -> list[str]:
    """The targets of the page's Markdown links (not images, not web addresses)."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return [t for t in re.findall(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)", text)
            if not re.match(r"[a-z]+:", t)]


def test_the_readme_is_short_and_starts_with_the_quick_start() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    first_block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert first_block is not None
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines()]
    assert [c for c in commands if c] == list(QUICK_START)
    assert text.index("## Quick start") < text.index("## Install")
    assert "docs/images/vscode-suggestion.png" in text
    for section in ("## Install", "## VS Code", "## Neovim", "## Models and servers",
                    "## Settings", "## Troubleshooting", "## Privacy"):
        assert section in text, section


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_link_leads_to_a_file_and_heading_that_exist(page: Path) -> None:
    for target in links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        assert file.exists(), f"{page.name}: {target}"
        if anchor and file.suffix == ".md":
            assert anchor in anchors(file), f"{page.name}: {target}"


def test_the_extras_and_the_distribution_named_exist() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = set(project["optional-dependencies"])
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"pip install '?seam(\[| |$)", text, re.M), page.name
        for named in re.findall(r"seam-complete\[([\w,]+)\]", text):
            assert set(named.split(",")) <= extras, (page.name, named)
    assert project["name"] == "seam-complete"


def test_the_commands_the_readme_names_exist() -> None:
    text = README.read_text(encoding="utf-8")
    named = set(re.findall(r"\bseam ([a-z][\w-]+)", text)) - {"serve"}  # `seam serve` below
    done = subprocess.run([sys.executable, "-m", "lsp_server.cli", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    listed = set(re.findall(r"^    ([a-z][\w-]+)\s", done.stdout, re.M)) | {"serve"}
    assert {"complete", "doctor", "team-server"} <= named
    assert named <= listed, named - listed
