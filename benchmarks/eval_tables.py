"""The `seam eval` tables of a committed records file, written into a page's figures section.

A `seam eval` run of the bundled model takes hours on the project's CPU, and its prompts depend
on the code that built them, so the records of a published run are kept in `docs/eval/` and its
tables are rendered from them rather than typed: this script reads a `--records` file with
`fim.eval.evaluation.load_records`, summarises it with `summarize` and prints `format_markdown`'s
tables (the layout `seam eval --report-only --markdown` prints), followed by one line of
figures over all datasets and a paragraph saying where the records came from (`--made-at`) and
at which commit the tables were rendered.  It measures nothing itself.

    .venv/bin/python -m benchmarks.eval_tables docs/eval/records-96.jsonl --cases 100 \\
        --made-at "..." --figures docs/evaluation.md --section paper-96
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.report import (  # noqa: E402
    ROOT,
    RunRecord,
    command_line,
    model_packages,
    write_section,
)
from benchmarks.stats import percentile  # noqa: E402
from fim.eval.evaluation import format_markdown, load_records, summarize  # noqa: E402


def first_cases(records: list[dict], cases: int | None) -> list[dict]:
    """The records of the first ``cases`` case ids of each dataset, in the file's order."""
    if cases is None:
        return records
    kept: dict[str, list[str]] = {}
    for r in records:
        ids = kept.setdefault(r["dataset"], [])
        if r["id"] not in ids and len(ids) < cases:
            ids.append(r["id"])
    keep = {i for ids in kept.values() for i in ids}
    return [r for r in records if r["id"] in keep]


def overall(records: list[dict]) -> str:
    """One line over every dataset: what the constrained mode returned and what it cost."""
    # `summarize` over the records relabelled as one dataset gives the pooled figures.
    pooled = next(iter(summarize([{**r, "dataset": "all"} for r in records]).values()))
    latest = {(r["id"], r["mode"]): r for r in records}
    constrained = [r for (_, mode), r in latest.items() if mode == "constrained"]
    returned = [r for r in constrained if r["middle"] is not None]
    unparsable = len(pooled["constrained_returned_unparsable"])
    errors = sum(bool(r.get("error")) for r in latest.values())
    c, u = pooled["modes"]["constrained"], pooled["modes"]["unconstrained"]
    setup = [r["setup_ms"] for r in constrained]
    p90 = percentile(setup, 0.9) if setup else float("nan")
    modes = ", ".join(f"{n} `{m}`" for m, n in pooled["language_modes"].items())
    return (
        f"Over all {pooled['cases']} cases: {len(returned)} constrained middles returned, "
        f"{unparsable} of them unparsable; records with an `error`: {errors}; "
        f"unconstrained ✓ but constrained ✗: "
        f"{len(pooled['unconstrained_ok_constrained_fail'])}; language modes {modes}; "
        f"constraint time over {round(c['mean_tokens'] * pooled['cases']):,} constrained "
        f"tokens: mean {c['constraint_ms_per_token']:.2f} ms/token, median over cases "
        f"{c['constraint_ms_per_token_median']:.2f} ms/token, against "
        f"{u['model_ms_per_token']:.0f} ms/token of model time unconstrained; constraint setup "
        f"(`FimLanguage` for the whole file) median {c['setup_ms_median']:.0f} ms, "
        f"p90 {p90:.0f} ms.\n"
    )


def provenance(path: Path, records: list[dict], made_at: str | None) -> str:
    """The sentence that says the tables come from committed records, and who made them."""
    try:
        shown = path.resolve().relative_to(ROOT)
    except ValueError:
        shown = path
    ids = {r["id"] for r in records}
    made = f" The records were made by {made_at}." if made_at else ""
    return (f"Rendered from the {len(records)} records of {len(ids)} cases in `{shown}`, not "
            f"measured by the command below.{made} ")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("records", type=Path, help="a `seam eval --records` JSONL file")
    p.add_argument("--cases", type=int, default=None,
                   help="only the first N cases of each dataset in the file (default: all)")
    p.add_argument("--made-at", default=None,
                   help="how and at which commit the records were made, printed in the "
                        "provenance paragraph (Markdown)")
    p.add_argument("--figures", type=Path, default=None,
                   help="write the tables into this page's section (see --section)")
    p.add_argument("--section", default=None, help="the figures section to write")
    args = p.parse_args(argv)
    if args.figures and not args.section:
        p.error("--figures needs --section")
    record = RunRecord(command_line(), packages=model_packages())
    records = first_cases(load_records(args.records), args.cases)
    if not records:
        p.error(f"no records in {args.records}")
    out = format_markdown(summarize(records)).rstrip() + "\n\n" + overall(records)
    record.finish()
    note = provenance(args.records, records, args.made_at) + record.markdown("Rendered", load=False)
    print(out)
    print(note)
    if args.figures:
        write_section(args.figures, args.section, out + "\n" + note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
