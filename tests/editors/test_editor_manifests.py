"""The editors' documentation against what the editors really offer.

The VS Code extension's settings live in its manifest (package.json, contributes.configuration);
its README documents them in tables. A setting added to one and not the other, or a default
changed in one, would leave users reading the wrong thing, so the two are compared here; and
the Neovim README's table of server settings against the same manifest, since both editors
send the same settings to the same server.
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VSCODE = ROOT / "editors" / "vscode"

# A row of a settings table: | `seam.key` | `default` | meaning |
ROW = re.compile(r"^\| `(seam\.[\w.]+)` \| `(.*?)` \| (.+) \|$")


def _manifest_settings() -> dict[str, dict]:
    manifest = json.loads((VSCODE / "package.json").read_text())
    return manifest["contributes"]["configuration"]["properties"]


def _readme_rows() -> dict[str, tuple[str, str]]:
    rows: dict[str, tuple[str, str]] = {}
    for line in (VSCODE / "README.md").read_text().splitlines():
        m = ROW.match(line)
        if m:
            assert m.group(1) not in rows, f"{m.group(1)} is documented twice"
            rows[m.group(1)] = (m.group(2), m.group(3))
    return rows


def _shown(default: object) -> str:
    """A default as the README writes it: strings bare (empty as ""), the rest as JSON."""
    if isinstance(default, str) and default:
        return default
    return json.dumps(default)


def test_every_vscode_setting_is_documented_and_nothing_else() -> None:
    manifest, readme = _manifest_settings(), _readme_rows()
    missing = sorted(set(manifest) - set(readme))
    stale = sorted(set(readme) - set(manifest))
    assert not missing, f"settings in package.json missing from editors/vscode/README.md: {missing}"
    assert not stale, f"settings in editors/vscode/README.md not in package.json: {stale}"


def test_vscode_readme_defaults_match_the_manifest() -> None:
    manifest, readme = _manifest_settings(), _readme_rows()
    wrong = {key: (readme[key][0], _shown(spec.get("default")))
             for key, spec in manifest.items()
             if key in readme and readme[key][0] != _shown(spec.get("default"))}
    assert not wrong, f"README default vs package.json default: {wrong}"


def test_user_settings_only_is_said_of_exactly_the_machine_scoped_settings() -> None:
    """A setting VS Code never takes from a workspace must say so in the README, and one it
    does take must not claim otherwise."""
    manifest, readme = _manifest_settings(), _readme_rows()
    for key, spec in manifest.items():
        if key not in readme:
            continue  # reported by the test above
        says = "user settings only" in readme[key][1]
        assert says == (spec.get("scope") == "machine"), (key, spec.get("scope"), readme[key][1])


# Settings of the VS Code extension itself, which the server never sees.
EXTENSION_ONLY = {"seam.completionItems", "seam.server.python", "seam.server.command",
                  "seam.trustRemoteCode"}
NVIM_ROW = re.compile(r"^\| `(\w+)` \| `.*?` \| .+ \|$")


def test_nvim_readme_lists_the_same_server_settings_as_vscode() -> None:
    """Both editors send the same section `seam` to the same server: the Neovim README's table
    of server settings must name exactly the server settings VS Code's manifest has."""
    text = (ROOT / "editors" / "nvim" / "README.md").read_text()
    section = text.split("## Server settings", 1)[1].split("\n## ", 1)[0]
    nvim = {m.group(1) for line in section.splitlines() if (m := NVIM_ROW.match(line))}
    vscode = {key.removeprefix("seam.") for key in _manifest_settings()} \
        - {key.removeprefix("seam.") for key in EXTENSION_ONLY}
    assert nvim == vscode, {"only in Neovim's README": sorted(nvim - vscode),
                            "only in VS Code's manifest": sorted(vscode - nvim)}


def test_the_extension_license_is_the_repositorys_copied_at_package_time() -> None:
    """One LICENSE in git (the root's): `npm run package` copies it into editors/vscode, where
    it is ignored, and nothing packages with --skip-license."""
    scripts = json.loads((VSCODE / "package.json").read_text())["scripts"]
    assert "../../LICENSE" in scripts["license"] and "'LICENSE'" in scripts["license"], scripts
    assert scripts["package"].startswith("npm run license && vsce package"), scripts
    for text in (*scripts.values(), (ROOT / "scripts" / "build_vscode.sh").read_text()):
        assert "--skip-license" not in text
    tracked = subprocess.run(["git", "ls-files", "editors/vscode/LICENSE"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
    assert tracked == "", "editors/vscode/LICENSE is a second copy of the root LICENSE in git"
    ignored = subprocess.run(["git", "check-ignore", "-q", "editors/vscode/LICENSE"], cwd=ROOT)
    assert ignored.returncode == 0, "the copied LICENSE must be git-ignored"


def test_the_python_package_names_the_same_repository_as_the_editors() -> None:
    manifest = json.loads((VSCODE / "package.json").read_text())
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]
    repository = manifest["repository"]["url"]
    assert urls["Repository"] == repository, (urls, repository)
    assert urls["Issues"] == manifest["bugs"]["url"]
    home = repository.removesuffix(".git")
    assert urls["Homepage"] == home and manifest["homepage"].startswith(home + "/")
    for url in urls.values():
        assert url.startswith(home), url
    # The Neovim plugin installs from the same repository.
    nvim = (ROOT / "editors" / "nvim" / "README.md").read_text()
    assert f'vim.pack.add({{ "{home}" }})' in nvim
    owner_name = home.removeprefix("https://github.com/")
    assert f'"{owner_name}",' in (ROOT / "editors" / "nvim" / "lazy.lua").read_text()
    # Files the package's links point at exist in the repository.
    for url in (urls["Documentation"], urls["Changelog"]):
        assert (ROOT / url.split("/blob/main/", 1)[1]).is_file(), url
