"""The ``seam`` command: ``seam serve`` runs the language server, the rest belongs to ``fim``.

``seam serve`` speaks LSP on stdio by default, or on TCP with ``--tcp [HOST:]PORT`` (HOST
defaults to 127.0.0.1: the server never listens beyond loopback unless told to; PORT 0 picks a
free one). In stdio mode the process's file descriptor 1 is re-pointed at stderr before
anything heavy is imported, so a stray ``print`` in a library (or in C code) cannot corrupt the
protocol stream. A library's ``FutureWarning`` or ``DeprecationWarning`` is not printed (as
with ``seam complete``: ``fim.cli.quiet_library_warnings``); Seam's own warnings are.

In TCP mode every client must present a secret token in its ``initialize`` request, as
``initializationOptions.seamToken``: by default a fresh one per start, printed on stderr (never
logged) and written to ``--token-file`` if given; ``SEAM_TCP_TOKEN`` in the environment sets
it instead. One client is served at a time (see ``transport``).

A model's own Python code (Hugging Face ``trust_remote_code``) runs only with
``--trust-remote-code``; no setting sent by an editor can turn it on.

Exit codes: 0 after ``shutdown`` + ``exit``; 1 for ``exit`` without ``shutdown`` or a client
that went away; 2 for bad arguments (one line on stderr).

``seam doctor`` is ``lsp_server.doctor``; ``seam --version`` prints ``fim.version``.
``seam`` with any other subcommand (``complete``, ``eval``) is ``fim.cli``. This module owns
the ``seam`` parser (:func:`seam_parser`): ``fim.cli.add_commands`` adds ``complete`` and
``eval``, and ``serve`` is added here, so ``seam --help`` lists all three while ``fim`` knows
nothing of the package above it. ``seam serve ...`` is recognised before that parser is built:
the server must protect its stdout before ``fim``'s heavier modules are imported.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, NoReturn

from fim import cli_args
from fim.options import DEFAULT_MODEL, DTYPE_CHOICES

if TYPE_CHECKING:  # imported by `_sessions`, after stdout is protected
    from lsp_server.server import SeamServer

DEFAULT_HOST = "127.0.0.1"
DEFAULT_MAX_MESSAGE_MB = 64
TOKEN_ENV = "SEAM_TCP_TOKEN"
MIN_TOKEN_CHARS = 16


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


def _max_message_mb(text: str) -> int:
    value = cli_args.positive_int(text)
    if value > 4096:
        raise argparse.ArgumentTypeError(f"must be at most 4096 (MB), not {value}")
    return value


def add_serve_options(p: argparse.ArgumentParser) -> None:
    """The options of ``seam serve`` (also shown by ``seam --help``)."""
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--stdio", action="store_true",
                      help="speak LSP on stdin/stdout (default)")
    mode.add_argument("--tcp", type=parse_tcp, metavar="[HOST:]PORT",
                      help=f"listen on TCP instead; clients must send the token printed at "
                           f"start (default: off; HOST defaults to {DEFAULT_HOST})")
    p.add_argument("--token-file", type=cli_args.writable_file("token file"), default=None,
                   help="with --tcp, also write the token to this file, readable only by you "
                        "(default: stderr only)")
    p.add_argument("--model", type=cli_args.model, default=None,
                   help=f"model spec, overriding seam.model from the editor (default: the "
                        f"editor's, else {DEFAULT_MODEL}; \"bundled\" names it too)")
    p.add_argument("--device", type=cli_args.device, default=None,
                   help="auto, cpu, cuda or cuda:N, overriding seam.device (default: the "
                        "editor's, else auto)")
    p.add_argument("--dtype", type=cli_args.dtype, default=None,
                   help=f"{', '.join(DTYPE_CHOICES)} (fp32, bf16, fp16 accepted too), "
                        "overriding seam.dtype (default: the editor's, else auto)")
    p.add_argument("--trust-remote-code", action="store_true",
                   help="let the model run its own Python code when it loads; no editor "
                        "setting can do this (default: off)")
    p.add_argument("--max-message-mb", type=_max_message_mb, default=DEFAULT_MAX_MESSAGE_MB,
                   help="largest LSP message accepted, in MB; a larger document gets no "
                        f"completions (default: {DEFAULT_MAX_MESSAGE_MB})")
    p.add_argument("--log-file", default=None,
                   help="log file, created readable only by you (default: "
                        "$XDG_STATE_HOME/seam/server.log; '' for none)")
    p.add_argument("--log-level", default="INFO",
                   choices=("DEBUG", "INFO", "WARNING", "ERROR"), type=str.upper,
                   help="DEBUG, INFO, WARNING or ERROR; below DEBUG no message content is logged "
                        "(default: INFO)")


def serve_parser() -> argparse.ArgumentParser:
    p = cli_args.OneLineParser(prog="seam serve", description="Run the Seam language server.")
    add_serve_options(p)
    return p


def add_serve_command(subparsers: Any) -> None:
    """``seam serve`` in the ``seam`` parser, so that ``seam --help`` lists it."""
    p = subparsers.add_parser("serve", help="run the language server (stdio or TCP)",
                              description="Run the Seam language server.")
    add_serve_options(p)


def seam_parser() -> argparse.ArgumentParser:
    """The ``seam`` console script's parser: ``fim``'s ``complete`` and ``eval``, ``serve``
    and ``team-server``."""
    from fim import cli as fim_cli
    from fim.version import __version__
    from lsp_server.doctor import add_doctor_command
    from lsp_server.team_server import add_team_command

    parser = cli_args.OneLineParser(prog="seam", description=fim_cli.DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"seam {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    fim_cli.add_commands(sub)
    add_serve_command(sub)
    add_team_command(sub)
    add_doctor_command(sub)
    return parser


def _protect_stdout() -> BinaryIO:
    """Keep the real stdout for the protocol only; point fd 1 and ``sys.stdout`` at stderr."""
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(protocol_fd, "wb", buffering=0)


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family)


def _token() -> str:
    token = os.environ.get(TOKEN_ENV, "").strip()
    if token and len(token) < MIN_TOKEN_CHARS:
        raise ValueError(f"{TOKEN_ENV} must be at least {MIN_TOKEN_CHARS} characters")
    return token or secrets.token_urlsafe(24)


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(text + "\n")


class _Refused(Exception):
    """Why ``seam serve`` cannot start, in one line (exit code 2)."""


def serve(argv: list[str]) -> int:
    """``seam serve``, in steps: parse the arguments, bind the TCP port (before anything
    slow, so that a busy port is one line, not a traceback later) or keep stdout for the
    protocol, set up logging and the command line's settings, serve, and leave."""
    try:
        args = serve_parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a one-line argument error
        return exc.code if isinstance(exc.code, int) else 2
    limit = args.max_message_mb * 1024 * 1024
    try:
        tcp = _bind(args.tcp, args.token_file) if args.tcp else None
        protocol_out = None if tcp else _protect_stdout()
    except _Refused as exc:
        return cli_args.fail("seam serve", str(exc))
    # fim's command line is imported only now, after stdout is protected. A library's notice
    # of its own future (transformers' FutureWarning on every forward pass of some models)
    # would otherwise reach the editor's output panel on stderr; Seam's own warnings still do.
    from fim.cli import quiet_library_warnings

    with quiet_library_warnings():
        try:
            # OpenMP's wait policy is chosen per engine where the engine is imported
            # (``fim.engines.loading``): torch's idle threads sleep, llama.cpp's spin.
            new_session = _sessions(args, limit)
        except _Refused as exc:
            return cli_args.fail("seam serve", str(exc))
        if tcp is not None:
            code = _serve_tcp(*tcp, new_session, limit)
        else:
            code = _serve_stdio(new_session, protocol_out)
        _leave(code, protocol_out)


