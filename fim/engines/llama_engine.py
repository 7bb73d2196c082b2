"""The llama.cpp engine: GGUF models on a CPU (or Apple's Metal) through ``llama-cpp-python``.

It reads the quantized GGUF file as it is (no conversion, no torch) and uses llama.cpp's
low-level API directly, because the decoder needs what the high-level ``Llama`` class hides:

* one context holding several sequences (the step model's slots) in a *unified* KV cache, so
  forking a cached prefix into another slot (``llama_memory_seq_cp``) shares cells instead of
  copying them;
* logits of exactly the positions asked for, read as a numpy view
  (``llama_get_logits_ith``);
* cropping a sequence (``llama_memory_seq_rm``) for retracing and cached-prefix reuse;
* an abort callback, so a cancelled request stops inside a long prompt chunk, not after it.

Weights are not repacked (``use_extra_bufts = False``): with repacking, logits of the same
prompt differ (by up to 0.5 here) with how the prompt is split into batches, so a prompt
resumed from the cache would not see the logits a cold run sees; and the AMX repacking of
llama.cpp 0.3.36 crashes on CPUs whose hypervisor hides AMX.

Token ids the GGUF marks control, unused or unknown are never text (Qwen2.5's padding ids
151665-151935 would otherwise print as ``[PAD151665]``); control tokens serve only as
sentinels and stops.

The thread count is chosen before each run of the model (every request starts with a prefill)
by a :class:`~fim.engines.cpu_load.ThreadGovernor`: every CPU on a quiet machine, fewer when
other processes keep some busy (``fim/engines/cpu_load.py`` says why), or the count the caller
pinned.  ``llama_set_n_threads`` changes it on the live context, so nothing reloads.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import shutil
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from fim.engines import cpu_load
from fim.engines.backend import Backend, Progress
from fim.engines.cpu_load import LoadMonitor, ThreadChoice, ThreadGovernor
from fim.engines.model_specs import EngineKind, ModelKind, ModelSpecError
from fim.engines.step_model import ForwardInterrupted, Interrupt, Slot, StepModel
from fim.engines.vocab import Vocabulary, cached_vocabulary, read_cached_vocabulary

log = logging.getLogger(__name__)

#: Positions per slot when the caller does not say: prompt plus middle of an editor request
#: on a CPU (``fim.editor_policy.CPU_CONTEXT_TOKENS``). llama.cpp allocates and clears the
#: whole KV cache at load, so a larger default would cost load time and RAM that the server's
#: requests never use (``slots + 1`` sequences of 4,096 positions: 0.5 s and 470 MB here,
#: against ~0.3 s and 290 MB at 2,048); callers that want more pass ``window``.
DEFAULT_CONTEXT = 2048
#: Tokens per llama_decode call (and per micro-batch).
BATCH = 256

_init_lock = threading.Lock()
_initialised = False
_log_callback = None  # kept alive: llama.cpp calls it for as long as the process runs


def _lib():
    import llama_cpp.llama_cpp as lib

    return lib


_LogCallback = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)


def _native_sink():
    """A log callback that is not Python code, or ``None`` where there is none to take.

    llama.cpp logs about two thousand lines while it loads a model.  A Python callback must
    take the GIL for each; while another thread runs Python (the server builds the grammar
    tables and reads the vocabulary during the load), each wait lasts a switch interval, and
    the load took 2.5x as long.  ``getpid`` reads none of its arguments and touches no
    memory: as the callback it drops every line without entering Python.
    """
    try:
        return ctypes.cast(ctypes.CDLL(None).getpid, _LogCallback)
    except (OSError, AttributeError, TypeError):
        return None


def _init_backend() -> None:
    """Initialise llama.cpp once; its log lines go into Python logging when the
    ``llama.cpp`` logger is at DEBUG at that time, else nowhere."""
    global _initialised, _log_callback
    with _init_lock:
        if _initialised:
            return
        lib = _lib()
        logger = logging.getLogger("llama.cpp")
        route = None if logger.isEnabledFor(logging.DEBUG) else _native_sink()
        if route is None:
            @_LogCallback
            def route(level, text, _user):
                if text and logger.isEnabledFor(logging.DEBUG):
                    logger.debug("%s", text.decode("utf-8", "replace").rstrip())

        _log_callback = route
        lib.llama_log_set(route, ctypes.c_void_p(0))
        lib.llama_backend_init()
        _initialised = True


def default_threads() -> int:
    """The CPUs this process may use, at most 8 (more threads than cores only slow llama.cpp)."""
    return cpu_load.default_threads()


class LlamaModel:
    """A GGUF model and one llama.cpp context with ``slots`` sequences."""

    def __init__(self, path: Path, *, slots: int, context: int, threads: int,
                 repack: bool = False, flash_attn: bool | None = None,
                 kv_f32: bool = False) -> None:
        _init_backend()
        lib = _lib()
        self.lib = lib
        self.path = path
        mparams = lib.llama_model_default_params()
        mparams.use_extra_bufts = repack  # off by default: see the module docstring
        self.model = lib.llama_model_load_from_file(str(path).encode("utf-8"), mparams)
        if not self.model:
            raise ModelSpecError(f"llama.cpp could not load {path} (not a GGUF model it knows?)")
        self.vocab = lib.llama_model_get_vocab(self.model)
        self.n_vocab = lib.llama_vocab_n_tokens(self.vocab)
        self.train_ctx = lib.llama_model_n_ctx_train(self.model)
        self.context = max(64, min(context, self.train_ctx or context))
        cparams = lib.llama_context_default_params()
        # Every slot may fill its window and the scratch sequence (a retrace) may add as many
        # positions again beyond what it shares with its slot.
        cparams.n_ctx = self.context * (slots + 1)
        cparams.n_batch = BATCH
        cparams.n_ubatch = BATCH
        cparams.n_seq_max = slots + 1  # one scratch sequence (see LlamaStepModel)
        cparams.kv_unified = True
        cparams.n_threads = threads
        cparams.n_threads_batch = threads
        cparams.no_perf = True
        if kv_f32:
            cparams.type_k = cparams.type_v = 0  # GGML_TYPE_F32
        if flash_attn is not None:
            cparams.flash_attn_type = (lib.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash_attn
                                       else lib.LLAMA_FLASH_ATTN_TYPE_DISABLED)
        self.ctx = lib.llama_init_from_model(self.model, cparams)
        if not self.ctx:
            lib.llama_model_free(self.model)
            raise RuntimeError(f"llama.cpp could not create a context of {cparams.n_ctx} tokens")
        self.memory = lib.llama_get_memory(self.ctx)
        #: whether llama.cpp can move cached keys to other positions (RoPE is re-applied)
        self.can_shift = bool(lib.llama_memory_can_shift(self.memory))
        self.batch = lib.llama_batch_init(BATCH, 0, 1)
        self.slots = slots
        self.scratch = slots  # the sequence id the step model uses for transient work
        self._interrupt: Interrupt | None = None

        @ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_void_p)
        def abort(_data):
            check = self._interrupt
            return bool(check is not None and check())

        self._abort = abort

    @property
    def threads(self) -> int:
        """The threads llama.cpp runs a single-token pass with, as the context says."""
        return int(self.lib.llama_n_threads(self.ctx))

    def set_threads(self, threads: int) -> None:
        """Run later passes (single tokens and prompt batches alike) with ``threads``."""
        if threads < 1:
            raise ValueError(f"threads must be at least 1, not {threads}")
        if threads != self.threads or threads != self.lib.llama_n_threads_batch(self.ctx):
            self.lib.llama_set_n_threads(self.ctx, threads, threads)

    def close(self) -> None:
        lib = self.lib
        if getattr(self, "ctx", None):
            lib.llama_batch_free(self.batch)
            lib.llama_free(self.ctx)
            self.ctx = None
        if getattr(self, "model", None):
            lib.llama_model_free(self.model)
            self.model = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter teardown: the library may be gone
            pass

    # ----- tokens ------------------------------------------------------------------------------

    def tokenize(self, data: bytes, special: bool) -> list[int]:
        lib = self.lib
        cap = len(data) + 8
        buf = (lib.llama_token * cap)()
        n = lib.llama_tokenize(self.vocab, data, len(data), buf, cap, False, special)
        if n < 0:
            cap = -n
            buf = (lib.llama_token * cap)()
            n = lib.llama_tokenize(self.vocab, data, len(data), buf, cap, False, special)
        return list(buf[:n])

    def piece(self, token: int, special: bool = False) -> bytes:
        buf = ctypes.create_string_buffer(64)
        n = self.lib.llama_token_to_piece(self.vocab, token, buf, 64, 0, special)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = self.lib.llama_token_to_piece(self.vocab, token, buf, -n, 0, special)
        return buf.raw[:n]

    def attr(self, token: int) -> int:
        return int(self.lib.llama_vocab_get_attr(self.vocab, token))

    # ----- forward passes ------------------------------------------------------------------------

    def forward(self, seq: int, positions: Sequence[int], ids: list[int],
                interrupt: Interrupt | None) -> np.ndarray:
        """Run ``ids`` at ``positions`` of sequence ``seq``; the logits after the last.

        Each token attends to the cells of ``seq`` at positions up to its own, so tokens may
        be placed before cells already cached (the step model's position-shifting reuse).
        """
        lib, batch = self.lib, self.batch
        self._interrupt = interrupt
        lib.llama_set_abort_callback(self.ctx, self._abort if interrupt else
                                     ctypes.cast(None, type(self._abort)), None)
        done = 0
        try:
            while done < len(ids):
                part = ids[done:done + BATCH]
                last = done + len(part) == len(ids)
                for i, tok in enumerate(part):
                    batch.token[i] = tok
                    batch.pos[i] = positions[done + i]
                    batch.n_seq_id[i] = 1
                    batch.seq_id[i][0] = seq
                    batch.logits[i] = 1 if (last and i == len(part) - 1) else 0
                batch.n_tokens = len(part)
                rc = lib.llama_decode(self.ctx, batch)
                if rc == 2:  # aborted: one call is one micro-batch, and it did not finish
                    raise ForwardInterrupted(done)
                if rc != 0:
                    raise RuntimeError(
                        f"llama_decode failed ({rc}): "
                        + ("the KV cache is full" if rc == 1 else "invalid batch or fatal error"))
                done += len(part)
        finally:
            self._interrupt = None
        ptr = lib.llama_get_logits_ith(self.ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy()

    def seq_add(self, seq: int, p0: int, p1: int, delta: int) -> None:
        self.lib.llama_memory_seq_add(self.memory, seq, p0, p1, delta)

    def seq_rm(self, seq: int, p0: int, p1: int = -1) -> bool:
        return bool(self.lib.llama_memory_seq_rm(self.memory, seq, p0, p1))

    def seq_cp(self, src: int, dst: int, p0: int, p1: int) -> None:
        self.lib.llama_memory_seq_cp(self.memory, src, dst, p0, p1)


class LlamaStepModel(StepModel):
    """:class:`~fim.engines.step_model.StepModel` over a :class:`LlamaModel`'s sequences.

    One prompt chunk is a whole llama.cpp batch: the abort callback stops inside it.
    ``governor`` sets the thread count at the start of each :meth:`prefill` (a request's or a
    warm-up's first pass), never between the steps of a decode.
    """

    def __init__(self, llama: LlamaModel, governor: ThreadGovernor | None = None) -> None:
        super().__init__(llama.slots, chunk=BATCH)
        self.llama = llama
        self.governor = governor
        self.last_threads: ThreadChoice | None = None

    def prefill(self, ids: list[int], interrupt: Interrupt | None = None,
                progress: Callable[[int, int], None] | None = None,
                keep_cached: bool = False, hold: bool = False) -> np.ndarray | None:
        if self.governor is not None:
            self.last_threads = self.governor.choose()
            self.llama.set_threads(self.last_threads.threads)
            log.debug("prefill of %d tokens, %d threads (%s)", len(ids),
                      self.last_threads.threads, self.last_threads.source.value)
        return super().prefill(ids, interrupt, progress, keep_cached, hold)

    @property
    def vocab_size(self) -> int:
        return self.llama.n_vocab

    def _forward(self, slot: Slot, ids: list[int], interrupt: Interrupt | None) -> np.ndarray:
        return self._run_in(slot.index, len(slot.tokens), ids, interrupt, slot)

    def _run_in(self, seq: int, start: int, ids: list[int],
                interrupt: Interrupt | None, owner: Slot) -> np.ndarray:
        if start + len(ids) > self.llama.context:
            raise RuntimeError(f"the sequence would exceed the {self.llama.context}-token context")
        positions = list(range(start, start + len(ids)))
        try:
            return self.llama.forward(seq, positions, ids, interrupt)
        except RuntimeError:
            # The shared cache is full: free every other slot and try once more.
            for other in self.slots:
                if other is not owner and other.tokens:
                    self._clear(other)
                    other.tokens, other.saved, other.held = [], {}, False
            return self.llama.forward(seq, positions, ids, interrupt)

    @property
    def can_shift(self) -> bool:
        return self.llama.can_shift

    def _apply_splice(self, slot: Slot, keep: int, runs: list[tuple[int, int, int]],
                      ids: list[int], interrupt: Interrupt | None) -> np.ndarray:
        # llama.cpp only appends to a sequence (a batch must start right after the
        # sequence's last position), so new tokens that go *before* moved runs are computed
        # in a scratch sequence holding the same prefix, then shared back into the slot.
        ll, seq, scratch = self.llama, slot.index, self.llama.scratch
        kept = [False] * len(slot.tokens)
        for _, j, n in runs:
            kept[j:j + n] = [True] * n
        p = keep
        while p < len(kept):  # drop the cached tokens no run keeps, range by range
            if kept[p]:
                p += 1
                continue
            q = p
            while q < len(kept) and not kept[q]:
                q += 1
            ll.seq_rm(seq, p, q)
            p = q
        # Move the runs: leftward ones first, left to right, then rightward ones, right to
        # left; targets keep the runs' order, so no move lands on a run not yet moved.
        for i, j, n in [r for r in runs if r[0] < r[1]]:
            ll.seq_add(seq, j, j + n, i - j)
        for i, j, n in reversed([r for r in runs if r[0] > r[1]]):
            ll.seq_add(seq, j, j + n, i - j)
        ll.seq_rm(scratch, -1, -1)
        ll.seq_cp(seq, scratch, 0, keep)
        try:
            pos, logits = keep, None
            for i, _, n in [*runs, (len(ids), 0, 0)]:
                if pos < i:  # new tokens before this run (or at the end)
                    logits = self._run_in(scratch, pos, ids[pos:i], interrupt, slot)
                    ll.seq_cp(scratch, seq, pos, i)
                if n:
                    ll.seq_cp(seq, scratch, i, i + n)
                pos = i + n
        except ForwardInterrupted:
            ll.seq_rm(seq, keep, -1)
            raise
        finally:
            ll.seq_rm(scratch, -1, -1)
        assert logits is not None  # the last token is never in a run
        return logits

    def _truncate(self, slot: Slot, keep: int) -> bool:
        return self.llama.seq_rm(slot.index, keep, -1)

    def _copy_prefix(self, src: Slot, dst: Slot, keep: int) -> bool:
        self.llama.seq_rm(dst.index, -1, -1)
        self.llama.seq_cp(src.index, dst.index, 0, keep)
        return True

    def _clear(self, slot: Slot) -> None:
        self.llama.seq_rm(slot.index, -1, -1)


class LlamaTokenizer:
    """llama.cpp's own tokenizer behind :class:`fim.tokenizer.TextTokenizer`."""

    def __init__(self, llama: LlamaModel, token_bytes: list[bytes | None]) -> None:
        self.llama = llama
        self._bytes = token_bytes
        lib = llama.lib
        bos = lib.llama_vocab_bos(llama.vocab)
        eos = lib.llama_vocab_eos(llama.vocab)
        self.bos_token_id = bos if bos >= 0 else None
        self.eos_token_id = eos if eos >= 0 else None

    def encode(self, text: str) -> list[int]:
        if not text:
            return []
        # parse_special=False: special-token names in the user's text stay text.
        return self.llama.tokenize(text.encode("utf-8", "replace"), special=False)

    def decode(self, ids: Sequence[int]) -> str:
        table = self._bytes
        return b"".join(table[i] or b"" for i in ids if 0 <= i < len(table)).decode(
            "utf-8", "replace")

    def token_id(self, piece: str) -> int | None:
        ids = self.llama.tokenize(piece.encode("utf-8"), special=True)
        if len(ids) == 1 and self.llama.piece(ids[0], special=True) == piece.encode("utf-8"):
            return ids[0]
        return None


_TEXT = 1 << 2 | 1 << 4 | 1 << 5  # NORMAL | USER_DEFINED | BYTE
_NOT_TEXT = 1 << 0 | 1 << 1 | 1 << 3  # UNKNOWN | UNUSED | CONTROL


def build_llama_vocabulary(llama: LlamaModel) -> Vocabulary:
    """The bytes of every text token; control, unused and unknown ids are ``None``."""
    table: list[bytes | None] = []
    special = set()
    for i in range(llama.n_vocab):
        attr = llama.attr(i)
        if attr & _NOT_TEXT or not attr & _TEXT:
            table.append(None)
            special.add(i)
            continue
        data = llama.piece(i)
        table.append(data if data else None)
    return Vocabulary(table, frozenset(special))


def _vocab_cache_dir(path: Path) -> Path:
    from fim.engines.bundled import cache_root

    digest = hashlib.sha1(str(path.resolve()).encode("utf-8")).hexdigest()[:12]
    return cache_root() / "vocabularies" / f"{path.stem}-{digest}"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("llama-cpp-python")
    except PackageNotFoundError:
        return "?"


def load_llama_backend(spec: str, kind: ModelKind, *, progress: Progress | None = None,
                       slots: int = 4, window: int | None = None,
                       threads: int | None = None) -> Backend:
    """Load a GGUF model (``bundled:...``, a ``.gguf`` path, ``random:...``) with llama.cpp.

    ``threads``: a fixed thread count; ``None`` chooses it before each request from the load
    other processes put on the CPUs (:mod:`fim.engines.cpu_load`), at most one per CPU this
    process may use.  Either way the count can be changed later through
    ``backend.threads`` (:class:`~fim.engines.cpu_load.ThreadGovernor`: ``pin(n)``,
    ``pin(None)`` for the automatic choice).
    """
    if kind is ModelKind.BUNDLED:
        from fim.engines import bundled

        path = bundled.gguf_file(bundled.lookup_spec(spec), progress)
    elif kind is ModelKind.GGUF:
        path = Path(spec).expanduser()
    elif kind is ModelKind.RANDOM:
        from fim.engines.gguf_export import random_santacoder_gguf

        path = random_santacoder_gguf(spec)
    else:
        raise ModelSpecError(f"the llama.cpp engine cannot load {spec!r} (not a GGUF model)")
    if progress:
        progress(0.9, f"loading {path.name} with llama.cpp")
    most = default_threads()
    monitor = LoadMonitor.for_this_process()
    governor = ThreadGovernor(most, cpu_load.cpu_count(), monitor, pinned=threads)
    cache = None if kind is ModelKind.RANDOM else _vocab_cache_dir(path)
    # Read the cached vocabulary while llama.cpp loads the weights (its C code runs
    # without the GIL): a quarter of a second less before the model is ready.
    reading = None
    if cache is not None:
        reading = ThreadPoolExecutor(1, thread_name_prefix="seam-vocab")
        read = reading.submit(read_cached_vocabulary, cache, path)
    try:
        llama = LlamaModel(path, slots=slots, context=window or DEFAULT_CONTEXT,
                           threads=threads or most)
    finally:
        if kind is ModelKind.RANDOM:  # a temporary export; llama.cpp holds what it needs
            shutil.rmtree(path.parent, ignore_errors=True)
        if reading is not None:
            reading.shutdown(wait=True)
    step = LlamaStepModel(llama, governor)
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
    vocab, order = cached_vocabulary(lambda: build_llama_vocabulary(llama), llama.n_vocab,
                                     cache, path, read.result() if reading else None)
    if progress:
        progress(1.0, "model ready")
    return Backend(
        engine=EngineKind.LLAMA_CPP, spec=spec, step_model=step,
        tokenizer=LlamaTokenizer(llama, vocab.token_bytes), vocab=vocab, heal_order=order,
        window=llama.context, device="cpu",
        description=f"llama.cpp (llama-cpp-python {_version()}), "
                    + (f"{threads} threads" if threads else
                       f"threads chosen from the CPU load (at most {most})")
                    + f", {path.name}",
        cache_dir=cache, threads=governor)
