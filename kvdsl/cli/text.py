"""What the commands print of text a user gave: control characters shown escaped."""

from __future__ import annotations

import unicodedata

#: Unicode categories printed escaped: control and format characters, line and paragraph
#: separators (a terminal acts on them, or shows nothing).
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp"})


def escaped(text: str, keep: str = "\t") -> str:
    """``text`` with each control or invisible formatting character (but those in ``keep``)
    written as Python writes it in a string literal: ``\\x01``, ``\\u200b``, ``\\n``."""
    if text.isprintable():
        return text
    return "".join(
        repr(c)[1:-1] if c not in keep and unicodedata.category(c) in _HIDDEN else c for c in text
    )
