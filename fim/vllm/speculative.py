"""Why a vLLM server with Seam's constraint runs without speculative decoding.

vLLM runs custom logits processors only without speculative decoding (vLLM 0.32): under the
V1 model runner, ``vllm.v1.sample.logits_processor.build_logitsprocs`` refuses
``--logits-processors`` when a speculative config is set and builds none of the installed
plugins (so a constrained request would run unconstrained); under Model Runner V2 a step has
one logits row per draft token, which Seam's rows (one per request) do not follow, so Seam's
processor refuses to be built (``fim.vllm.processor``) and the server does not start.  Kept
free of vLLM imports: ``seam team-server`` says it before vLLM starts, the plugin when it
loads (``fim.vllm.runner_compat.log_load``).
"""

from __future__ import annotations

from collections.abc import Sequence

#: The one line a server's start says about speculative decoding.
SPECULATIVE_NOTE = (
    "speculative decoding is off with Seam's constraint: vLLM runs custom logits processors "
    "only without it (the V1 runner then skips them, so constrained requests would run "
    "unconstrained; under Model Runner V2 Seam's processor refuses to load); start vLLM "
    "without --speculative-config")

#: vLLM's options that turn speculative decoding on.
SPECULATIVE_OPTIONS = ("--speculative-config", "--speculative_config", "-sc")


def turns_on(vllm_args: Sequence[str]) -> bool:
    """Whether vLLM's command-line arguments turn speculative decoding on."""
    return any(a.split("=", 1)[0] in SPECULATIVE_OPTIONS for a in vllm_args)
