"""SynCode on the same Go prefix-only holes, in its own venv, judged by ``gofmt -e``.

Writes the holes (with the same corrupted middles `benchmarks.go_seam` checks) to a JSON
file, runs `benchmarks/go_syncode_runner.py` with .venv-syncode's interpreter (made by
scripts/setup_syncode.sh; .venv never imports syncode) and scores its verdicts: accepted true
middles, and complete verdicts against gofmt.  SynCode keeps its parser tables and mask
stores under ``SYNCODE_CACHE``, pointed at ``~/.cache/seam/syncode/``.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.go_corpus import gofmt_accepts
from benchmarks.go_seam import TOKENIZER_JSON, corrupt

ROOT = Path(__file__).resolve().parent.parent
VENV_PYTHON = ROOT / ".venv-syncode" / "bin" / "python"
RUNNER = Path(__file__).resolve().parent / "go_syncode_runner.py"
CACHE = Path.home() / ".cache" / "seam" / "syncode"


@dataclass
class SynCodeRun:
    """SynCode's verdicts on a set of holes, scored."""

    version: str = ""
    parser_s: float = 0.0
    cases: int = 0
    accepted: int = 0
    misses: list[str] = field(default_factory=list)
    checked: int = 0
    unsound: list[str] = field(default_factory=list)
    missed_complete: list[str] = field(default_factory=list)
    setup_ms: list[float] = field(default_factory=list)
    token_ms: list[float] = field(default_factory=list)


def corrupted_texts(holes: list[dict], corruptions: int, seed: int) -> list[list[str]]:
    """The non-true middles of each hole, drawn exactly as `go_seam.measure` draws them."""
    rng = random.Random(f"{seed}:corrupt")
    out = []
    for h in holes:
        hole = h.get("hole", len(h["middle"]))
        out.append([corrupt(h["middle"][:hole], rng) + h["middle"][hole:]
                    for _ in range(corruptions)])
    return out


def available() -> bool:
    return VENV_PYTHON.exists()


def run_syncode(holes: list[dict], corruptions: int, seed: int, *, tokens: bool = True,
                timeout: float = 3600, gofmt: str | None = None) -> SynCodeRun:
    """SynCode's verdicts on ``holes`` (prefix-only: ``right`` empty), scored with gofmt."""
    if not available():
        raise FileNotFoundError(f"{VENV_PYTHON} is missing: run scripts/setup_syncode.sh")
    others = corrupted_texts(holes, corruptions, seed)
    job = {"tokenizer": str(TOKENIZER_JSON) if tokens and TOKENIZER_JSON.exists() else None,
           "holes": [{"id": h["id"], "left": h["left"], "middle": h["middle"],
                      "hole": h.get("hole", len(h["middle"])),
                      "corruptions": [h["left"] + m for m in ms]}
                     for h, ms in zip(holes, others, strict=True)]}
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(job, f)
    try:
        env = {**os.environ, "SYNCODE_CACHE": f"{CACHE}/", "HF_CACHE": f"{CACHE}/",
               "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "TOKENIZERS_PARALLELISM": "false"}
        proc = subprocess.run([str(VENV_PYTHON), str(RUNNER), f.name], cwd=CACHE, env=env,
                              capture_output=True, text=True, timeout=timeout)
    finally:
        os.unlink(f.name)
    if proc.returncode != 0:
        raise RuntimeError(f"the SynCode runner failed:\n{proc.stderr[-3000:]}")
    return score(json.loads(proc.stdout), holes, others, gofmt)


def score(out: dict, holes: list[dict], others: list[list[str]],
          gofmt: str | None = None) -> SynCodeRun:
    """Count the runner's verdicts against the true middles and gofmt."""
    run = SynCodeRun(version=out["syncode"], parser_s=out["parser_s"])
    for h, ms, got in zip(holes, others, out["holes"], strict=True):
        run.cases += 1
        run.setup_ms.append(got["setup_ms"])
        run.token_ms += got["token_ms"]
        if got["rejected_at"] is not None:
            k = got["rejected_at"]
            run.misses.append(f"{h['id']}: rejected at {k} {h['middle'][:k + 1][-60:]!r}")
        elif not got["complete"]:
            run.misses.append(f"{h['id']}: not complete at the end")
        else:
            run.accepted += 1
        verdicts = [got["rejected_at"] is None and got["complete"]] + got["corruptions"]
        for k, (m, v) in enumerate(zip([h["middle"]] + ms, verdicts, strict=True)):
            truth = gofmt_accepts(h["left"] + m, gofmt)
            run.checked += 1
            where = f"{h['id']} ({'true' if k == 0 else 'corrupted'} middle {m[:80]!r})"
            if v and not truth:
                run.unsound.append(where)
            elif truth and not v:
                run.missed_complete.append(where)
    return run
