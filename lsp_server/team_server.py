"""``seam team-server``: vLLM's OpenAI-compatible server with Seam's constraint loaded.

One server for a team: vLLM batches the requests of many editors on one GPU (or CPU), and
Seam's logits processor (``fim.vllm.processor``) keeps every constrained middle parsing with
its file.  This command resolves a Seam model spec to something vLLM loads (a model directory
or hub id as it is; the bundled model as the safetensors directory the transformers engine
converts it to once), starts ``python -m vllm.entrypoints.openai.api_server`` with the plugin,
waits until it answers and prints the URL editors put in their ``server`` setting.  It then
stays in the foreground until vLLM exits or Ctrl-C stops both.

It is the same as running, yourself::

    python -m vllm.entrypoints.openai.api_server --model DIR --host H --port P \\
        --middleware fim.vllm.route_guard.RouteGuard --enable-prompt-tokens-details

with Seam installed in that environment (its processor is in vLLM's plugin group,
``fim.vllm.plugin``; where it is not, the command adds ``--logits-processors
fim.vllm.processor:SeamLogitsProcessor``).  The route guard closes every route but ``/health``
to requests without the key and holds each request to the limits (``fim.vllm.route_guard``;
the ``--max-*`` options set them).  Speculative decoding is refused: vLLM runs no custom logits
processor with it (``fim.vllm.speculative``), and the command says so when it starts.

vLLM picks its model runner itself (V2 where Triton runs, so on CUDA; V1 on a CPU), and the
plugin implements both runners' interfaces, so the choice is left to vLLM
(``VLLM_USE_V2_MODEL_RUNNER`` set in the environment still decides).  The last flag makes vLLM
put ``prompt_tokens_details.cached_tokens`` in each answer's usage: how many prompt tokens its
prefix cache served, which Seam's client reports (``seam/status``) instead of its estimate.
The API key, if any, is read from ``SEAM_VLLM_API_KEY`` (never a command-line argument, which
other users can see).

The address is checked before vLLM starts: a port outside 0..65535 or a host that names no
address here is refused, and the address is bound once to see that it is free.  ``--port 0``
picks a free port here and gives vLLM that port (vLLM would pick its own, which the command
could not know), so the URL printed is the one vLLM listens on.  The URL printed for editors
is one they can reach: on a wildcard host (``0.0.0.0``, ``::``) the machine's name, besides
the loopback address for an editor on the same machine; an IPv6 address is bracketed
(``http://[::1]:8000``), as URLs and the ``vllmServer`` setting want it.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

from fim import cli_args
from fim.options import DEFAULT_MODEL, canonical_model
from fim.vllm import speculative
from fim.vllm.route_guard import LIMIT_ENVS, Limits
from lsp_server.supervised_process import run_supervised

PLUGIN = "fim.vllm.processor:SeamLogitsProcessor"
#: The entry-point group vLLM loads logits-processor plugins from (no flag needed), and what
#: Seam registers there (pyproject.toml).
PLUGIN_GROUP = "vllm.logits_processors"
INSTALLED_PLUGIN = "fim.vllm.plugin:InstalledSeamLogitsProcessor"
#: The middleware that closes every route but /health without the key and applies the limits.
GUARD = "fim.vllm.route_guard.RouteGuard"
KEY_ENV = "SEAM_VLLM_API_KEY"
START_TIMEOUT_S = 1800


def team_parser() -> argparse.ArgumentParser:
    p = cli_args.OneLineParser(
        prog="seam team-server",
        description="Run vLLM's OpenAI-compatible server with Seam's constraint, for a team.")
    add_team_options(p)
    return p


def add_team_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", type=cli_args.model, default=DEFAULT_MODEL,
                   help=f"model spec: a model directory, a hub id or {DEFAULT_MODEL} "
                        f"(default: {DEFAULT_MODEL})")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default: 127.0.0.1; 0.0.0.0 for a team)")
    p.add_argument("--port", type=port_number, default=8000,
                   help="port, 0 for a free one (default: 8000)")
    p.add_argument("--max-model-len", type=cli_args.positive_int, default=4096,
                   help="longest prompt plus completion in tokens (default: 4096)")
    for field, name in LIMIT_ENVS.items():
        flag = "--max-" + field.replace("_", "-")
        p.add_argument(flag, dest=field, type=cli_args.positive_int,
                       default=getattr(Limits(), field),
                       help=f"per-request limit, refused with a 4xx naming it (sets {name}; "
                            f"default: %(default)s)")
    p.add_argument("vllm_args", nargs="*", metavar="-- VLLM_ARG",
                   help="further arguments for vLLM's server, after -- (default: none)")


def port_number(text: str) -> int:
    """A TCP port, 0 to 65535 (0: a free one is picked)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port lies between 0 and 65535, not {value}")
    return value


WILDCARDS = ("0.0.0.0", "::", "")


def bind_check(host: str, port: int) -> int:
    """Bind ``host:port`` once and let go: the port vLLM will get (a free one for 0);
    ``ValueError`` with the reason when the host names no address here or the port is
    taken."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as err:
        raise ValueError(f"--host {host!r} names no address here ({err})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as err:
            raise ValueError(f"cannot listen on {url_for(host, port)}: "
                             f"{err.strerror or err}") from None
        return sock.getsockname()[1]


def url_for(host: str, port: int) -> str:
    """``http://host:port``, with an IPv6 address in brackets."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def local_url(host: str, port: int) -> str:
    """Where this machine reaches the server (what the command polls)."""
    if host in ("::",):
        return url_for("::1", port)
    return url_for("127.0.0.1" if host in WILDCARDS else host, port)


