"""Seam's constraint inside vLLM: the logits processor (``fim.vllm.processor``, loaded in vLLM's
engine process) and the per-request constraint it keeps per batch row (``fim.vllm.rows``)."""
