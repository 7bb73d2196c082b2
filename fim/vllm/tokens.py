"""The ``vllm`` engine's tokenizer: the served model's own when the client has it, else an
estimate; and the client's record of what vLLM's prefix cache probably holds.

The prompt must be counted and cut in the model's real tokens, as the in-process engines do
(``fim.templates.build_prompt``), and token healing needs the prompt's last token.  Asking the
server (``/tokenize``) for every count would put a round trip on every keystroke, and cutting
a long context takes a binary search of counts; so the client loads the model's tokenizer
itself (as vLLM does, with ``transformers``' ``AutoTokenizer``; else with the Rust
``tokenizers`` library from the file alone) when it finds it:

1. the tokenizer the user names (``VllmEngine(tokenizer=...)``: a ``tokenizer.json`` or its
   directory);
2. the served model's id when it is a local directory (``seam team-server`` serves the bundled
   model from its directory, and ``vllm serve /path`` does the same);
3. a directory of that name in Seam's cache (``~/.cache/seam/qwen2.5-coder-1.5b-v1``, for a
   server started with ``--served-model-name qwen2.5-coder-1.5b-v1``);
4. the Hugging Face cache, for a hub id, without downloading.

A tokenizer found is checked against the server once (the FIM sentinels' ids and one line of
code through ``/tokenize``): a different one is not used.  Without one the client falls back to
:class:`EstimatedTokenizer` (three characters per token, cautious for code), sends the prompt
as text, and leaves token healing off; ``seam/status`` says which (``ServerInfo.tokens``).

:class:`PrefixRecord` stands in for the in-process engines' cache bookkeeping: vLLM's automatic
prefix cache is not visible to a client, so the client remembers the prompts it ran and counts
as cached the longest shared beginning in whole cache blocks.  It is an estimate (vLLM evicts
by its own rule), good enough for the one decision it serves: whether the project context is
in the cache yet (``lsp_server.engine_work.runnable``).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import deque
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path

log = logging.getLogger(__name__)

#: Characters per token when no tokenizer is at hand (source code averages 3-4).
CHARS_PER_TOKEN = 3
#: vLLM caches prompts in blocks of this many tokens (its default block size); only whole
#: blocks are reused.
CACHE_BLOCK = 16
#: Prompts remembered as probably cached.
REMEMBERED_PROMPTS = 8
#: The line both tokenizers must agree on (ASCII, indentation and a two-byte character).
AGREEMENT_PROBE = "def f(x):\n    return x + 1  # é\n"


class LocalTokenizer:
    """The served model's tokenizer behind :class:`fim.tokenizer.TextTokenizer`, read from the
    directory of its ``tokenizer.json`` as vLLM reads it: with ``transformers``'
    ``AutoTokenizer`` when it is installed (which may rebuild parts of the file's pipeline from
    the model's config: a Qwen2 model gets Qwen2's pre-tokenizer whatever the file says), else
    with the ``tokenizers`` library from the file alone (no torch either way)."""

    def __init__(self, path: Path, *, auto: bool = True) -> None:
        self.path = path
        self._hf = None
        if auto:
            from transformers import AutoTokenizer

            self._hf = AutoTokenizer.from_pretrained(str(path.parent))
            self._tok = self._hf.backend_tokenizer
            self.bos_token_id = self._hf.bos_token_id
            self.eos_token_id = self._hf.eos_token_id
            return
        from tokenizers import Tokenizer

        self._tok = Tokenizer.from_file(str(path))
        # Special-token names inside the user's text are text, as in the in-process engines
        # (``fim.engines.transformers_engine.HFTokenizer``): a file that mentions
        # ``<|endoftext|>`` must not end its own prompt.
        self._tok.encode_special_tokens = True
        names = _special_names(path.parent / "tokenizer_config.json")
        self.bos_token_id = self._id_of(names.get("bos_token"))
        self.eos_token_id = self._id_of(names.get("eos_token"))

    def _id_of(self, name: str | None) -> int | None:
        return self._tok.token_to_id(name) if name else None

    def encode(self, text: str) -> list[int]:
        if not text:
            return []
        if self._hf is not None:  # as HFTokenizer: special names are text
            return list(self._hf(text, add_special_tokens=False, split_special_tokens=True,
                                 verbose=False)["input_ids"])
        return self._tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Sequence[int]) -> str:
        if not len(ids):
            return ""
        if self._hf is not None:
            return self._hf.decode(list(ids))
        return self._tok.decode(list(ids), skip_special_tokens=False)

    def token_id(self, piece: str) -> int | None:
        return self._tok.token_to_id(piece)


def load_tokenizers(path: Path) -> list[LocalTokenizer]:
    """The ways to read the tokenizer in ``path``, the server's own first (``AutoTokenizer``,
    when ``transformers`` is installed; then the file alone), each read once per version of
    the file: every reconnect makes a new engine, and reading a 150,000-token vocabulary
    takes about a second."""
    stat = path.stat()
    return [t for t in (_load(path.resolve(), auto, stat.st_mtime_ns, stat.st_size)
                        for auto in (True, False)) if t is not None]


@lru_cache(maxsize=8)
def _load(path: Path, auto: bool, _mtime: int, _size: int) -> LocalTokenizer | None:
    try:
        return LocalTokenizer(path, auto=auto)
    except Exception as err:  # noqa: BLE001 - not installed, or a file that is no tokenizer
        log.info("cannot read the tokenizer %s%s: %s", path,
                 " with transformers" if auto else "", err)
        return None


def _special_names(config: Path) -> dict[str, str]:
    """``bos_token``/``eos_token`` names from a ``tokenizer_config.json`` (either form)."""
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    out = {}
    for key in ("bos_token", "eos_token"):
        value = data.get(key) if isinstance(data, dict) else None
        if isinstance(value, dict):
            value = value.get("content")
        if isinstance(value, str):
            out[key] = value
    return out


def tokenizer_candidates(model: str, named: str | None = None) -> list[Path]:
    """Where the served model's ``tokenizer.json`` may be, in the order of the module's list
    (only files that exist)."""
    places: list[Path] = []
    if named:
        p = Path(named).expanduser()
        places.append(p / "tokenizer.json" if p.is_dir() else p)
    local = Path(model).expanduser()
    places.append(local / "tokenizer.json")
    if local.name:
        from fim.engines.bundled import cache_root

        places.append(cache_root() / local.name / "tokenizer.json")
    hub = _hub_cached(model)
    if hub is not None:
        places.append(hub)
    seen: set[Path] = set()
    out = []
    for p in places:
        try:
            if p not in seen and p.is_file():
                out.append(p)
        except OSError:  # an id that is no valid path on this system
            pass
        seen.add(p)
    return out


def _hub_cached(model: str) -> Path | None:
    """The hub cache's ``tokenizer.json`` of ``model`` when it is there (never downloads)."""
    if model.count("/") != 1 or os.path.isabs(model):
        return None
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(model, "tokenizer.json")
    except Exception:  # noqa: BLE001 - not installed, or not a repo id: no tokenizer there
        return None
    return Path(found) if isinstance(found, str) else None