def editor_urls(host: str, port: int) -> list[str]:
    """The URLs editors put in their ``vllmServer`` setting: on a wildcard host, the
    machine's name (for the team) and the loopback address (an editor on this machine)."""
    if host in WILDCARDS:
        return [url_for(socket.getfqdn() or socket.gethostname(), port),
                local_url(host, port)]
    return [url_for(host, port)]


def add_team_command(subparsers) -> None:
    """``seam team-server`` in the ``seam`` parser, so that ``seam --help`` lists it."""
    p = subparsers.add_parser("team-server", help="run a vLLM server with Seam's constraint",
                              description="Run vLLM's OpenAI-compatible server with Seam's "
                                          "constraint, for a team.")
    add_team_options(p)


def model_path(spec: str) -> str:
    """What vLLM's ``--model`` gets for a Seam model spec."""
    from fim.engines.model_specs import ModelKind, ModelSpecError, classify_spec

    spec = canonical_model(spec)
    kind = classify_spec(spec)
    if kind is ModelKind.BUNDLED:
        from fim.engines import bundled

        return str(bundled.convert(bundled.lookup_spec(spec)))
    if kind in (ModelKind.DIRECTORY, ModelKind.HUB):
        return spec
    raise ModelSpecError(f"{spec}: vLLM is given a model directory, a hub id or the bundled "
                         "model here (convert a GGUF file with the transformers engine first)")


#: Makes vLLM report the prompt tokens its prefix cache served in every answer's usage.
PROMPT_DETAILS = "--enable-prompt-tokens-details"


def plugin_installed() -> bool:
    """Whether Seam's processor is registered in vLLM's plugin group in this environment
    (``pip install`` of Seam does it): vLLM then loads it with no flag (naming it with
    ``--logits-processors`` too would make the installed one stand aside,
    ``fim.vllm.plugin``)."""
    from importlib.metadata import entry_points

    return any(ep.value == INSTALLED_PLUGIN for ep in entry_points(group=PLUGIN_GROUP))


def vllm_command(model: str, host: str, port: int, max_model_len: int,
                 extra: list[str], installed: bool = True) -> list[str]:
    """The command line of vLLM's server: the plugin named only where it is not installed
    (``installed``), the route guard (``GUARD``), and cached prompt tokens reported
    (``PROMPT_DETAILS``, unless ``extra`` sets it either way already)."""
    details = [] if any(a.startswith(("--enable-prompt-tokens-details",
                                       "--no-enable-prompt-tokens-details")) for a in extra) \
        else [PROMPT_DETAILS]
    plugin = [] if installed else ["--logits-processors", PLUGIN]
    return [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model,
            "--host", host, "--port", str(port), "--max-model-len", str(max_model_len),
            *plugin, "--middleware", GUARD, *details, *extra]


def wait_ready(url: str, proc: subprocess.Popen, timeout_s: float) -> bool:
    """Whether the server at ``url`` answered before ``proc`` ended or the time ran out."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end and proc.poll() is None:
        try:
            with urllib.request.urlopen(url + "/v1/models", timeout=5):
                return True
        except urllib.error.HTTPError:
            return True  # it answers (an API key is required)
        except (urllib.error.URLError, OSError):
            time.sleep(1)
    return False


def team_server(argv: list[str]) -> int:
    """Run the command; the exit code (vLLM's, or 2 for bad arguments)."""
    try:
        args = team_parser().parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    if speculative.turns_on(args.vllm_args):
        return cli_args.fail("seam team-server", speculative.SPECULATIVE_NOTE)
    try:
        port = bind_check(args.host, args.port)
    except ValueError as err:
        return cli_args.fail("seam team-server", str(err))
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return cli_args.fail("seam team-server", "vLLM is not installed here: pip install "
                             "'seam-complete[team]' (or scripts/setup_team.sh, then use "
                             ".venv-team)")
    try:
        model = model_path(args.model)
    except (ValueError, RuntimeError) as err:
        return cli_args.fail("seam team-server", str(err))
    env = dict(os.environ)
    extra = list(args.vllm_args)
    if env.get(KEY_ENV):
        env["VLLM_API_KEY"] = env[KEY_ENV]  # vLLM and the route guard read it from there
    limits = Limits(**{field: getattr(args, field) for field in LIMIT_ENVS})
    env.update(limits.as_env())  # the route guard reads them when vLLM starts
    cmd = vllm_command(model, args.host, port, args.max_model_len, extra, plugin_installed())
    print("seam team-server: starting " + " ".join(cmd[1:]), file=sys.stderr, flush=True)
    print(f"seam team-server: {speculative.SPECULATIVE_NOTE}; every route but /health "
          + ("needs the API key" if env.get("VLLM_API_KEY") else "is open (no API key set)")
          + "; limits per request: " + ", ".join(f"{n}={v}" for n, v in limits.as_env().items()),
          file=sys.stderr, flush=True)
    url = local_url(args.host, port)
    urls = editor_urls(args.host, port)

    def serve(proc: subprocess.Popen) -> int:
        if wait_ready(url, proc, START_TIMEOUT_S):
            print(f"seam team-server: ready at {url} (editors: engine \"vllm\", server "
                  + " or ".join(f'"{u}"' for u in urls) + ")", flush=True)
        return proc.wait()

    # vLLM runs in a session of its own (its worker processes with it), stopped with this
    # command on Ctrl-C or a SIGTERM (a service manager's stop), never left running.
    return run_supervised(cmd, env, serve)


def main() -> int:
    return team_server(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())

