"""Seam on model servers people already run: llama.cpp's ``llama-server`` and any
OpenAI-compatible ``/v1/completions`` endpoint, kept exact by verify-and-repair.

The server streams its greedy middle with the top-N alternatives of every position; Seam's own
decoding loop (``fim.decoding``) reads them as if they were the model's logits, feeds each token
to the constraint, and where it takes a token other than the server's, the stream is dropped
and a new request continues from the prompt plus the middle so far (``fim.servers.verify``).
``fim.servers.engine.connect`` is the entry point.
"""
