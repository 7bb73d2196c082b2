"""What several test folders share, imported by its full name (``from tests.support.x import``).

Helpers used to be imported by bare module name (``from conftest import ...``), which resolves
to whichever ``conftest`` pytest loaded first, or across test files. Here: the slow exact
reference language of the decoding tests, a tiny trained tokenizer, and the quotient engine's
grammar families and provenance oracle. The LSP clients (``tests/lsp_server/seam_lsp_client.py``,
``tests/lsp_server/wire/raw_client.py``) stay beside their tests for now. Tests may also import
``benchmarks`` (the reference terminal streams); nothing outside tests imports this package.
"""
