"""How much of the file the first request reads, left and right of the cursor, against what it
writes: the paired run's cursors, one fixed prompt per window, constrained greedy decoding.

Issue 29 asked for a right window measured in lines instead of 64 tokens, and for the wide
window's quality at a new place. The server's first window at a new place is 128 left and 64
right tokens on this project's two-core machine (``lsp_server.request_plan.first_window``);
this benchmark holds everything else fixed (no project context, no time budget, the bundled
model) and changes only the window: ``--windows`` lists ``LEFTxRIGHT`` token pairs, and a right
side written ``Nl`` reads N whole lines below the cursor (at most ``--line-cap`` tokens).  The
left side starts at a line start (``AnchorPlanner.fit``), the right side ends at a line end
(``fim.templates``).  A window ending in ``+o`` also carries the document's outline above the
prompt's start (``benchmarks.scope_outline``, an experiment the server does not send: the lines
that open the scopes around the start and bind names in them, as a file of the document's own
path before it).  Scored as the paired run scores: the inserted text, an empty line on its
first line.

    .venv/bin/python -m benchmarks.prompt_windows --figures docs/usefulness.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.held_out import EMPTY, MID_PER_PLACE  # noqa: E402
from benchmarks.report import (  # noqa: E402
    RunRecord,
    command_line,
    model_packages,
    publish,
    save_rows,
)
from benchmarks.same_prompt_modes import ask, cursors, judged_text  # noqa: E402
from fim.api import Engine  # noqa: E402
from fim.options import Mode  # noqa: E402
from lsp_server.measures import TokenCount  # noqa: E402
from lsp_server.prompt_anchors import AnchorPlanner  # noqa: E402

KINDS = {"empty": ("empty line", True), "mid": ("mid-line", False)}


@dataclass(frozen=True)
class Window:
    """Left tokens, and right tokens or right lines (``lines``: ``right`` counts lines);
    ``outline``: with the document's outline."""

    left: int
    right: int
    lines: bool = False
    outline: bool = False

    @classmethod
    def parse(cls, text: str) -> Window:
        outline = text.endswith("+o")
        left, _, right = text.removesuffix("+o").partition("x")
        lines = right.endswith("l")
        window = cls(int(left), int(right.rstrip("l")), lines, outline)
        if window.left < 1 or window.right < 0:
            raise ValueError(f"not a window: {text!r}")
        return window

    @property
    def name(self) -> str:
        return f"{self.left}x{self.right}{'l' if self.lines else ''}{'+o' if self.outline else ''}"

    def right_tokens(self, count, right: str, cap: int) -> int:
        """The right side's token budget at a cursor whose right text is ``right``."""
        if not self.lines:
            return self.right
        end = 0
        for _ in range(self.right):
            nl = right.find("\n", end)
            end = len(right) if nl < 0 else nl + 1
        # A little slack: a line break may share its token with the next line's indentation.
        return min(cap, count(right[:end]) + 2)


def table(rows: list[dict], windows: list[Window]) -> str:
    lines = ["| corpus | cursors | n | " + " | ".join(w.name for w in windows) + " |",
             "|---|---|---:|" + "---|" * len(windows)]
    for corpus in dict.fromkeys(r["corpus"] for r in rows):
        for kind, empty in KINDS.values():
            cells, n = [], 0
            for w in windows:
                got = [r for r in rows if r["corpus"] == corpus and r["window"] == w.name
                       and (r["place"] == "empty_line") == empty]
                if not got:
                    break
                n = len(got)
                cells.append(f"{statistics.fmean(r['exact'] for r in got):.0%} / "
                             f"{statistics.fmean(r['edit_similarity'] for r in got):.3f}")
            if len(cells) == len(windows):
                lines.append(f"| {corpus} | {kind} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="bundled:qwen2.5-coder-1.5b")
    p.add_argument("--corpora", default="fresh,fresh2")
    p.add_argument("--kinds", default="empty", help="cursor kinds: empty, mid (comma-separated)")
    p.add_argument("--windows", default="128x64,128x128,128x256,128x16l,256x64,512x64",
                   help="LEFTxRIGHT token pairs; RIGHT as Nl: N lines below the cursor")
    p.add_argument("--line-cap", type=int, default=512, help="most tokens of a lines window")
    p.add_argument("--mid-per-place", type=int, default=MID_PER_PLACE)
    p.add_argument("--empty", type=int, default=EMPTY)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--figures", type=Path, default=None)
    p.add_argument("--section", default="prompt-windows")
    p.add_argument("--report-only", action="store_true",
                   help="render the table from the rows in --json (no model runs)")
    args = p.parse_args(argv)
    windows = [Window.parse(w) for w in args.windows.split(",") if w]
    kinds = {KINDS[k][1] for k in args.kinds.split(",") if k}
    if args.report_only:
        if args.json is None:
            p.error("--report-only reads the rows from --json")
        saved = json.loads(args.json.read_text(encoding="utf-8"))
        rows = saved["rows"]
        names = list(dict.fromkeys(r["window"] for r in rows))  # in the order they ran
        body = (_head(args.line_cap) + "\n\n" + table(rows, [Window.parse(n) for n in names])
                + f"\n\nRendered from the rows in `{args.json}` by `{command_line()}`; "
                "measured as follows.")
        publish(body, RunRecord(**saved["run"]), args.figures, args.section)
        return 0
    record = RunRecord(command_line(), packages=model_packages())
    engine = Engine.load(args.model)
    count = TokenCount(engine.tokenizer)
    widest = max(w.left for w in windows)
    anchors = AnchorPlanner(count, widest, widest)
    rows = []
    for cur in cursors([c for c in args.corpora.split(",") if c], args.mid_per_place,
                       args.empty, args.seed):
        if (cur.place.value == "empty_line") not in kinds:
            continue
        right = cur.text[cur.start:]
        for w in windows:
            row = ask(engine, anchors, cur, w.left, w.right_tokens(count, right, args.line_cap),
                      Mode.CONSTRAINED, outline=w.outline)
            rows.append({**row, "window": w.name})
            print(f"{w.name:9} {cur.id[:60]:60} {'=' if row['exact'] else ' '} "
                  f"{judged_text(row)!r:.50}", file=sys.stderr, flush=True)
    record.finish()
    save_rows(args.json, record, rows)
    publish(_head(args.line_cap) + "\n\n" + table(rows, windows), record, args.figures,
            args.section)
    return 0


def _head(line_cap: int) -> str:
    return ("The paired run's cursors, one prompt per window (`LEFTxRIGHT`: left tokens from a "
            "line start, right tokens to a line end; `Nl`: N whole lines below the cursor, at "
            f"most {line_cap} tokens; `+o`: with the document's outline above the "
            "prompt's start), no other project context, constrained greedy, no time "
            "budget; cells: exact / edit similarity.")


if __name__ == "__main__":
    raise SystemExit(main())
