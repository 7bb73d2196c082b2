"""What an editor asks of the engine beyond a plain completion: a stable prompt start, a
middle that ends with its line, the first line early, warming the cache, progress."""

from __future__ import annotations

import numpy as np
import pytest

from fim.api import CompletionRequest, Engine
from fim.editor_policy import EMPTY_LINE, MIN_PROMPT_TOKENS, auto_policy, cursor_line, policy_at
from fim.engines.step_model import StepModel
from fim.engines.transformers_engine import HFTokenizer, backend_from_loaded
from fim.templates import TEMPLATES, build_prompt
from lsp_server.request_plan import policy_for
from lsp_server.settings import Settings
from tests.support.reference_language import ReferenceLanguage


class Scripted(StepModel):
    """A model that says the given tokens, one per step, then the end of text."""

    def __init__(self, vocab_size: int, script: list[int], eos: int) -> None:
        super().__init__()
        self._size, self.script, self.eos = vocab_size, script, eos
        self.prefills: list[list[int]] = []
        self.steps = 0

    @property
    def vocab_size(self) -> int:
        return self._size

    def _logits(self) -> np.ndarray:
        out = np.zeros(self._size, dtype=np.float32)
        nxt = self.script[self.steps] if self.steps < len(self.script) else self.eos
        out[nxt] = 50.0
        return out

    def prefill(self, ids, interrupt=None, progress=None, keep_cached=False, hold=False):
        self.prefills.append(list(ids))
        self.steps = 0
        if progress is not None:
            progress(len(ids), len(ids))
        return self._logits()

    def step(self, token):
        self.steps += 1
        return self._logits()

    def _forward(self, slot, ids, interrupt):  # pragma: no cover - prefill/step are scripted
        raise NotImplementedError

    _truncate = _copy_prefix = _clear = _forward


def scripted_engine(random_loaded, text: str) -> tuple[Engine, Scripted]:
    backend = backend_from_loaded(random_loaded)
    tok = backend.tokenizer
    script = Scripted(backend.step_model.vocab_size, tok.encode(text),
                      tok.token_id("<|endoftext|>"))
    backend.step_model = script
    return Engine(backend, heal=False, language_factory=ReferenceLanguage.for_python), script


def test_line_stop_ends_the_middle_at_the_first_complete_line_end(random_loaded):
    engine, _ = scripted_engine(random_loaded, "1 + 2\ny = 3\n")
    req = CompletionRequest("x = ", "\n", max_tokens=20, scope="free", line_stop=True)
    res = engine.complete(req)
    assert (res.middle, res.stop) == ("1 + 2", "line_end")
    # Without it the model's whole text is the middle.
    whole = engine.complete(CompletionRequest("x = ", "\n", max_tokens=20, scope="free"))
    assert whole.middle.startswith("1 + 2\ny = 3") and whole.stop == "eos"


def test_a_line_end_inside_an_open_bracket_does_not_stop(random_loaded):
    engine, _ = scripted_engine(random_loaded, "[1,\n     2]\nz = 0\n")
    res = engine.complete(CompletionRequest("x = ", "\n", max_tokens=30, scope="free",
                                            line_stop=True))
    assert (res.middle, res.stop) == ("[1,\n     2]", "line_end")


def test_partial_middles_reach_the_caller_while_decoding_goes_on(random_loaded):
    engine, _ = scripted_engine(random_loaded, "1\ny = [\n2]\nz = 3\n")
    seen: list[str] = []
    res = engine.complete(CompletionRequest("x = ", "\n", max_tokens=40, scope="free"),
                          on_partial=seen.append)
    # Each partial ends at a line end where the file parses; "y = [" never does.
    assert seen == ["1", "1\ny = [\n2]", "1\ny = [\n2]\nz = 3"]
    assert res.middle.startswith(seen[-1])


def test_left_start_keeps_the_prompt_start_stable(random_loaded):
    tok = HFTokenizer(random_loaded.tokenizer)
    t = TEMPLATES["santacoder"]
    head = "import os\n\n\ndef first():\n    return 1\n\n\n"
    left = head + "def second():\n    value = 2\n    return val"
    p = build_prompt(tok, t, left, "\n", window=512, reserve=16, left_start=len(head))
    assert p.left_chars_dropped == len(head)
    assert tok.decode(p.ids[1:p.ids.index(tok.token_id("<fim-suffix>"))]) + p.healed == \
        left[len(head):]
    # Typing on only appends to what follows the stable start.
    q = build_prompt(tok, t, left + "ue", "\n", window=512, reserve=16, left_start=len(head))
    n = len(p.ids) - 4  # up to the healed token, suffix and middle
    assert q.ids[:n] == p.ids[:n]
    with pytest.raises(ValueError, match="left_start"):
        build_prompt(tok, t, left, "\n", window=512, reserve=16, left_start=len(left) + 1)
    with pytest.raises(ValueError, match="left_start"):
        CompletionRequest(left, "\n", left_start=-1).validate()


