r"""One way to show an upstream string as text: control and bidi characters escaped. Pure.

File names, commit titles, tokens and branch names come from whoever controls a repo. A
right-to-left override (U+202E) in ``model\u202ecod.py`` makes pages and terminals show
``modelyp.doc``; an escape sequence (``\x1b[2J``) clears a terminal; a newline forges a line.
Wherever such a string is shown for reading (findings summaries, advisory details, CLI lines,
pages, feeds) it goes through :func:`escape_controls`, which writes those characters as the
escapes Python would (``\u202e``), so the name reads as what it is. Data answers (JSON) keep
names as they are.
"""

from __future__ import annotations

import unicodedata

# Control (Cc), format (Cf: the bidi embeddings, overrides and isolates, zero-width marks),
# line and paragraph separators (Zl, Zp), lone surrogates (Cs).
_ESCAPED = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape_controls(text: str, *, keep_whitespace: bool = False) -> str:
    """``text`` with control, format and separator characters written as escapes.

    ``keep_whitespace`` keeps newlines and tabs (for multi-line text shown as such, in HTML).
    Idempotent: an escaped string has nothing left to escape.
    """
    if text.isprintable():  # the common case, in C: no character to escape
        return text
    out = []
    for char in text:
        if unicodedata.category(char) not in _ESCAPED or (keep_whitespace and char in "\n\t"):
            out.append(char)
        elif char in _SHORT:
            out.append(_SHORT[char])
        else:
            point = ord(char)
            out.append(f"\\x{point:02x}" if point < 0x100 else f"\\u{point:04x}" if point < 0x10000
                       else f"\\U{point:08x}")
    return "".join(out)