def _bind(address: tuple[str, int], token_file: Path | None) -> tuple[socket.socket, str]:
    """The listening socket and the token clients must send (also written to
    ``token_file``)."""
    host, port = address
    try:
        listener = _listen(host, port)
        token = _token()
        if token_file is not None:
            _write_private(token_file, token)
    except (OSError, ValueError) as exc:
        what = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise _Refused(f"cannot serve on {host}:{port}: {what}") from None
    return listener, token


def _sessions(args: argparse.Namespace, limit: int) -> Callable[[], SeamServer]:
    """Set up logging and the settings the command line fixes; the factory of a session
    per client, all sharing one model host (the model stays loaded between clients)."""
    # The server's modules (pygls, fim) are imported only now, after stdout is protected.
    from lsp_server.logs import setup_logging
    from lsp_server.model_host import ModelHost
    from lsp_server.server import SeamServer
    from lsp_server.settings import Settings, merge

    try:
        log_path = setup_logging(args.log_file, args.log_level)
    except ValueError as exc:
        raise _Refused(str(exc)) from None
    overrides = {k: v for k, v in (("model", args.model), ("device", args.device),
                                   ("dtype", args.dtype)) if v}
    settings, problems = merge(Settings(), overrides)
    if problems:
        raise _Refused("; ".join(p.message() for p in problems))
    host_model = ModelHost()

    def new_session() -> SeamServer:
        server = SeamServer(settings, pinned=set(overrides), host=host_model,
                            allow_remote_code=args.trust_remote_code, max_content_bytes=limit)
        server.attach_editor_log()
        return server

    logging.getLogger("lsp_server").info("seam serve starting; log file %s", log_path)
    return new_session


def _serve_tcp(listener: socket.socket, token: str, new_session: Callable[[], SeamServer],
               limit: int) -> int:
    """Serve one client at a time on ``listener`` until stopped; the exit code."""
    from lsp_server.wire.transport import TOKEN_KEY, TcpServer

    address = listener.getsockname()
    where = f"[{address[0]}]:{address[1]}" if ":" in address[0] else \
        f"{address[0]}:{address[1]}"
    logging.getLogger("lsp_server").info("listening on %s", where)
    print(f"seam serve: listening on {where}; clients must send "
          f"initializationOptions.{TOKEN_KEY} = \"{token}\"", file=sys.stderr, flush=True)
    TcpServer(listener, new_session, token, limit).run()
    return 0


def _serve_stdio(new_session: Callable[[], SeamServer], protocol_out: BinaryIO | None) -> int:
    """Serve the one client on stdin and the protected stdout; the exit code."""
    from lsp_server.wire.transport import serve_stdio

    server = new_session()
    server.exit_code = serve_stdio(server, sys.stdin.buffer, protocol_out,
                                   server.max_content_bytes)
    return server.exit_code


def _leave(code: int, protocol_out: BinaryIO | None) -> NoReturn:
    """Exit now that the protocol is over (exit, or the client went away). Interpreter
    teardown would join a decode still winding down and free the model's memory page by
    page, which editors that kill a server 2 s after ``exit`` (VS Code) do not wait for:
    flush and leave."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr, protocol_out):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``seam`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "serve":
        return serve(argv[1:])
    if argv and argv[0] == "team-server":
        from lsp_server.team_server import team_server

        return team_server(argv[1:])
    if argv and argv[0] == "doctor":
        from lsp_server.doctor import doctor

        return doctor(argv[1:])
    from fim import cli as fim_cli

    try:
        args = seam_parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a one-line argument error
        return exc.code if isinstance(exc.code, int) else 2
    return fim_cli.run(args)


if __name__ == "__main__":
    sys.exit(main())
