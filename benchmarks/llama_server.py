"""llama.cpp's own HTTP server, built from the very llama.cpp sources Seam's engine runs, for
side-by-side latency measurements (``benchmarks/bench_latency.py``).

The llama-cpp-python source distribution on the registry vendors llama.cpp; ``ensure_built``
downloads that same version (``pip download --no-binary``), builds only the ``llama-server``
target with the CMake flags ``scripts/install_llama_cpp.sh`` chooses for this CPU, and keeps
the binary in ``~/.cache/seam/llama-server/<key>/`` (about ten minutes on two cores, once).

``LlamaServer`` runs it on 127.0.0.1 as llama.vim's README has it started for this model
(``llama-server --fim-qwen-1.5b-default``: batch and micro-batch 1024, ``--cache-reuse 256``;
the context 8192 rather than the model's 32768, enough for the ring of extra context at
llama.vim's defaults) and stops it on exit.  Requests are shaped by ``benchmarks/llama_vim.py``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VERSION = "0.3.36"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "seam" / "llama-server"


def cmake_flags() -> list[str]:
    out = subprocess.run(["bash", str(ROOT / "scripts" / "install_llama_cpp.sh"),
                          "--print-flags"], capture_output=True, text=True, check=True)
    return out.stdout.split()


def _flags_and_target() -> tuple[list[str], Path]:
    flags = cmake_flags() + ["-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF",
                             "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=ON",
                             "-DCMAKE_BUILD_TYPE=Release"]
    key = hashlib.sha256(f"{VERSION} {' '.join(flags)}".encode()).hexdigest()[:16]
    return flags, cache_dir() / key / "llama-server"


def built() -> Path | None:
    """The cached ``llama-server`` when it was built already (tests skip without it)."""
    target = _flags_and_target()[1]
    return target if target.is_file() else None


def ensure_built(log=sys.stderr) -> Path:
    """The path of a built ``llama-server`` (building it once if needed)."""
    flags, target = _flags_and_target()
    if target.is_file():
        return target
    print(f"building llama-server from llama-cpp-python {VERSION}'s llama.cpp "
          "(once; about ten minutes on two cores)", file=log, flush=True)
    with tempfile.TemporaryDirectory(prefix="seam-llama-server-") as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "--no-binary", ":all:", f"llama-cpp-python=={VERSION}", "-d", tmp],
                       check=True)
        sdist = next(Path(tmp).glob("llama_cpp_python-*.tar.gz"))
        with tarfile.open(sdist) as tar:
            tar.extractall(tmp, filter="data")
        src = next(Path(tmp).glob("llama_cpp_python-*/vendor/llama.cpp"))
        build = Path(tmp) / "build"
        subprocess.run(["cmake", "-S", str(src), "-B", str(build), *flags], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", str(build), "--target", "llama-server", "-j",
                        str(os.cpu_count() or 2)], check=True, stdout=subprocess.DEVNULL)
        built = next(build.rglob("llama-server"))
        target.parent.mkdir(parents=True, exist_ok=True)
        # The server links llama.cpp's shared libraries: keep them beside it.
        for lib in build.rglob("*.so*"):
            shutil.copy2(lib, target.parent / lib.name)
        shutil.copy2(built, target)
    return target


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """A running ``llama-server`` on loopback, answering ``/infill`` like llama.vim's server."""

    def __init__(self, binary: Path, model: Path, *, threads: int, context: int = 8192,
                 batch: int = 1024, cache_reuse: int = 256) -> None:
        self.flags = {"threads": threads, "context": context, "batch": batch,
                      "cache_reuse": cache_reuse}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = str(binary.parent) + os.pathsep + env.get("LD_LIBRARY_PATH", "")
        self.log = tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log",
                                               delete=False)
        self.proc = subprocess.Popen(
            [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(self.port),
             "-t", str(threads), "-c", str(context), "-b", str(batch), "-ub", str(batch),
             "--cache-reuse", str(cache_reuse),
             "--no-webui", "-np", "1"],
            stdout=self.log, stderr=subprocess.STDOUT, env=env)

    def wait_ready(self, timeout: float = 300.0) -> float:
        """Seconds until ``/health`` answers."""
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama-server exited; see {self.log.name}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return time.perf_counter() - t0
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("llama-server did not become ready")


    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
        return 0.0

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def __enter__(self) -> LlamaServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


if __name__ == "__main__":
    print(ensure_built())
