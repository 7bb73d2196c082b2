"""A trained model through the team path: ``seam team-server`` (vLLM with Seam's processor) and
``seam complete --engine vllm``, on a few hand-written cursors.

Starts the server on 127.0.0.1 with a model directory (default: the bundled Qwen2.5-Coder-1.5B
as the transformers engine converts it, ``~/.cache/seam/qwen2.5-coder-1.5b-v1``), measures the
start-up, completes each cursor once through the client, checks that every middle parses with
its file, and prints the processor's own per-request log lines (tokens, steps, steps whose
likeliest token it refused) and vLLM's generation throughput.  Needs ``.venv-team`` and about
4 GB of free memory (bfloat16 weights)::

    .venv/bin/python benchmarks/bench_vllm_bundled.py [--model DIR] [--port 18741]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = [  # (left, right, scope)
    ("def mean(values):\n    total = sum(", ")\n    return total / len(values)\n", "statement"),
    ("import os\n\ndef home_file(name):\n    return os.path.join(", ")\n", "statement"),
    ("class Point:\n    def __init__(self, x, y):\n        self.x = x\n",
     "\n    def norm(self):\n        return (self.x ** 2 + self.y ** 2) ** 0.5\n", "block"),
    ("for i in range(10):\n    if i % 2 ==", ":\n        print(i)\n", "line"),
    ("names = ['a', 'b']\nupper = [", "]\n", "statement"),
]


def _start(model: str, port: int, log: Path) -> tuple[subprocess.Popen, float]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), VLLM_CPU_KVCACHE_SPACE="1",
               VLLM_CPU_OMP_THREADS_BIND="nobind")
    t0 = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(ROOT / ".venv-team/bin/python"), "-m", "lsp_server.cli", "team-server",
             "--model", model, "--port", str(port), "--max-model-len", "2048", "--",
             "--dtype", "bfloat16", "--enforce-eager", "--max-num-seqs", "4"],
            stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT, start_new_session=True)
    while time.monotonic() - t0 < 900 and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5):
                return proc, time.monotonic() - t0
        except OSError:
            time.sleep(2)
    raise SystemExit(f"vLLM did not start; see {log}")


def _complete(port: int, left: str, right: str, scope: str, tmp: Path) -> dict:
    src = tmp / "bench-vllm-case.py"
    src.write_text(left + right, encoding="utf-8")
    line, col = left.count("\n") + 1, len(left) - (left.rfind("\n") + 1) + 1
    out = subprocess.run(
        [sys.executable, "-m", "fim", "complete", f"{src}:{line}:{col}", "--engine", "vllm",
         "--server", f"http://127.0.0.1:{port}", "--scope", scope, "--max-tokens", "32",
         "--json", "--quiet"],
        capture_output=True, text=True, timeout=900, cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return json.loads(out.stdout) if out.stdout.strip() else {"error": out.stderr.strip()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=str(Path("~/.cache/seam/qwen2.5-coder-1.5b-v1")
                                          .expanduser()))
    p.add_argument("--port", type=int, default=18741)
    p.add_argument("--log", type=Path, default=Path("/tmp/seam-bench-vllm-bundled.log"))
    args = p.parse_args()
    proc, start_s = _start(args.model, args.port, args.log)
    print(f"start-up {start_s:.1f} s ({args.model})", flush=True)
    failures = 0
    try:
        for left, right, scope in CASES:
            t0 = time.monotonic()
            res = _complete(args.port, left, right, scope, args.log.parent)
            middle = res.get("middle")
            ok = middle is not None and _parses(left + middle + right)
            failures += middle is not None and not ok
            print(json.dumps({"scope": scope, "middle": middle, "stop": res.get("stop"),
                              "tokens": res.get("tokens"), "parses": ok,
                              "seconds": round(time.monotonic() - t0, 1),
                              "error": res.get("error")}), flush=True)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=120)
    text = args.log.read_text(errors="replace")
    for row in re.findall(r"seam row done: (.*)", text):
        print("processor:", row)
    print("vLLM generation throughput (tokens/s):",
          re.findall(r"Avg generation throughput: ([\d.]+)", text))
    return 1 if failures else 0


def _parses(source: str) -> bool:
    try:
        ast.parse(source)
    except SyntaxError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
