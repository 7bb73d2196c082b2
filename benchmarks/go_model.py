"""Middles the bundled model writes into Go holes, constrained by Seam's Go language and not.

`fim.api.Engine` with ``language_factory`` set to `go_language.FimLanguage.for_go` builds the
Go constraint through the engine's own language cache, and its decoding loop generates the
middle.  The engine's final check (``Engine._check``) still parses with Python's parser (issue
33: no hook yet for a language's own check; see docs/go.md), and in constrained mode it would
cut a Go middle to its longest Python-parsable prefix, so the constrained middle is taken from
the decoding loop as `Engine._complete` runs it, before that check: the engine's language
cache, prompt and decode, nothing else.  Unconstrained middles go through `Engine.complete`
unchanged (its check never alters an unconstrained middle).  Every middle is then judged by
``gofmt -e`` on the whole file.

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
from fim import decoding  # noqa: E402
from fim.api import CompletionRequest, Engine  # noqa: E402
from fim.options import Scope  # noqa: E402
from quotient.constraint import Constraint  # noqa: E402


def go_language(left: str, right: str, scope: Scope | str) -> Constraint:
    """The engine's language factory for Go files."""
    from go_language import FimLanguage

    return FimLanguage.for_go(left, right, scope)


def constrained_middle(engine: Engine, req: CompletionRequest) -> tuple[str | None, str, int]:
    """``(middle, stop, tokens)`` of the engine's constrained decode, before its final check."""
    entry, state, _mode, prompt = engine._prepare(req)
    out = decoding.decode(engine._setup, prompt.ids, prompt.healed, req.decode_options(None),
                          state, entry.cache if entry else None)
    return out.middle, str(out.stop), out.tokens


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
                                    scope=Scope.FREE)
            t0 = time.perf_counter()
            if mode == "constrained":
                middle, stop, tokens = constrained_middle(engine, req)
            else:
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
    engine = Engine.load(args.model, engine=args.engine, language_factory=go_language)
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
