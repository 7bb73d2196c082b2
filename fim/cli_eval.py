"""``seam eval``: rebuild Stack-Boundary and Stack-RandSpan from a folder of Python files, run
the paper's experiment on them, write the JSON report and print the tables.

Ctrl-C ends the run with exit code 130 and a report of the finished cases (with
``--records``, every finished case is already on disk, and a later run resumes from it).
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fim.cli_args import UsageError
from fim.eval import datasets

if TYPE_CHECKING:  # the engine's modules load only once there is work for them
    from fim.engine_interface import CompletionEngine


def cmd_eval(args: Any, load: Callable[[], CompletionEngine]) -> int:
    """Build the cases, run them with the engine ``load()`` returns (or read ``--records``),
    write the report and print the tables; 130 when interrupted."""
    from fim.eval import evaluation

    cases = eval_cases(args)
    started = time.time()
    records, engine, interrupted = _eval_records(args, cases, load)
    ids = {c["id"] for c in cases}
    records = [r for r in records if r["id"] in ids]
    summary = evaluation.summarize(records)
    report = _eval_report(args, summary, records, engine, time.time() - started, interrupted)
    args.report.write_text(json.dumps(report, indent=1), encoding="utf-8")
    fmt = evaluation.format_markdown if args.markdown else evaluation.format_summary
    print(fmt(summary))
    print(f"report: {args.report}")
    if interrupted:
        print("seam: interrupted; the report covers the finished cases", file=sys.stderr)
        return 130
    return 0


def eval_cases(args: Any) -> list[dict]:
    """The cases of ``--datasets``, interleaved so that an interrupted run has cases of
    each."""
    names = [d.strip() for d in args.datasets.split(",") if d.strip()]
    for d in names:
        if d not in datasets.DATASETS:
            raise UsageError(f"unknown dataset {d!r}; use {', '.join(datasets.DATASETS)}")
    try:
        per_dataset = [datasets.build_cases(
            d, args.cases, args.folder, seed=args.seed, per_file=args.per_file,
            max_file_chars=args.max_file_chars) for d in names]
    except FileNotFoundError as err:
        raise UsageError(str(err)) from None
    cases = [c for group in itertools.zip_longest(*per_dataset) for c in group if c]
    if not cases:
        raise UsageError("the folder yields no cases (no parseable .py files)")
    return cases


def _eval_records(args: Any, cases: list[dict], load: Callable[[], CompletionEngine],
                  ) -> tuple[list[dict], CompletionEngine | None, bool]:
    """``(records, engine, interrupted)``: the records of ``--records`` alone
    (``--report-only``: no engine), or of running the cases with a loaded engine."""
    from tqdm import tqdm

    from fim.editor_policy import CPU_CONTEXT_TOKENS
    from fim.eval import evaluation

    if args.report_only:
        if args.records is None:
            raise UsageError("--report-only needs --records FILE")
        return evaluation.load_records(args.records), None, False
    engine = load()
    bar = tqdm(total=len(cases), desc="eval", file=sys.stderr, disable=args.quiet)
    try:
        records = evaluation.run(
            engine, cases, max_tokens=args.max_tokens, top_k=args.top_k,
            scope=args.scope, records_path=args.records,
            progress=lambda _case: bar.update(1), policy=args.policy,
            context_tokens=args.context_tokens or CPU_CONTEXT_TOKENS)
    except KeyboardInterrupt:
        # Report what finished: every finished case is already in the records file.
        return (evaluation.load_records(args.records) if args.records else []), engine, True
    finally:
        bar.close()
    return records, engine, False


def _eval_report(args: Any, summary: dict, records: list[dict],
                 engine: CompletionEngine | None,
                 seconds: float, interrupted: bool) -> dict:
    """The JSON report: the run's configuration and provenance, the summary, the records."""
    from fim.eval import evaluation

    config = {
        "model": args.model, "engine": args.engine, "policy": args.policy,
        "max_tokens": args.max_tokens,
        "top_k": args.top_k, "scope": args.scope, "seed": args.seed,
        "per_file": args.per_file, "cases_per_dataset": args.cases,
        "left_share": args.left_share,
        "folder": str(args.folder or datasets.default_folder()),
        "seconds": round(seconds, 1),
        "interrupted": interrupted,
        **evaluation.provenance(),
    }
    if engine is not None:
        config.update({
            "engine": str(engine.runtime.engine), "device": engine.runtime.device,
            "runtime": engine.runtime.description,
            "template": engine.template.name, "context_tokens": engine.window,
        })
    return {"config": config, "summary": summary, "records": records}
