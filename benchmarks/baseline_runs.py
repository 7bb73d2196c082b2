"""A change against a baseline in one run: the servers of this checkout and of another one
(``--baseline-root``) asked the same things under the same load, what each server recorded of
a request, and the line that names the baseline.

``benchmarks/bench_new_place.py`` and ``benchmarks/bench_rests.py`` compare the server of this
checkout with another's this way (``benchmarks.lsp_session`` starts each in its checkout's
folder, so each runs its own code).
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

from benchmarks.lsp_session import LspSession

ROOT = Path(__file__).resolve().parent.parent


def add_options(p: argparse.ArgumentParser, section: str) -> None:
    """The options every such benchmark takes: the baseline, where its figures and rows go,
    progress and the servers' logs."""
    p.add_argument("--baseline-root", type=Path, default=None,
                   help="another checkout whose server runs the same requests first")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--figures", type=Path, default=None)
    p.add_argument("--section", default=section)
    p.add_argument("--progress", action="store_true")
    p.add_argument("--logs", type=Path, default=None, help="keep the servers' logs here")


def configs(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """``(name, checkout)`` of each server, the baseline first when there is one."""
    return ([("baseline", args.baseline_root)] if args.baseline_root else []) + \
        [("change", ROOT)]


def commit_of(root: Path) -> str:
    out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                         capture_output=True, text=True, check=False)
    return out.stdout.strip() or "unknown"


def baseline_note(args: argparse.Namespace) -> str:
    """The sentence naming the baseline's checkout and commit ("" without one)."""
    if not args.baseline_root:
        return ""
    return (f"Baseline: the server of `{args.baseline_root}` at commit "
            f"`{commit_of(args.baseline_root)}`. ")


async def last_record(session: LspSession) -> dict:
    """The server's record of its latest request with a prompt (``seam/status``), or ``{}``."""
    reply = await session.request("seam/status", {})
    recent = [r for r in reply.get("recent", []) if r.get("prompt_tokens") is not None]
    return recent[-1] if recent else {}
