"""SynCode's verdicts on Go prefix-only holes, run inside .venv-syncode (never in .venv).

`benchmarks.bench_go` starts this script with .venv-syncode's interpreter (made by
scripts/setup_syncode.sh), hands it a JSON file of holes and reads one JSON object back on
stdout.  It uses SynCode 0.4.16 as its own code does in decoding: its Go grammar and its
incremental LALR parser (`get_acceptable_next_terminals` on the whole text so far, which is
how its constrainer reads each step).  Its mask store is not used: building it for the
bundled model's 151,936-token vocabulary ran for hours on the shared 2-core machine, so the
per-token cost reported is the parser's time per model token, not a mask computation.

Verdicts, per hole (``left`` + ``middle``; the first ``hole`` characters are checked):

* viable after each of the model's tokens of the hole (the points where SynCode decides;
  every character when no tokenizer is given): the parser accepts every token so far (a
  rejected last token is allowed, as SynCode's parser allows it: it may still grow);
* complete at the end of the file: its incremental parser accepts the whole text and the
  end of input may follow (how its constrainer marks a valid end), for the true middle and
  for each given corruption.

Only the standard library and syncode are imported here.  `syncode/__init__.py` imports its
evaluation datasets module, which needs the `datasets` package (pyarrow, pandas) that no
parser path uses, so that one module is stood in for before the import.
"""

from __future__ import annotations

import json
import sys
import time
import types


def _load(tokenizer_json: str | None):  # type: ignore[no-untyped-def]
    stand_in = types.ModuleType("syncode.dataset")
    stand_in.Dataset = None  # type: ignore[attr-defined]
    sys.modules.setdefault("syncode.dataset", stand_in)
    from syncode.parsers import create_parser
    from syncode.parsers.grammars import Grammar

    t0 = time.perf_counter()
    parser = create_parser(Grammar("go"))
    parser_s = time.perf_counter() - t0
    tokenizer = None
    if tokenizer_json:
        from tokenizers import Tokenizer  # installed with transformers

        tokenizer = Tokenizer.from_file(tokenizer_json)
    return parser, tokenizer, parser_s


def _result(parser, text: str):  # type: ignore[no-untyped-def]
    """SynCode's parse result for ``text`` (None when a complete token is rejected)."""
    try:
        r = parser.get_acceptable_next_terminals(text)
    except Exception:  # SynCode raises lark's UnexpectedToken/UnexpectedCharacters
        return None
    r.remainder = r.remainder.encode("utf-8")
    return r


def _viable(parser, text: str) -> bool:  # type: ignore[no-untyped-def]
    return _result(parser, text) is not None


def _complete(parser, text: str) -> bool:  # type: ignore[no-untyped-def]
    """Whether SynCode would let decoding end after ``text``: its incremental parser accepts
    the text and the end of input ($END, or its Go grammar's EOF) may follow it, as its
    constrainer reads the accept sequences to mark a valid end."""
    from syncode.parse_result import RemainderState

    parser.reset()
    r = _result(parser, text)
    if r is None or r.remainder_state == RemainderState.INCOMPLETE:
        return False
    # An accept sequence ending in the end of input: the end right here ([$END]) or after
    # the last, possibly still growing token ([token, $END], [token, ignored, $END]).
    return any(seq[-1] in ("$END", "EOF") for seq in r.accept_sequences)


def _points(tokenizer, middle: str) -> list[int]:  # type: ignore[no-untyped-def]
    """Where SynCode decides while decoding ``middle``: after each of the model's tokens
    (every character without a tokenizer)."""
    if tokenizer is None:
        return list(range(1, len(middle) + 1))
    ends = sorted({b for _, b in tokenizer.encode(middle, add_special_tokens=False).offsets})
    return [e for e in ends if e > 0] or [len(middle)]


def _hole(parser, tokenizer, hole: dict) -> dict:  # type: ignore[no-untyped-def]
    left, middle, n = hole["left"], hole["middle"], hole["hole"]
    parser.reset()
    t0 = time.perf_counter()
    first = _viable(parser, left)
    setup_ms = (time.perf_counter() - t0) * 1000
    rejected_at = None if first else -1
    token_ms = []
    for k in _points(tokenizer, middle[:n]) if first else []:
        t0 = time.perf_counter()
        ok = _viable(parser, left + middle[:k])
        token_ms.append((time.perf_counter() - t0) * 1000)
        if not ok:
            rejected_at = k - 1
            break
    return {"id": hole["id"], "setup_ms": setup_ms, "rejected_at": rejected_at,
            "complete": _complete(parser, left + middle),
            "corruptions": [_complete(parser, text) for text in hole.get("corruptions", [])],
            "token_ms": token_ms}


def main() -> int:
    job = json.loads(open(sys.argv[1], encoding="utf-8").read())
    parser, tokenizer, parser_s = _load(job.get("tokenizer"))
    from importlib.metadata import version

    holes = []
    for i, h in enumerate(job["holes"]):
        holes.append(_hole(parser, tokenizer, h))
        print(f"syncode {i + 1}/{len(job['holes'])} {h['id']}", file=sys.stderr, flush=True)
    out = {"syncode": version("syncode"), "parser_s": parser_s, "holes": holes}
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
