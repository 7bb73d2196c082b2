"""Seam's benchmarks: the scripts that measure the figures in docs/ and write them there.

Run each from the repository root as a module, ``python -m benchmarks.bench_latency ...``
(``python benchmarks/bench_latency.py ...`` works too: each script puts the repository root on
the path when it is run as a file). Inside the package every import names it:
``from benchmarks.stats import percentile``.

Shared here: :mod:`benchmarks.report` (where a figure comes from and how it gets into docs/),
:mod:`benchmarks.stats` (the one percentile and the paired statistics), :mod:`benchmarks.
lsp_session` (a client of ``seam serve``), and the reference terminal streams from CPython's
``tokenize`` (:mod:`benchmarks.py_terminals` for lark's grammar, :mod:`benchmarks.
cpython_terminals` for Seam's). Imports point one way: tests may import these modules (the
grammar and quotient tests use the reference streams), benchmarks never import tests
(``tests/test_import_layers.py``).
"""
