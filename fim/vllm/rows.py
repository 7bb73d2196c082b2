"""Seam's constraint for one generated sequence, independent of any serving engine's batch.

A serving engine (vLLM) decodes many requests in one batch and calls a logits processor once
per step for all of them; which row is which request, and when a request leaves, is the
engine adapter's business (``fim.vllm.processor``).  This module holds what every row needs:

* :class:`SeamArgs`, the typed form of a request's Seam arguments (``vllm_xargs`` over HTTP):
  the left and right context the Python FIM language is built from, the scope, and the
  characters token healing backed off the prompt's end (the first tokens must reproduce them
  byte for byte, as in ``fim.decoding``);
* :class:`TokenTable`, the bytes of every token id and the ids that end a middle, built once
  per engine from its tokenizer (``fim.engines.vocab``);
* :class:`RowConstraint`, one request's constraint state, advanced by the tokens the engine
  generated (bytes, with incomplete UTF-8 tails held back as ``fim.decoding`` does), and the
  mask of the next step: every token that cannot continue to a complete file is removed, a
  stop token is kept only where the file is complete.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from fim.engines.vocab import Vocabulary, build_vocabulary
from fim.healing import GeneratedBytes, HealIndex
from fim.language_cache import LanguageHit
from fim.options import SCOPES, Scope
from fim.stopping import RightStop, Step, at_line_start, rewrite_cut_after
from fim.templates import detect_template, stop_ids
from quotient.constraint import ConstraintState

#: The keys of a request's extra arguments that Seam reads.
LEFT_KEY, RIGHT_KEY, SCOPE_KEY, HEAL_KEY = "seam_left", "seam_right", "seam_scope", "seam_heal"
#: The right-context stop (``CompletionRequest.stop_at_right`` and ``right_wraps``): 1 or 0
#: (vLLM's ``vllm_xargs`` carry strings and numbers); absent means off, as before it existed.
RIGHT_STOP_KEY, RIGHT_WRAPS_KEY = "seam_right_stop", "seam_right_wraps"
#: A warm-up (1 or 0): the processor starts building the request's language for the request
#: that follows and leaves this one unconstrained (its token is not read).
WARM_KEY = "seam_warm"
#: Contexts larger than this are refused (a request, not the engine, should fail).
MAX_CONTEXT_CHARS = 4_000_000


class SeamArgsError(ValueError):
    """Seam arguments that name no constraint (a request error, HTTP 400 in vLLM)."""


@dataclass(frozen=True)
class SeamArgs:
    """What a request sends to be constrained: contexts, scope and the healed characters."""

    left: str
    right: str
    scope: Scope = Scope.STATEMENT
    #: the end of ``left`` the prompt left out; the middle starts after the model rewrites it
    heal: str = ""
    #: end a greedy row where its best token would re-write the right context
    right_stop: bool = False
    #: ... also the right context's next line written on the cursor's line
    right_wraps: bool = False
    #: a warm-up: build the language, constrain nothing (``WARM_KEY``)
    warm: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "scope", Scope(self.scope))  # a name is accepted too

    @classmethod
    def from_extra_args(cls, extra: Mapping[str, object] | None) -> SeamArgs | None:
        """The arguments in a request's ``extra_args``, ``None`` when it has none of Seam's.

        Raises :class:`SeamArgsError` for arguments of the wrong type or value.
        """
        if not extra or (LEFT_KEY not in extra and RIGHT_KEY not in extra):
            return None
        left, right = extra.get(LEFT_KEY, ""), extra.get(RIGHT_KEY, "")
        scope, heal = extra.get(SCOPE_KEY, Scope.STATEMENT.value), extra.get(HEAL_KEY, "")
        for key, value in ((LEFT_KEY, left), (RIGHT_KEY, right), (HEAL_KEY, heal),
                           (SCOPE_KEY, scope)):
            if not isinstance(value, str):
                raise SeamArgsError(f"{key} must be a string, not {type(value).__name__}")
        if len(left) + len(right) > MAX_CONTEXT_CHARS:
            raise SeamArgsError(f"{LEFT_KEY} and {RIGHT_KEY} exceed {MAX_CONTEXT_CHARS} "
                                "characters")
        if scope not in SCOPES:
            raise SeamArgsError(f"{SCOPE_KEY} must be one of {', '.join(SCOPES)}, "
                                f"not {scope!r}")
        if not left.endswith(heal):
            raise SeamArgsError(f"{HEAL_KEY} must be the end of {LEFT_KEY}")
        flags = [_flag(extra, key) for key in (RIGHT_STOP_KEY, RIGHT_WRAPS_KEY, WARM_KEY)]
        return cls(left, right, Scope(scope), heal, *flags)

    def to_extra_args(self) -> dict[str, str | int]:
        """The JSON-able form a client sends (``vllm_xargs``); the right-context flags only
        when on (an older processor rejects nothing it does not know, and reads them off)."""
        out: dict[str, str | int] = {LEFT_KEY: self.left, RIGHT_KEY: self.right,
                                     SCOPE_KEY: self.scope.value, HEAL_KEY: self.heal}
        if self.right_stop:
            out[RIGHT_STOP_KEY] = 1
            out[RIGHT_WRAPS_KEY] = int(self.right_wraps)
        if self.warm:
            out[WARM_KEY] = 1
        return out


def _flag(extra: Mapping[str, object], key: str) -> bool:
    """A 0/1 flag of the extra arguments (JSON ``true``/``false`` too); absent is off."""
    value = extra.get(key, 0)
    if isinstance(value, bool) or value in (0, 1):
        return bool(value)
    raise SeamArgsError(f"{key} must be 0 or 1, not {value!r}")


#: Residues whose consistent ids a table keeps (each an array of up to the vocabulary).
HEAL_RESIDUES_KEPT = 256


@dataclass
class TokenTable:
    """Per-id token bytes (``None``: not text) and the ids that end a middle."""

    vocab: Vocabulary
    stop_ids: frozenset[int]
    # Built at load (sorting the vocabulary's bytes: tens of milliseconds).
    _heal: HealIndex | None = field(default=None, init=False, repr=False, compare=False)
    _empty: list[int] | None = field(default=None, init=False, repr=False, compare=False)
    # The ids per residue: a short residue such as b" " is consistent with tens of thousands
    # of ids, a list that took milliseconds per row and step to build (the step benchmark's
    # 20-30 ms steps); residues are few, so each is built once.
    _consistent: dict[bytes, np.ndarray] = field(default_factory=dict, init=False,
                                                 repr=False, compare=False)

    @classmethod
    def from_tokenizer(cls, tokenizer, vocab_size: int) -> TokenTable:
        """The table of a Hugging Face tokenizer for a model with ``vocab_size`` logits.

        The stop ids are those of the FIM template Seam detects for the tokenizer (its EOS and
        the template's end sentinels), as for the in-process engines; a tokenizer without FIM
        sentinels (the server may run any model) has its EOS alone.
        """
        vocab = build_vocabulary(tokenizer, vocab_size)
        ids = _TokenIds(tokenizer)
        try:
            found = stop_ids(ids, detect_template(ids))
        except ValueError:  # no FIM sentinels: the model's end of sequence alone ends a middle
            found = {ids.eos_token_id} if ids.eos_token_id is not None else set()
        return cls(vocab, frozenset(i for i in found if i < vocab_size))

    @property
    def size(self) -> int:
        return self.vocab.size

    def heal_consistent(self, heal: bytes) -> np.ndarray:
        """The ids a row still healing ``heal`` can take: those whose bytes start with it or
        are a prefix of it (the empty ones included); every other id is refused by
        ``RowConstraint.viable`` before the language is asked."""
        got = self._consistent.get(heal)
        if got is None:
            self.build_heal_index()
            got = np.asarray(self._heal.consistent(heal) + self._empty, dtype=np.int64)
            got.flags.writeable = False  # shared by every row healing the same residue
            if len(self._consistent) >= HEAL_RESIDUES_KEPT:
                self._consistent.clear()
            self._consistent[heal] = got
        return got

    def build_heal_index(self) -> None:
        """Build the index ``heal_consistent`` reads (tens of milliseconds, once): the server
        does it at load, so the first healing row's engine step does not pay it."""
        if self._heal is None:
            self._heal = HealIndex(self.vocab)
            self._empty = [i for i, b in enumerate(self.vocab.token_bytes) if b == b""]


class _TokenIds:
    """The two things ``fim.templates`` asks of a tokenizer, over a Hugging Face one."""

    def __init__(self, tokenizer) -> None:
        self._tok = tokenizer
        self.eos_token_id = tokenizer.eos_token_id
        self.bos_token_id = getattr(tokenizer, "bos_token_id", None)

    def token_id(self, piece: str) -> int | None:
        ids = self._tok.convert_tokens_to_ids([piece])
        tid = ids[0] if ids else None
        unk = getattr(self._tok, "unk_token_id", None)
        if tid is None or (tid == unk and piece != getattr(self._tok, "unk_token", None)):
            return None
        return int(tid)


#: Non-ASCII characters some line-splitting code treats as line ends (or a BOM): each is a class
#: of its own, checked as itself.
_SPECIAL_CHARS = frozenset("\x85\xa0\u2028\u2029\ufeff")


def _char_class(ch: str) -> tuple[bool, bool, str]:
    """What Python's lexer can tell apart in a non-ASCII character: identifier start,
    identifier continuation, or neither (text only inside strings and comments); the few
    ``_SPECIAL_CHARS`` are classes of their own."""
    return (ch.isidentifier(), ("a" + ch).isidentifier(), ch if ch in _SPECIAL_CHARS else "")


_BASIC_CLASSES = 3  # (start, continue), (no, continue), (no, no)


@lru_cache(maxsize=4096)
def completions_of(pending: bytes) -> tuple[str, ...]:
    """One character of each lexical class (``_char_class``) whose UTF-8 encoding starts with
    ``pending``, an incomplete sequence: what the next tokens can still turn it into."""
    lead = pending[0]
    need = 2 if 0xC2 <= lead <= 0xDF else 3 if 0xE0 <= lead <= 0xEF else \
        4 if 0xF0 <= lead <= 0xF4 else 0
    if not need or len(pending) >= need:
        return ()
    seen: dict[tuple[bool, bool, str], str] = {}
    for ch in _SPECIAL_CHARS:
        if ch.encode("utf-8").startswith(pending):
            seen[_char_class(ch)] = ch
    # The code points whose encoding starts with ``pending``: its payload bits, then any.
    bits = pending[0] & (0x7F >> need)
    for byte in pending[1:]:
        if byte & 0xC0 != 0x80:
            return ()
        bits = bits << 6 | byte & 0x3F
    missing = need - len(pending)
    low = max(bits << 6 * missing, (0x80, 0x800, 0x10000)[need - 2])
    high = min((bits + 1) << 6 * missing, 0x110000)
    basic = 0
    for cp in range(low, high):
        if 0xD800 <= cp < 0xE000:
            continue  # surrogates are not characters
        key = _char_class(chr(cp))
        if key not in seen:
            seen[key] = chr(cp)
            basic += not key[2]
            if basic == _BASIC_CLASSES:
                break  # every class a character can have is found
    return tuple(seen.values())


def warm_completions() -> None:
    """Fill ``completions_of`` for every lead byte (about half a second), so no engine step
    pays for the first token ending inside a four-byte character."""
    for lead in range(0xC2, 0xF5):
        completions_of(bytes([lead]))


class RowConstraint:
    """One request's constraint, advanced by its generated tokens.

    ``advance(tokens)`` reads the request's whole output so far (the engine's own list) and
    feeds only what it has not seen, so a request that comes back after preemption with
    tokens already generated is simply replayed.  A token the constraint rejects (it can only
    come from outside this processor's mask) leaves the row *dead*: from then on only stop
    tokens are allowed, so the request ends and the client cuts the middle back.
    """

    def __init__(self, args: SeamArgs, language: LanguageHit, table: TokenTable) -> None:
        self.args = args
        self.table = table
        self.cache = language.language.cache
        self.state: ConstraintState | None = language.state
        self.seq = GeneratedBytes(heal=args.heal.encode("utf-8"))
        self.seen = 0  # output tokens fed so far
        self.finished = False  # a stop token was generated
        self.masked_top = 0  # steps whose likeliest token was not viable
        self.steps = 0  # steps this row was masked in
        self.forced = 0  # steps where nothing was viable and only stop tokens were left
        self.right_stops = 0  # steps ended because the best token re-wrote the right context
        # The state and middle length before each token (where a re-write may start).
        self.marks: list[Step] = []
        self.right = RightStop.of(args.right if args.right_stop else "", args.right_wraps,
                                  at_line_start(args.left))

    @property
    def dead(self) -> bool:
        return self.state is None

    def advance(self, tokens: Sequence[int]) -> None:
        """Feed the tokens of ``tokens`` (the whole output so far) not yet fed."""
        for tid in tokens[self.seen:]:
            self.seen += 1
            if self.finished or self.dead:
                continue
            if tid in self.table.stop_ids:
                self.finished = True
                continue
            moved = self._moved(tid)
            if moved is None:
                self.state = None
                continue
            nxt = self.cache.feed(self.state, moved[2]) if moved[2] else self.state
            self.marks.append(Step(self.state, self.seq.chars, 0.0, moved[2]))
            self.seq.commit(*moved)
            self.state = nxt

    def _moved(self, tid: int) -> tuple[bytes, bytes, str] | None:
        tb = self.table.vocab.token_bytes
        data = tb[tid] if 0 <= tid < len(tb) else None
        return None if data is None else self.seq.advance(data)

    def complete(self) -> bool:
        """Whether stopping here leaves a file that parses."""
        return (self.state is not None and not self.seq.heal and not self.seq.pending
                and self.cache.is_complete(self.state))

    def viable(self, tid: int) -> bool:
        """Whether token ``tid`` can come next on the way to a complete file."""
        if self.dead or self.finished:
            return tid in self.table.stop_ids
        if tid in self.table.stop_ids:
            return self.complete()
        moved = self._moved(tid)
        if moved is None:
            return False
        state = self.cache.feed(self.state, moved[2]) if moved[2] else self.state
        if state is None:
            return False
        if moved[0] or not moved[1]:
            return True  # still healing, or only whole characters
        # An incomplete character: viable when some character it can still become fits.
        return any(self.cache.feed(state, ch) is not None for ch in completions_of(moved[1]))

    def right_cut(self, tid: int) -> int | None:
        """Where the middle ends (its length) if ``tid``, the row's best token, would start
        re-writing the right context at a complete point; ``None`` otherwise or when the
        request did not ask for the stop.  The rule is the in-process decoder's
        (``fim.stopping.right_rewrite_cut``), over the same states; a short agreement is
        left to the next steps, which the row takes as usual."""
        if not self.right or self.dead or self.finished or tid in self.table.stop_ids:
            return None
        moved = self._moved(tid)
        if moved is None or moved[0] or not moved[2]:
            return None  # healing not done, or no complete characters yet
        return rewrite_cut_after(self.cache, self.marks, self.state, self.seq.joined(),
                                 moved[2], self.right)

    def candidates(self) -> np.ndarray | None:
        """The only ids that can be viable, when a cheap rule knows them (``None``: any id
        may be): while the row heals, the ids consistent with the residue (a stop id is not
        viable before the healed text is back).  Scanning only these finds the same viable
        ids as scanning the vocabulary, without checking the rest one by one."""
        if self.dead or self.finished or not self.seq.heal:
            return None
        return self.table.heal_consistent(self.seq.heal)

    def first_viable(self, order: Sequence[int]) -> int | None:
        """The first id of ``order`` (best first) that is viable, or ``None``."""
        for tid in order:
            if self.viable(int(tid)):
                return int(tid)
        return None

    def viable_mask(self, width: int) -> np.ndarray:
        """A boolean mask over ``width`` logits: which ids are viable (the full check)."""
        mask = np.zeros(width, dtype=bool)
        for tid in range(min(width, self.table.size)):
            if self.table.vocab.token_bytes[tid] is not None or tid in self.table.stop_ids:
                mask[tid] = self.viable(tid)
        return mask

    def fallback_stops(self, width: int) -> list[int]:
        """The stop ids to leave when nothing is viable: the request must end (the client
        cuts the middle back to where the file is complete)."""
        return [i for i in sorted(self.table.stop_ids) if i < width]
