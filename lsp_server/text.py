"""Document text as the model may see it, and the model's middle as the document wants it.

Editors send whatever the buffer holds. Two kinds of text broke every request:

* lone UTF-16 surrogates (JSON ``"\\ud800"`` decodes to a Python string no tokenizer accepts):
  each becomes U+FFFD, which is also one code point, one UTF-16 unit and three UTF-8 bytes, so
  no offset moves;
* files whose lines end in ``\\r`` (classic Mac) or ``\\r\\n``: the model sees ``\\n`` (what it
  was trained on), and the middle it writes gets the document's own line break back.

The document itself keeps its exact text: only the copy handed to the model is normalised,
so accepting a suggestion never rewrites characters outside the middle. The functions are
``fim.lines``'s, which the ``seam complete`` command line uses too: one definition of a line
break for both (this module names them where the server looks for them).
"""

from __future__ import annotations

from fim.lines import for_document, for_model, line_break_of

__all__ = ["for_document", "for_model", "line_break_of"]
