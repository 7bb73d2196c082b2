"""``seam doctor``: the command line of :mod:`lsp_server.diagnosis`.

Reads the editor's settings (``--settings``) and the overrides, validates them as the server
does, runs the checks and prints the report: text for a person, one JSON object with
``--json`` for the editors (Neovim's ``:checkhealth seam``, the VS Code status item; the shape is
in docs/user-guide.md). Exit code 0 when nothing is a problem, 1 when something is, 2 for bad
arguments.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from fim import cli_args
from lsp_server.diagnosis import Request, diagnose
from lsp_server.settings import Settings, merge, section_of

DESCRIPTION = "Check the installation and say why suggestions may not come."


def _settings_payload(text: str) -> dict[str, Any]:
    """``--settings``: JSON, or ``@FILE`` holding it; the ``seam`` section or its keys."""
    if text.startswith("@"):
        try:
            text = Path(text[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise argparse.ArgumentTypeError(f"cannot read {text[1:]}: {exc.strerror}") from None
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc.msg}") from None
    if not isinstance(payload, dict):
        raise argparse.ArgumentTypeError("must be a JSON object (the editor's seam settings)")
    section = section_of(payload) if "seam" in payload else payload
    return section or {}


def add_doctor_options(p: argparse.ArgumentParser) -> None:
    """The options of ``seam doctor``."""
    p.add_argument("--settings", type=_settings_payload, default={}, metavar="JSON|@FILE",
                   help="the editor's seam settings (an object of seam.* keys, or one with a "
                        "\"seam\" section), checked as the server checks them (default: none)")
    p.add_argument("--model", type=cli_args.model, default=None,
                   help="model spec, overriding the settings (default: the settings', else "
                        "the bundled model)")
    p.add_argument("--engine", default=None,
                   help="auto, llama.cpp, transformers or vllm, overriding the settings "
                        "(default: the settings')")
    p.add_argument("--device", type=cli_args.device, default=None,
                   help="auto, cpu, cuda or cuda:N, overriding the settings (default: the "
                        "settings')")
    p.add_argument("--server", default=None, metavar="URL",
                   help="the vLLM server (with --engine vllm), overriding vllmServer "
                        "(default: the settings')")
    p.add_argument("--file", type=Path, default=None,
                   help="a file to check: is its type served? (default: none)")
    p.add_argument("--language", default=None, metavar="ID",
                   help="the editor's language id for --file (default: from its suffix)")
    p.add_argument("--log-file", type=Path, default=None,
                   help="the server log to read (default: $XDG_STATE_HOME/seam/server.log)")
    p.add_argument("--load", action="store_true",
                   help="also load the model as the server does and time it (default: off)")
    p.add_argument("--load-timeout", type=float, default=600.0, metavar="SECONDS",
                   help="how long --load waits (default: 600)")
    p.add_argument("--json", action="store_true",
                   help="print the report as one JSON object, for editors and scripts "
                        "(default: text)")


def add_doctor_command(subparsers: Any) -> None:
    """``seam doctor`` in the ``seam`` parser, so that ``seam --help`` lists it."""
    p = subparsers.add_parser("doctor", help="check the installation and say why suggestions "
                                             "may not come", description=DESCRIPTION)
    add_doctor_options(p)


def doctor_parser() -> argparse.ArgumentParser:
    p = cli_args.OneLineParser(prog="seam doctor", description=DESCRIPTION)
    add_doctor_options(p)
    return p


def request_from(args: argparse.Namespace) -> Request:
    """The :class:`Request` of parsed arguments: settings first, then the overrides."""
    settings, problems = merge(Settings(), args.settings)
    overrides = {k: v for k, v in (("model", args.model), ("engine", args.engine),
                                   ("device", args.device), ("vllmServer", args.server))
                 if v is not None}
    settings, refused = merge(settings, overrides)
    if refused:
        raise ValueError("; ".join(p.message() for p in refused))
    return Request(settings, tuple(p.message() for p in problems), args.file, args.language,
                   args.log_file, args.load, args.load_timeout)


def doctor(argv: list[str]) -> int:
    """``seam doctor``: print the report; 0 without problems, 1 with, 2 for bad arguments."""
    try:
        args = doctor_parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a one-line argument error
        return exc.code if isinstance(exc.code, int) else 2
    try:
        request = request_from(args)
    except ValueError as exc:
        return cli_args.fail("seam doctor", str(exc))
    report = diagnose(request)
    if args.json:
        print(json.dumps(report.as_json(), ensure_ascii=False))
    else:
        print(report.text())
    return 0 if report.ok else 1
