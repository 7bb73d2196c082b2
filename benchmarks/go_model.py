"""Middles the bundled model writes into Go holes, constrained by Seam's Go language and not.

Each hole goes through the public path, `fim.api.Engine.complete` with a request whose
``language`` is ``"go"``: the engine's language registry (``fim.languages``) builds the Go
constraint through its language cache, the decoding loop generates the middle, and the final
check parses with Go's grammar.  Every middle is then judged by ``gofmt -e`` on the whole file.

    nice .venv/bin/python -m benchmarks.go_model --cases 40 --json /tmp/go_model.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.go_cases import file_cases, sample  # noqa: E402
from benchmarks.go_corpus import corpus, gofmt_accepts  # noqa: E402
from fim.api import CompletionRequest, Engine  # noqa: E402
from fim.options import Scope  # noqa: E402


def run(engine: Engine, cases: list[dict], max_tokens: int, log=None,  # type: ignore[no-untyped-def]
        rows: list[dict] | None = None, save=None) -> list[dict]:
    """Generate for ``cases`` after those already in ``rows``; ``save(rows)`` after each."""
    rows = list(rows or [])
    for i, case in enumerate(cases):
        if i < len(rows):
            continue
        left, right = case["left"], case["right"]
        row: dict = {"id": case["id"], "true": case["middle"]}
        for mode in ("constrained", "unconstrained"):
            req = CompletionRequest(left, right, mode=mode, max_tokens=max_tokens,
                                    scope=Scope.FREE, language="go")
            t0 = time.perf_counter()
            res = engine.complete(req)
            middle, stop, tokens = res.middle, str(res.stop), res.tokens
            row[mode] = {
                "middle": middle, "stop": stop, "tokens": tokens,
                "seconds": round(time.perf_counter() - t0, 2),
                "parses": middle is not None and gofmt_accepts(left + middle + right),
                "exact": middle is not None and middle == case["middle"],
            }
        rows.append(row)
        if save:
            save(rows)
        if log:
            log(f"{i + 1}/{len(cases)} {case['id']} c={row['constrained']['parses']} "
                f"u={row['unconstrained']['parses']}")
    return rows


def model_cases(n: int, seed: int) -> list[dict]:
    """``n`` held-out cases, half Boundary and half RandSpan, one per file, seeded."""
    files = corpus(fetch=False)
    half = n // 2
    return (sample(file_cases("boundary", files, seed=seed, per_file=1), n - half, seed)
            + sample(file_cases("randspan", files, seed=seed, per_file=1), half, seed))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=40)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--model", default="bundled:qwen2.5-coder-1.5b")
    p.add_argument("--engine", default="llama.cpp")
    p.add_argument("--json", type=Path, required=True,
                   help="rows so far (resumed from when it exists)")
    args = p.parse_args(argv)
    engine = Engine.load(args.model, engine=args.engine)
    cases = model_cases(args.cases, args.seed)
    # Written after every case (generation is slow on a shared CPU), and resumed from.
    done = json.loads(args.json.read_text())["rows"] if args.json.exists() else []
    head = {"model": args.model, "engine": args.engine, "description": engine.backend.description,
            "max_tokens": args.max_tokens, "seed": args.seed, "planned": len(cases)}

    def save(rows: list[dict]) -> None:
        args.json.write_text(json.dumps({**head, "rows": rows}, indent=1))

    run(engine, cases, args.max_tokens, log=lambda s: print(s, file=sys.stderr, flush=True),
        rows=done, save=save)
    return 0


if __name__ == "__main__":
    sys.exit(main())
