"""A vLLM server with Seam's processor for the team benchmarks, started and stopped by them.

The quality, engine-step and team benchmarks each need the team path's server on 127.0.0.1:
``seam team-server`` (what a team runs), or the vLLM command it runs with another processor
class (the engine-step benchmark loads a timing subclass of Seam's processor).  This module
starts either in a process group of its own, waits until ``/v1/models`` answers, and stops the
whole group on exit, so no benchmark leaves vLLM running.  It also reads the server's log for
the processor's per-request lines and vLLM's throughput.

vLLM lives in ``.venv-team`` (``scripts/setup_team.sh``); a worktree without one passes
``--team-python`` (e.g. the main checkout's ``.venv-team/bin/python``).  The server runs this
checkout's code (``PYTHONPATH`` is the repository root).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODEL_DIR = Path("~/.cache/seam/qwen2.5-coder-1.5b-v1").expanduser()
START_TIMEOUT_S = 1200


def add_server_options(p: argparse.ArgumentParser, max_num_seqs: int = 16,
                       port: int = 18760) -> None:
    """The options every team benchmark shares: where vLLM is and how it is started."""
    p.add_argument("--server", default=None,
                   help="use this running server (URL) instead of starting one")
    p.add_argument("--model-dir", type=Path, default=DEFAULT_MODEL_DIR,
                   help="the model vLLM loads (default: the bundled model as the transformers "
                        "engine converts it)")
    p.add_argument("--team-python", type=Path, default=ROOT / ".venv-team" / "bin" / "python",
                   help="the interpreter with vLLM (default: .venv-team/bin/python)")
    p.add_argument("--port", type=int, default=port)
    p.add_argument("--max-num-seqs", type=int, default=max_num_seqs,
                   help=f"vLLM's batch limit (default: {max_num_seqs})")
    p.add_argument("--max-model-len", type=int, default=2048)
    p.add_argument("--kv-cache-gib", type=int, default=2,
                   help="VLLM_CPU_KVCACHE_SPACE (default: 2)")
    p.add_argument("--server-log", type=Path, default=None,
                   help="keep vLLM's log here (default: a file in /tmp)")


@dataclass
class TeamServer:
    """One vLLM server: ``seam team-server`` when ``plugin`` is None, else vLLM's own command
    (as team-server builds it) with ``plugin`` as the logits processor class."""

    team_python: Path
    model_dir: Path
    port: int
    log: Path
    max_num_seqs: int = 16
    max_model_len: int = 2048
    kv_cache_gib: int = 2
    plugin: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen | None = None
    start_s: float = 0.0

    @classmethod
    def from_args(cls, args: argparse.Namespace, name: str, plugin: str | None = None,
                  env: dict[str, str] | None = None) -> TeamServer:
        log = args.server_log or Path(f"/tmp/seam-{name}-vllm.log")
        return cls(args.team_python, args.model_dir, args.port, log, args.max_num_seqs,
                   args.max_model_len, args.kv_cache_gib, plugin, env or {})

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        engine = ["--dtype", "bfloat16", "--enforce-eager", "--seed", "0",
                  "--max-num-seqs", str(self.max_num_seqs)]
        if self.plugin is None:
            return [str(self.team_python), "-m", "lsp_server.cli", "team-server",
                    "--model", str(self.model_dir), "--port", str(self.port),
                    "--max-model-len", str(self.max_model_len), "--", *engine]
        from lsp_server.team_server import PLUGIN, vllm_command

        # The class is named by flag (an installed Seam plugin then stands aside:
        # fim.vllm.plugin), so the timing subclass is the one processor at work.
        cmd = vllm_command(str(self.model_dir), "127.0.0.1", self.port, self.max_model_len,
                           engine, installed=False)
        cmd[0] = str(self.team_python)
        cmd[cmd.index(PLUGIN)] = self.plugin
        return cmd

    def __enter__(self) -> TeamServer:
        if not self.team_python.exists():
            raise SystemExit(f"{self.team_python} does not exist: run scripts/setup_team.sh, "
                             "or pass --team-python")
        env = dict(os.environ, PYTHONPATH=str(ROOT), VLLM_CPU_KVCACHE_SPACE=str(
            self.kv_cache_gib), VLLM_CPU_OMP_THREADS_BIND="nobind", **self.env)
        try:  # another server on the port would answer the readiness probe for ours
            socket.create_connection(("127.0.0.1", self.port), timeout=2).close()
        except OSError:
            pass
        else:
            raise SystemExit(f"something already listens on 127.0.0.1:{self.port}: "
                             "pass another --port")
        if threading.current_thread() is threading.main_thread():
            # A benchmark stopped with SIGTERM unwinds (and stops the server) as on Ctrl-C.
            signal.signal(signal.SIGTERM, _interrupt)
        t0 = time.monotonic()
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT,
                                         env=env, cwd=ROOT, start_new_session=True)
        try:
            while time.monotonic() - t0 < START_TIMEOUT_S:
                if self.proc.poll() is not None:
                    raise SystemExit(f"vLLM exited with {self.proc.returncode}; see "
                                     f"{self.log}:\n{self.tail()}")
                try:
                    with urllib.request.urlopen(self.url + "/v1/models", timeout=5):
                        self.start_s = time.monotonic() - t0
                        return self
                except (urllib.error.URLError, OSError):
                    time.sleep(2)
            raise SystemExit(f"vLLM did not answer in {START_TIMEOUT_S} s; see {self.log}")
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop the server's process group (team-server and vLLM's engine processes)."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def rows_done(self) -> list[dict[str, int]]:
        """The processor's ``seam row done`` lines: tokens, steps and refused top tokens."""
        out = []
        text = self.log.read_text(errors="replace")
        for m in re.finditer(r"seam row done: tokens=(\d+) steps=(\d+) masked_top=(\d+)"
                             r" forced_stop=(\d+)", text):
            out.append(dict(zip(("tokens", "steps", "masked_top", "forced_stop"),
                                map(int, m.groups()), strict=True)))
        return out


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def vllm_version(team_python: Path) -> str:
    """The installed vLLM's version (read in its own environment): the CPU build's
    (``vllm-cpu``), else the CUDA build's, named (``vllm``, scripts/gpu_benchmarks.sh)."""
    try:
        return subprocess.run(
            [str(team_python), "-c", "from importlib import metadata as m\n"
             "try: print(m.version('vllm-cpu'))\n"
             "except m.PackageNotFoundError: print(m.version('vllm'), '(CUDA build: vllm)')"],
            capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
