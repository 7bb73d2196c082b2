"""Bytes per constrained request the ``vllm`` engine sends, before and after the windows.

Until the constraint's windows (``fim.vllm.context``), a constrained request carried the whole
file in ``seam_left``/``seam_right`` besides the prompt; now it carries the windows the
server's constraint reads.  This script builds the request body ``VllmEngine.body`` sends for
each of the team quality benchmark's dev cases (``benchmarks/vllm_quality.py``: Stack-Boundary
and Stack-RandSpan holes in the standard library), with the served model's own tokenizer
(the bundled model's converted directory, as ``seam team-server`` serves it) and a 4096-token
window (``seam team-server``'s default), and counts its bytes as JSON twice: as sent now, and
with the whole file in Seam's arguments (as before).  No server is involved: the bytes are
the body's, counted before it is sent::

    .venv/bin/python -m benchmarks.bench_request_bytes --cases 100 --figures docs/team.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.report import RunRecord, command_line, publish  # noqa: E402
from benchmarks.vllm_quality import interleaved  # noqa: E402
from fim.api import CompletionRequest  # noqa: E402
from fim.options import Mode  # noqa: E402
from fim.templates import detect_template, stop_ids  # noqa: E402
from fim.vllm.client import ServerInfo, VllmEngine  # noqa: E402
from fim.vllm.rows import SeamArgs  # noqa: E402
from fim.vllm.tokens import load_tokenizers  # noqa: E402

DEFAULT_TOKENIZER = Path.home() / ".cache/seam/qwen2.5-coder-1.5b-v1/tokenizer.json"


def offline_engine(tokenizer: Path, window: int) -> VllmEngine:
    """A client that knows its server's facts already (the model's tokenizer, template and
    window), so ``prompt_for``/``body`` build exactly what would be sent, with no server."""
    tok = load_tokenizers(tokenizer)[-1]
    template = detect_template(tok)
    engine = VllmEngine("http://127.0.0.1:1")
    engine.tokenizer = tok
    engine._info = ServerInfo("http://127.0.0.1:1", "model", window, template,  # noqa: SLF001
                              tuple(sorted(stop_ids(tok, template))), tokenizer)
    return engine


def sizes(engine: VllmEngine, req: CompletionRequest) -> tuple[int, int, int]:
    """Bytes of the body as sent now, with the whole file in Seam's arguments (before the
    windows), and of the prompt alone."""
    prompt = engine.prompt_for(req)
    body = engine.body(req, prompt)
    now = len(json.dumps(body).encode())
    whole = dict(body, vllm_xargs=dict(body["vllm_xargs"], **SeamArgs(
        req.left, req.right, req.scope, prompt.healed).to_extra_args()))
    return now, len(json.dumps(whole).encode()), len(json.dumps(prompt.payload).encode())


def _row(name: str, values: list[int]) -> str:
    return (f"| {name} | {statistics.median(values):,.0f} | {statistics.mean(values):,.0f} | "
            f"{max(values):,} | {sum(values):,} |")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=100, help="cases per dataset (default: 100)")
    p.add_argument("--datasets", default="boundary,randspan")
    p.add_argument("--folder", type=Path, default=None,
                   help="dev files (default: the standard library)")
    p.add_argument("--tokenizer", type=Path, default=DEFAULT_TOKENIZER)
    p.add_argument("--window", type=int, default=4096)
    p.add_argument("--max-tokens", type=int, default=96)
    p.add_argument("--figures", type=Path, default=None)
    p.add_argument("--section", default="request-bytes")
    args = p.parse_args(argv)
    record = RunRecord(command_line())
    engine = offline_engine(args.tokenizer, args.window)
    names = [d.strip() for d in args.datasets.split(",") if d.strip()]
    cases = interleaved(names, args.cases, args.folder)
    now, before, prompt, files = [], [], [], []
    for case in cases:
        req = CompletionRequest(case["left"], case["right"], mode=Mode.CONSTRAINED,
                                scope="free", max_tokens=args.max_tokens)
        a, b, c = sizes(engine, req)
        now.append(a)
        before.append(b)
        prompt.append(c)
        files.append(len((case["left"] + case["right"]).encode()))
    record.finish()
    body = (f"Bytes of the JSON body of one constrained `/v1/completions` request, "
            f"{len(cases)} dev cases ({', '.join(names)}, up to {args.cases} each), "
            f"the served model's tokenizer (`{args.tokenizer.parent.name}`), a "
            f"{args.window}-token window, `--max-tokens {args.max_tokens}`:\n\n"
            "| | median | mean | max | all cases |\n|---|---|---|---|---|\n"
            + "\n".join([_row("the file (UTF-8)", files),
                         _row("before: whole file in Seam's arguments", before),
                         _row("now: the constraint's windows", now),
                         _row("of which the prompt (token ids)", prompt)])
            + f"\n\nNow / before, all cases: {sum(now) / sum(before):.1%}; the median "
            f"request is {statistics.median(b - a for a, b in zip(now, before, strict=True)):,.0f}"
            " bytes smaller.\n")
    publish(body, record, args.figures, args.section, load=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
