"""The ``seam`` command: ``seam serve`` runs the language server, the rest belongs to ``fim``.

``seam serve`` speaks LSP on stdio by default, or on TCP with ``--tcp [HOST:]PORT`` (HOST
defaults to 127.0.0.1: the server never listens beyond loopback unless told to). In stdio mode
the process's file descriptor 1 is re-pointed at stderr before anything heavy is imported, so a
stray ``print`` in a library (or in C code) cannot corrupt the protocol stream.

``seam`` with any other subcommand (``complete``, ``eval``, ...) is ``fim.cli``.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import BinaryIO

DEFAULT_HOST = "127.0.0.1"


def parse_tcp(value: str) -> tuple[str, int]:
    """``"8765"`` or ``"HOST:8765"`` or ``"[::1]:8765"`` -> (host, port)."""
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = DEFAULT_HOST, value
    host = host.strip("[]") or DEFAULT_HOST
    try:
        number = int(port)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {port!r}") from None
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"port out of range: {number}")
    return host, number


def serve_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="seam serve",
                                description="Run the Seam language server.")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--stdio", action="store_true", help="speak LSP on stdin/stdout (default)")
    mode.add_argument("--tcp", type=parse_tcp, metavar="[HOST:]PORT",
                      help=f"listen on TCP instead (HOST defaults to {DEFAULT_HOST})")
    p.add_argument("--model", help="model spec, overriding seam.model from the editor")
    p.add_argument("--device", help="device (auto, cpu, cuda, ...)")
    p.add_argument("--dtype", help="dtype (auto, float32, bfloat16, float16)")
    p.add_argument("--log-file", default=None,
                   help="log file (default: $XDG_STATE_HOME/seam/server.log; '' for none)")
    p.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    return p


def _protect_stdout() -> BinaryIO:
    """Keep the real stdout for the protocol only; point fd 1 and ``sys.stdout`` at stderr."""
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(protocol_fd, "wb", buffering=0)


def serve(argv: list[str]) -> int:
    args = serve_parser().parse_args(argv)
    protocol_out = None if args.tcp else _protect_stdout()
    # Idle OpenMP threads otherwise spin for a while after each forward pass. On a busy CPU
    # that spinning delays the event loop (measured here: 5-35 ms before the answer is sent)
    # and slows the next forward pass several times over. Must be set before torch loads;
    # an explicit user setting wins.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

    from .logs import setup_logging
    from .server import SeamServer
    from .settings import Settings, merge

    try:
        log_path = setup_logging(args.log_file, args.log_level)
    except ValueError as exc:
        print(f"seam serve: {exc}", file=sys.stderr)
        return 2
    overrides = {k: v for k, v in (("model", args.model), ("device", args.device),
                                   ("dtype", args.dtype)) if v}
    settings, problems = merge(Settings(), overrides)
    if problems:
        print("seam serve: " + "; ".join(problems), file=sys.stderr)
        return 2
    server = SeamServer(settings, pinned=set(overrides))
    server.attach_editor_log()
    import logging

    logging.getLogger("lsp_server").info("seam serve starting; log file %s", log_path)
    if args.tcp:
        host, port = args.tcp
        server.start_tcp(host, port)
    else:
        server.start_io(sys.stdin.buffer, protocol_out)
    # The protocol is over (exit, or the client went away). Interpreter teardown would join
    # a decode still winding down and free the model's memory page by page, which editors
    # that kill a server 2 s after `exit` (VS Code) do not wait for: flush and leave now.
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr, protocol_out):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(0)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``seam`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "serve":
        return serve(argv[1:])
    if not argv or argv[0] in ("-h", "--help"):
        print("seam serve: run the language server (seam serve --help for its options)")
    from fim.cli import main as fim_main

    return fim_main(argv)


if __name__ == "__main__":
    sys.exit(main())