def test_warm_runs_the_prompt_so_the_request_only_decodes(random_loaded):
    engine = Engine(backend_from_loaded(random_loaded),
                    language_factory=ReferenceLanguage.for_python)
    req = CompletionRequest("def f(x):\n    return ", "\n", max_tokens=4, scope="free")
    assert engine.warm(req) is True
    step = engine.step_model
    calls = []
    real = step._forward
    step._forward = lambda slot, ids, interrupt: calls.append(len(ids)) or real(slot, ids,
                                                                                  interrupt)
    res = engine.complete(req)
    assert step.reused == res.prompt_tokens  # the whole prompt came from the cache
    assert calls and set(calls) == {1} and len(calls) <= res.tokens  # only generated tokens
    assert engine.warm(req, cancel=lambda: True) is False


def test_progress_reports_prefill_and_decode(random_loaded):
    engine, _ = scripted_engine(random_loaded, "1 + 2 + 3\n")
    events = []
    engine.complete(CompletionRequest("x = ", "\n", max_tokens=20, scope="free"),
                    progress=lambda phase, done, total: events.append((phase, done, total)))
    assert events[0][0] == "prefill" and events[0][1] == events[0][2]
    decoding = [e for e in events if e[0] == "decode"]
    assert [d[1] for d in decoding] == list(range(1, len(decoding) + 1))
    assert all(d[2] == 20 for d in decoding)


class NoNewlineState:
    """The reference language without newlines, as in the statement scope after a statement."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def feed(self, text: str):
        if "\n" in text:
            return None
        return NoNewlineState(self.inner.feed(text))

    def is_complete(self) -> bool:
        return self.inner.is_complete()


def test_line_stop_also_when_the_constraint_forbids_the_newline(random_loaded):
    """The model wants the line to end where the middle is complete but the language allows
    no newline there: the decode ends there instead of writing on (a comment, say)."""
    engine, script = scripted_engine(random_loaded, "12\n# more\n")

    class Language:
        mode = "exact"

        def __init__(self, left, right, scope):
            self.ref = ReferenceLanguage(left, right, scope)

        def initial(self):
            return NoNewlineState(self.ref.initial())

        def check_region(self):
            return None

    engine.languages.factory = Language
    res = engine.complete(CompletionRequest("x = ", "\n", max_tokens=20, scope="statement",
                                            line_stop=True))
    assert (res.middle, res.stop) == ("12", "line_end")
    plain = engine.complete(CompletionRequest("x = ", "\n", max_tokens=20, scope="statement"))
    assert plain.stop != "line_end"


# ----- the "auto" policy, defined once --------------------------------------------------------

def test_cursor_line_splits_the_line_that_holds_the_offset() -> None:
    text = "a = 1\n    foo(x)\nlast"
    assert cursor_line(text, text.index("(x)")) == ("    foo", "(x)")
    assert cursor_line(text, 0) == ("", "a = 1")
    assert cursor_line(text, len(text)) == ("last", "")
    assert cursor_line(text, text.index("\n")) == ("a = 1", "")


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("line", [("    x = foo(", ")"), ("    ", ""), ("", "")])
def test_the_servers_default_settings_are_the_auto_policy(device: str, line) -> None:
    """The server resolves its default settings to exactly the policy `seam eval --policy
    ide` runs: one definition of "auto" (``fim.editor_policy.auto_policy``)."""
    before, after = line
    for window in (None, 100, 4096):
        assert (policy_for(Settings(), before, after, device_type=device, model_window=window)
                == auto_policy(before, after, device_type=device, model_window=window))
    if device == "cpu":
        assert policy_at("def f():\n" + before, after + "\nreturn") == auto_policy(before, after)


def test_an_auto_budget_leaves_room_for_the_prompt_in_a_small_window() -> None:
    assert auto_policy("", "", device_type="cuda").max_tokens == EMPTY_LINE.max_tokens
    small = auto_policy("", "", device_type="cuda", model_window=100)
    assert small.max_tokens == 100 - MIN_PROMPT_TOKENS and small.context_tokens is None


def test_the_context_asked_for_is_capped_by_the_models_window() -> None:
    # The planner places prompt starts and held windows by this budget: beyond the window
    # the engine would cut them away.
    assert auto_policy("", "", device_type="cpu", model_window=1024).context_tokens == 1024
    assert auto_policy("", "", device_type="cpu", model_window=32768).context_tokens == 2048
    assert auto_policy("", "", context_tokens=4096, model_window=2048).context_tokens == 2048
    assert auto_policy("", "", context_tokens=4096).context_tokens == 4096  # no model yet
