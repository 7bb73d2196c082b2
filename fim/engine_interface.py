"""The one interface every completion engine offers its callers.

The editor-side service (``lsp_server``), the command line and the benchmarks hold an engine
as a :class:`CompletionEngine` and call only what is declared here: the in-process engine
(``fim.api.Engine``, over llama.cpp or transformers) and the clients of model servers
(``fim.vllm.client.VllmEngine``) implement it, and a new engine joins by implementing it too.
What an engine can or cannot do is said by its :class:`EngineFeatures` record, read as data,
never probed with ``getattr``; what runs the model is its :class:`Runtime` record.  The
engine contract tests (``tests/fim/test_engine_contract.py``) hold every engine to it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from fim.engines.model_specs import EngineKind
from fim.engines.prefill_speed import PrefillSpeed

if TYPE_CHECKING:  # types only: the records below are what crosses at run time
    from fim.request import CompletionRequest, CompletionResult
    from fim.templates import FimTemplate
    from fim.tokenizer import TextTokenizer


@dataclass(frozen=True)
class EngineFeatures:
    """What an engine does beyond the common contract."""

    #: ``CompletionRequest.alternatives`` above 1 is honoured (``fim.alternatives``).
    ranks_alternatives: bool
    #: ``complete``'s ``on_partial`` and ``progress`` are called while it decodes.
    reports_progress: bool
    #: Prompts are counted and cut with the model's own tokenizer (else an estimate).
    exact_tokens: bool
    #: A prompt whose start moved down the file reuses the cached cells of the lines it
    #: still holds (``fim.engines.step_model``'s slide): its window may slide, not restart.
    slides_window: bool = False
    #: ``warm(..., hold=True)`` keeps that prompt cached whole while others run
    #: (``fim.engines.step_model``'s held slot): later prompts sharing its beginning fork it.
    holds_prompts: bool = False


@dataclass(frozen=True)
class Runtime:
    """What runs the model, for the status and the logs."""

    engine: EngineKind
    #: ``cpu``, ``cuda`` or ``metal`` for a local model; ``remote`` for a server
    device: str
    #: one line, e.g. "llama.cpp 0.3.36, 2 threads, Q4_K_M"
    description: str
    #: prompt tokens per second its prefills ran at here, kept up to date as they run
    #: (``None``: the engine does not measure it, e.g. a model server's client)
    prefill_speed: PrefillSpeed | None = None


class EnginePrompt(Protocol):
    """A prompt an engine built for a request (``prompt_for``), handed back to the same engine
    so that it is not built twice."""

    @property
    def ids(self) -> list[int]: ...

    @property
    def healed(self) -> str: ...

    @property
    def project_tokens(self) -> int: ...

    @property
    def left_chars_dropped(self) -> int: ...

    @property
    def right_chars_dropped(self) -> int: ...


@runtime_checkable
class CompletionEngine(Protocol):
    """A loaded model (or a server's), ready to complete ``CompletionRequest``s."""

    @property
    def features(self) -> EngineFeatures: ...

    @property
    def runtime(self) -> Runtime: ...

    @property
    def window(self) -> int:
        """Positions of prompt and middle the model attends over."""

    @property
    def tokenizer(self) -> TextTokenizer: ...

    @property
    def template(self) -> FimTemplate: ...

    @property
    def cached_tokens(self) -> int:
        """Prompt tokens the last request took from the model's cache."""

    def prompt_for(self, req: CompletionRequest) -> EnginePrompt:
        """The prompt ``complete(req)`` would run (no model work)."""

    def uncached(self, req: CompletionRequest, prompt: EnginePrompt | None = None) -> int:
        """How many of the prompt's tokens the model's cache does not hold now."""

    def warm(self, req: CompletionRequest, cancel: Callable[[], bool] | None = None,
             keep_cached: bool = False, prompt: EnginePrompt | None = None,
             hold: bool = False) -> bool:
        """Do what ``complete(req)`` does before its first token; whether it finished
        (``hold``: keep this prompt cached whole, where ``features.holds_prompts``)."""

    def complete(self, req: CompletionRequest, cancel: Callable[[], bool] | None = None,
                 on_partial: Callable[[str], None] | None = None,
                 progress: Callable[[str, int, int], None] | None = None,
                 prompt: EnginePrompt | None = None) -> CompletionResult:
        """Complete one request."""
