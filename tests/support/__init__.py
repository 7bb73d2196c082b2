"""What several test folders share, imported by its full name (``from tests.support.x import``).

Helpers used to be imported by bare module name (``from conftest import ...``), which resolves
to whichever ``conftest`` pytest loaded first, or across test files. Here: the slow exact
reference language of the decoding tests, a tiny trained tokenizer, and the quotient engine's
grammar families and provenance oracle, the two LSP clients that drive a real ``seam serve``
(``seam_lsp_client``, on pytest-lsp, and ``raw_client``, bytes on the wire for adversarial
tests), and the team tests' environment rules and tiny Qwen2 writer. Tests may also import
``benchmarks`` (the reference terminal streams); nothing outside tests imports this package.
"""
