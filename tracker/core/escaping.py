r"""One way to show an upstream string as text: control and bidi characters escaped. Pure.

File names, commit titles, tokens and branch names come from whoever controls a repo. A
right-to-left override (U+202E) in ``model\u202ecod.py`` makes pages and terminals show
``modelyp.doc``; an escape sequence (``\x1b[2J``) clears a terminal; a newline forges a line.
Wherever such a string is shown for reading (findings summaries, advisory details, CLI lines,
pages, feeds) it goes through :func:`escape_controls`, which writes those characters as the
escapes Python would (``\u202e``), so the name reads as what it is. Data answers (JSON) keep
names as they are.

Each place text leaves the process has one function, built on :func:`escape_controls`:

- a terminal (the text reports of ``tracker audit``, ``scan``, ``estimate``, ``deliveries``):
  :func:`escape_lines`, each line escaped before the lines are joined, so a newline in a name
  cannot forge a line (``v1\nacme/model@...``);
- the logs: :func:`escape_controls` on each record's message (``tracker.surfaces.logs``);
- SARIF ``message.text``, which viewers render as Markdown: :func:`escape_markdown`, so that a
  revision literal ``[Pin the fixed revision](https://evil.example/fix)`` is not a link;
- CycloneDX: :func:`escape_strings` over the whole document.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import Any

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


def escape_lines(lines: Iterable[str]) -> str:
    """Lines for a terminal: each one escaped (a newline inside it included), then joined by newlines."""
    return "\n".join(escape_controls(line) for line in lines)


# What makes Markdown (and SARIF's embedded links, ``[text](target)``) out of plain text: links and
# images need brackets, autolinks and HTML angle brackets, code spans backticks, emphasis asterisks;
# GitHub's bare-URL autolinks need ``scheme://`` or ``www.`` (the ``:`` or ``.`` escaped breaks them).
_MARKDOWN = re.compile(r"([\\`*\[\]<>])|(?<=[A-Za-z])(:)(?=//)|(?<=\b[Ww]{3})(\.)")


def escape_markdown(text: str) -> str:
    """``text`` as plain text for a Markdown reader: controls escaped, then the characters that make
    links, images, HTML, code spans and emphasis backslash-escaped (CommonMark's escapes, which are
    also the escapes of SARIF 2.1.0's plain-text messages, §3.11.6). Not idempotent: apply it once,
    where the text leaves."""
    return _MARKDOWN.sub(lambda m: "\\" + m.group(0), escape_controls(text))


def escape_strings(value: Any) -> Any:
    """``value`` (a JSON document) with :func:`escape_controls` applied to every string in it, keys
    included. Identifiers made of printable characters (purls, ids, shas) come out as they went in."""
    if isinstance(value, str):
        return escape_controls(value)
    if isinstance(value, dict):
        return {escape_controls(k) if isinstance(k, str) else k: escape_strings(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [escape_strings(v) for v in value]
    return value
