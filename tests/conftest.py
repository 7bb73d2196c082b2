"""Shared pytest configuration.

Property tests explore new random examples on every local run; in CI (`CI` set) they replay a
fixed, derandomized set so that a run is reproducible, and new counterexamples are found
locally, not by a submission's gate.
"""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