class EstimatedTokenizer:
    """The fallback: "tokens" of :data:`CHARS_PER_TOKEN` characters, so the same prompt
    builder (``fim.templates``) cuts by the estimate.  An id encodes its characters (nothing
    is stored), so ``decode`` gives the text back; the special tokens the server has are
    negative ids that decode to their names.  The prompt is sent as that text."""

    bos_token_id = None
    eos_token_id = None
    _BASE = 0x110001  # one more than the code points: 0 stands for "no character"

    def __init__(self, specials: Iterable[str] = ()) -> None:
        self._ids = {name: -1 - k for k, name in enumerate(dict.fromkeys(specials))}
        self._names = {v: k for k, v in self._ids.items()}

    def encode(self, text: str) -> list[int]:
        b = self._BASE
        out = []
        for i in range(0, len(text), CHARS_PER_TOKEN):
            chunk = text[i:i + CHARS_PER_TOKEN]
            value = 0
            for ch in reversed(chunk):
                value = value * b + ord(ch) + 1
            out.append(value)
        return out

    def decode(self, ids: Sequence[int]) -> str:
        parts = []
        for tid in ids:
            if tid < 0:
                parts.append(self._names[tid])
                continue
            while tid:
                tid, ch = divmod(tid, self._BASE)
                parts.append(chr(ch - 1))
        return "".join(parts)

    def token_id(self, piece: str) -> int | None:
        return self._ids.get(piece)


class PrefixRecord:
    """The prompts the server ran lately, to estimate what its prefix cache holds."""

    def __init__(self, size: int = REMEMBERED_PROMPTS) -> None:
        self._lock = threading.Lock()
        self._prompts: deque[tuple[int, ...]] = deque(maxlen=size)

    def ran(self, ids: Sequence[int]) -> None:
        """The server prefilled ``ids``."""
        key = tuple(ids)
        with self._lock:
            if key in self._prompts:
                self._prompts.remove(key)
            self._prompts.append(key)

    def cached(self, ids: Sequence[int]) -> int:
        """Tokens at the start of ``ids`` probably in the cache (whole blocks)."""
        with self._lock:
            prompts = list(self._prompts)
        key, best = tuple(ids), 0
        for known in prompts:
            best = max(best, len(os.path.commonprefix([known, key])))
        return best - best % CACHE_BLOCK
