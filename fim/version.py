"""Seam's version, written here once.

``pyproject.toml`` reads it for the distribution's metadata (``seam-complete``), ``seam
--version`` prints it and the language server announces it in ``initialize``. It lives in
``fim`` because that is the lowest package the command line and the server both import.
"""

__version__ = "0.1.0"
