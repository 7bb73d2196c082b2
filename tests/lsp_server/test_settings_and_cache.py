"""Settings validation, the auto policy, the editors' settings against the server's table,
and the typing-through cache."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fim.editor_policy import CPU_CONTEXT_TOKENS, EMPTY_LINE, MID_LINE
from lsp_server.request_plan import policy_for
from lsp_server.settings import (
    KEYS,
    SETTING_KEYS,
    Settings,
    SettingsShapeError,
    check_budget,
    merge,
    section_of,
    settings_json,
)
from lsp_server.suggestions import SuggestionCache


def test_merge_keeps_old_value_on_bad_input() -> None:
    s, problems = merge(Settings(), {"maxTokens": 12, "topK": "many", "constrained": "yes",
                                     "languages": ["python", "cython"], "bogus": 1})
    assert s.max_tokens == 12
    assert s.top_k == Settings().top_k and s.constrained is True
    assert s.languages == ("python", "cython")
    assert len(problems) == 2  # unknown keys (a client's own settings) are not problems
    assert {p.key for p in problems} == {"constrained", "topK"}


def test_auto_values_and_section_extraction() -> None:
    s, problems = merge(Settings(max_tokens=5), {"maxTokens": "auto", "scope": "auto"})
    assert not problems and s.max_tokens is None and s.scope is None
    s, problems = merge(Settings(max_tokens=5, time_budget_ms=9),
                        {"maxTokens": 0, "timeBudgetMs": None, "model": "bundled"})
    assert not problems and s.max_tokens is None and s.time_budget_ms is None
    assert s.model.startswith("bundled:")
    assert section_of({"seam": {"model": "x"}}) == {"model": "x"}
    assert section_of({"model": "x"}) == {"model": "x"}
    assert section_of({"other": 1}) is None and section_of(None) is None


def test_new_place_time_takes_milliseconds_or_auto_and_refuses_the_rest() -> None:
    s, problems = merge(Settings(), {"newPlaceMs": 3000})
    assert not problems and s.new_place_ms == 3000
    for bad in (50, 700_000, "fast", 1.5, True, [1000]):
        kept, problems = merge(s, {"newPlaceMs": bad})
        assert kept.new_place_ms == 3000, bad
        assert [p.key for p in problems] == ["newPlaceMs"]
        assert problems[0].accepted == 'a whole number of milliseconds from 100 to 600000, ' \
            'or "auto"'
        assert problems[0].kept == 3000
    for auto in ("auto", 0, None):
        assert merge(s, {"newPlaceMs": auto}) == (Settings(), [])
    # The same validator serves vllmSlowAfterMs, which has no "auto".
    _, problems = merge(Settings(), {"vllmSlowAfterMs": "auto"})
    assert [p.accepted for p in problems] == ["a whole number of milliseconds from 1000 to "
                                              "600000"]


def test_policy_mid_line_vs_empty_line() -> None:
    s = Settings()
    mid = policy_for(s, "    x = foo(", ")")
    empty = policy_for(s, "    ", "")
    assert (mid.scope, mid.max_tokens, mid.time_budget_ms) == \
        (MID_LINE.scope, MID_LINE.max_tokens, MID_LINE.time_budget_ms)
    assert (empty.scope, empty.max_tokens, empty.time_budget_ms) == \
        (EMPTY_LINE.scope, EMPTY_LINE.max_tokens, EMPTY_LINE.time_budget_ms)
    assert mid.line_stop and not mid.early and empty.early and not empty.line_stop
    fixed = policy_for(Settings(scope="block", max_tokens=7, constrained=False), "x", "")
    assert (fixed.scope, fixed.max_tokens, fixed.mode) == ("block", 7, "unconstrained")


def test_context_tokens_auto_depends_on_the_device() -> None:
    s, problems = merge(Settings(), {"contextTokens": "auto"})
    assert not problems and s.context_tokens is None
    assert policy_for(s, "x", "").context_tokens == CPU_CONTEXT_TOKENS
    assert policy_for(s, "x", "", device_type="cuda").context_tokens is None  # whole window
    s, problems = merge(s, {"contextTokens": 300})
    assert policy_for(s, "x", "", device_type="cuda").context_tokens == 300
    s, problems = merge(s, {"contextTokens": -5})
    assert problems and s.context_tokens == 300  # a bad value keeps the previous one


def test_typing_through_returns_the_rest() -> None:
    cache = SuggestionCache()
    cache.put("u", "def f(", "):\n", "a, b")
    assert cache.lookup("u", "def f(", "):\n") == "a, b"
    assert cache.lookup("u", "def f(a", "):\n") == ", b"
    assert cache.lookup("u", "def f(a,", "):\n") == " b"
    assert cache.lookup("u", "def f(x", "):\n") is None      # typed something else
    assert cache.lookup("u", "def f(a", ")\n") is None       # right context changed
    assert cache.lookup("v", "def f(a", "):\n") is None      # other document
    assert cache.lookup("u", "def f(a, b", "):\n") is None   # fully typed: nothing left
    assert cache.lookup("u", "xdef f(a", "):\n") is None     # earlier text changed


def test_cache_is_bounded_and_forgets() -> None:
    cache = SuggestionCache(capacity=2)
    for i in range(3):
        cache.put("u", f"l{i}", "r", "mid")
    assert len(cache) == 2 and cache.lookup("u", "l0", "r") is None
    cache.forget("u")
    assert len(cache) == 0


@pytest.mark.parametrize("key,value", [
    ("scope", "bogus"), ("scope", 3), ("contextTokens", 1), ("contextTokens", 127),
    ("maxTokens", 1 << 20), ("maxTokens", 1.5), ("maxTokens", True), ("topK", 0),
    ("topK", 5000), ("dtype", "float8"), ("device", "tpu"), ("device", "cuda:x"),
    ("model", ""), ("model", "x" * 5000), ("languages", []), ("languages", [1]),
    ("timeBudgetMs", -1), ("constrained", "yes"), ("trustRemoteCode", "true"),
    ("threads", -1), ("threads", 1.5), ("threads", 1000), ("threads", "two"),
    ("vllmSlowAfterMs", 999), ("vllmSlowAfterMs", 600_001), ("vllmSlowAfterMs", "auto"),
    ("vllmSlowAfterMs", 1500.5),
])
def test_values_that_would_break_requests_are_refused(key, value) -> None:
    before = Settings(scope="line", context_tokens=512, max_tokens=8)
    after, problems = merge(before, {key: value})
    assert after == before
    assert len(problems) == 1 and problems[0].key == key
    message = problems[0].message()
    assert f"seam.{key}" in message and "keeping" in message


def test_accepted_spellings() -> None:
    s, problems = merge(Settings(), {"dtype": "BF16", "device": " CUDA:1 ", "maxTokens": 12.0,
                                     "languages": "python"})
    assert not problems
    assert (s.dtype, s.device, s.max_tokens, s.languages) == ("bfloat16", "cuda:1", 12,
                                                              ("python",))
    pinned, problems = merge(Settings(), {"threads": 2})
    assert not problems and pinned.threads == 2 and pinned.model_key == Settings().model_key
    for auto in ("auto", 0, None):
        assert merge(pinned, {"threads": auto})[0].threads is None
    slow, problems = merge(Settings(), {"vllmSlowAfterMs": 2500.0})
    # A threshold, not a reason to connect to the server again.
    assert not problems and slow.vllm_slow_after_ms == 2500
    assert slow.model_key == Settings().model_key


def test_a_section_that_is_not_an_object() -> None:
    for bad in (5, "x", [1], True):
        with pytest.raises(SettingsShapeError):
            section_of({"seam": bad})
    assert section_of({"seam": None}) is None


def test_max_tokens_must_leave_room_for_the_prompt() -> None:
    most = CPU_CONTEXT_TOKENS - 32
    wanted = Settings(max_tokens=most + 8)
    # Unknown context (GPU "auto" before the model loads): not judged yet.
    assert check_budget(wanted, Settings(), None, None) == (wanted, [])
    # A CPU's "auto" context keeps 32 tokens for the prompt.
    fixed, problems = check_budget(wanted, Settings(max_tokens=64), "cpu", None)
    assert fixed.max_tokens == 64 and f"at most {most}" in problems[0].message()
    fixed, problems = check_budget(Settings(max_tokens=most), Settings(), "cpu", None)
    assert not problems
    # The model's window caps everything; a previous value that no longer fits is dropped.
    fixed, problems = check_budget(Settings(max_tokens=600, context_tokens=4096),
                                   Settings(max_tokens=700), "cuda", 512)
    assert problems and fixed.max_tokens is None


def test_auto_budget_never_crowds_out_the_prompt() -> None:
    small = Settings(context_tokens=128)
    policy = policy_for(small, "", "")
    assert policy.max_tokens == 128 - 32 and policy.context_tokens == 128
    assert policy_for(Settings(), "", "", device_type="cuda", model_window=100).max_tokens == 68


@pytest.mark.parametrize("key,value,sent,kept", [
    ("model", None, "null", '"bundled:qwen2.5-coder-1.5b"'),
    ("constrained", "yes", '"yes"', "true"),
    ("languages", 5, "5", '["*"]'),
    ("maxTokens", -3, "-3", '"auto"'),
    ("scope", ["line"], '["line"]', '"auto"'),
])
def test_a_refused_value_is_quoted_as_the_client_sent_it_in_json(key, value, sent,
                                                                  kept) -> None:
    _, problems = merge(Settings(), {key: value})
    assert problems[0].message().startswith(f"seam.{key} = {sent} is not valid")
    assert problems[0].message().endswith(f"; keeping {kept}")


def test_the_settings_json_round_trips_through_validation() -> None:
    s = Settings(max_tokens=12, scope="line", languages=("python", "cython"))
    shown = settings_json(s)
    assert list(shown) == list(KEYS)
    assert json.loads(json.dumps(shown)) == shown
    again, problems = merge(Settings(), {k: v for k, v in shown.items()})
    assert not problems and again == s


# ----- the editors declare the same keys, defaults and choices as the server's table ----------

ROOT = Path(__file__).resolve().parents[2]
#: VS Code settings the extension keeps for itself (how to start the server, the suggest widget)
VSCODE_OWN = {"completionItems", "server.python", "server.command"}
SENT = {k.name for k in SETTING_KEYS if not k.pinned}  # pinned: the server's command line only


def _accepted_as_default(key: str, value: object) -> bool:
    """The editor's default, validated by the server, is the server's default."""
    after, problems = merge(Settings(), {key: value})
    return not problems and after == Settings()


def test_vscode_package_json_declares_the_servers_keys() -> None:
    package = json.loads((ROOT / "editors/vscode/package.json").read_text(encoding="utf-8"))
    props = package["contributes"]["configuration"]["properties"]
    declared = {name.removeprefix("seam."): spec for name, spec in props.items()}
    assert set(declared) - VSCODE_OWN == set(KEYS)
    for setting in SETTING_KEYS:
        spec = declared[setting.name]
        assert _accepted_as_default(setting.name, spec["default"]), setting.name
        if setting.choices:
            assert tuple(spec.get("enum", ())) == setting.choices, setting.name


def test_vscode_sends_every_key_with_its_declared_default() -> None:
    source = (ROOT / "editors/vscode/src/settings.ts").read_text(encoding="utf-8")
    interface = re.search(r"interface ServerSettings \{(.*?)\}", source, re.S)
    assert interface is not None
    assert set(re.findall(r"^\s*(\w+):", interface.group(1), re.M)) == SENT
    read = dict(re.findall(r'(?:get|userValue)<[^>]*>\("([\w.]+)", ([^)]*)\)', source))
    package = json.loads((ROOT / "editors/vscode/package.json").read_text(encoding="utf-8"))
    props = package["contributes"]["configuration"]["properties"]
    for key in SENT:
        assert json.loads(read[key]) == props["seam." + key]["default"], key


def _table_rows(markdown: str, heading: str) -> dict[str, str]:
    """``key -> second column`` of the first table from ``heading`` on."""
    lines = markdown[markdown.index(heading):].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append(line)
    return dict(re.findall(r"^\| `([\w.]+)` \| (.*?) \|", "\n".join(table), re.M))


def test_the_neovim_plugin_documents_the_servers_keys_and_defaults() -> None:
    readme = (ROOT / "editors/nvim/README.md").read_text(encoding="utf-8")
    rows = _table_rows(readme, "## Server settings")
    assert set(rows) == SENT
    for key, default in rows.items():
        literal = default.strip("`")
        try:
            value = json.loads(literal)
        except ValueError:
            value = literal  # a bare word such as auto or a model spec
        assert _accepted_as_default(key, value), (key, default)
    plugin = (ROOT / "editors/nvim/lua/seam/init.lua").read_text(encoding="utf-8")
    listed = re.search(r"The server's settings \(section `seam`\):(.*?)settings = \{\}",
                       plugin, re.S)
    assert listed is not None
    assert set(re.findall(r"\b([a-z]\w+)\b", listed.group(1).replace("--", ""))) == SENT


def test_the_user_guide_lists_the_servers_keys() -> None:
    guide = (ROOT / "docs/user-guide.md").read_text(encoding="utf-8")
    assert set(_table_rows(guide, "| key | accepted values | meaning |")) == SENT


def test_settings_that_choose_what_runs_or_where_code_goes_are_user_level_in_vscode() -> None:
    """The table's ``user_only`` keys (the model, the vLLM server and its key) are read from
    the user's settings only (``userValue``) and declared machine-scoped."""
    source = (ROOT / "editors/vscode/src/settings.ts").read_text(encoding="utf-8")
    package = json.loads((ROOT / "editors/vscode/package.json").read_text(encoding="utf-8"))
    props = package["contributes"]["configuration"]["properties"]
    user_read = set(re.findall(r'userValue<[^>]*>\("([\w.]+)"', source)) - VSCODE_OWN
    user_only = {k.name for k in SETTING_KEYS if k.user_only}
    assert {"model", "vllmServer", "vllmApiKey"} <= user_only
    assert user_read - {"trustRemoteCode"} == user_only
    for key in user_only:
        assert props["seam." + key].get("scope") == "machine", key


def test_the_api_key_is_never_reported_back() -> None:
    settings, problems = merge(Settings(), {"engine": "vllm", "vllmApiKey": "sk-secret",
                                            "vllmServer": "http://127.0.0.1:8000"})
    assert not problems and settings.vllm_api_key == "sk-secret"
    shown = settings_json(settings)
    assert shown["vllmApiKey"] == "<set>" and "sk-secret" not in repr(settings)
    _, problems = merge(settings, {"vllmServer": "ftp://x", "vllmApiKey": 3})
    assert {p.key for p in problems} == {"vllmServer", "vllmApiKey"}
    assert all("sk-secret" not in p.message() for p in problems)
