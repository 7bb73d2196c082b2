"""The class vLLM's plugin group names: Seam's processor, found by a plain ``vllm serve``.

pyproject.toml registers :class:`InstalledSeamLogitsProcessor` in the ``vllm.logits_processors``
entry-point group, so every vLLM server started in an environment with Seam installed loads it
with no flag (``vllm.v1.sample.logits_processor._load_logitsprocs_plugins`` under the V1 runner,
``..._load_v2_logitsprocs_plugins`` under V2).  It is Seam's processor, with one difference:
vLLM loads installed plugins *and* the classes named by ``--logits-processors``, so a server
also given Seam's processor (or a subclass, such as the step benchmark's timing one) by flag
would run the constraint twice per row.  The installed one then stands aside (inert: it
leaves every row as it is) and says so in the log; the named one does the work.

Like Seam's processor, it leaves every request without Seam's arguments alone.
"""

from __future__ import annotations

import importlib
import logging

import torch

from fim.vllm.processor import SeamLogitsProcessor

log = logging.getLogger("vllm.seam")


def _is_seam(entry: object) -> bool:
    """Whether a ``--logits-processors`` entry (a class or ``module:Class``) is Seam's
    processor or a subclass of it."""
    if isinstance(entry, str):
        module, _, name = entry.partition(":")
        try:
            entry = importlib.import_module(module)
            for part in name.split("."):
                entry = getattr(entry, part)
        except (ImportError, AttributeError):
            return False  # vLLM reports a name that does not load itself
    return isinstance(entry, type) and issubclass(entry, SeamLogitsProcessor) \
        and entry is not InstalledSeamLogitsProcessor


def named_by_flag(vllm_config) -> bool:
    """Whether the server's ``--logits-processors`` already names a Seam processor."""
    model = getattr(vllm_config, "model_config", None)
    return any(_is_seam(e) for e in (getattr(model, "logits_processors", None) or ()))


class InstalledSeamLogitsProcessor(SeamLogitsProcessor):
    """Seam's processor as the entry point loads it (see the module docstring)."""

    def __init__(self, vllm_config, *runner_args) -> None:
        self.inert = named_by_flag(vllm_config)
        if self.inert:
            log.info("Seam's installed plugin stands aside: --logits-processors names Seam's "
                     "processor already (one constraint per row)")
            return
        super().__init__(vllm_config, *runner_args)

    def is_argmax_invariant(self) -> bool:
        return self.inert or super().is_argmax_invariant()

    def update_state(self, batch_update) -> None:
        if not self.inert:
            super().update_state(batch_update)

    def add_request(self, req_idx: int, sampling_params) -> bool:
        return False if self.inert else super().add_request(req_idx, sampling_params)

    def apply(self, logits: torch.Tensor, ctx=None) -> torch.Tensor:
        return logits if self.inert else super().apply(logits, ctx)
