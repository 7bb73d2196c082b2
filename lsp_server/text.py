"""Document text as the model may see it, and the model's middle as the document wants it.

Editors send whatever the buffer holds. Two kinds of text broke every request:

* lone UTF-16 surrogates (JSON ``"\\ud800"`` decodes to a Python string no tokenizer accepts):
  each becomes U+FFFD, which is also one code point, one UTF-16 unit and three UTF-8 bytes, so
  no offset moves;
* files whose lines end in ``\\r`` (classic Mac) or ``\\r\\n``: the model sees ``\\n`` (what it
  was trained on), and the middle it writes gets the document's own line break back.

The document itself keeps its exact text: only the copy handed to the model is normalised,
so accepting a suggestion never rewrites characters outside the middle.
"""

from __future__ import annotations

import re

_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")
_BREAK = re.compile(r"\r\n?")


def for_model(text: str) -> str:
    """``text`` with lone surrogates replaced and every line break a ``\\n``."""
    if not text.isascii():
        text = _LONE_SURROGATE.sub("\ufffd", text)
    if "\r" in text:
        text = _BREAK.sub("\n", text)
    return text


def line_break_of(text: str) -> str:
    """The document's line break: that of its first line, ``\\n`` when it has none."""
    i = text.find("\n")
    j = text.find("\r")
    if j < 0:
        return "\n"
    if i < 0 or j < i:
        return "\r\n" if text.startswith("\r\n", j) else "\r"
    return "\n"


def for_document(middle: str, line_break: str) -> str:
    """A middle written with ``\\n`` breaks, in the document's line break."""
    return middle if line_break == "\n" else middle.replace("\n", line_break)
