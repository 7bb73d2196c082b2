"""The editors' documentation against what the editors really offer.

The VS Code extension's settings live in its manifest (package.json, contributes.configuration);
its README documents them in tables. A setting added to one and not the other, or a default
changed in one, would leave users reading the wrong thing, so the two are compared here.
"""

from __future__ import annotations

import json
import re
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
