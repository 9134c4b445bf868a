"""Offsets to lines and columns, and line splitting as Python's own parser does it. Contains no I/O."""

from __future__ import annotations

import bisect
import io
import itertools


def split_lines(text: str) -> list[str]:
    """Lines with their endings; only ``\\n``, ``\\r\\n`` and ``\\r`` end a line (unlike ``str.splitlines``)."""
    return io.StringIO(text, newline="").readlines()


class LineIndex:
    """Maps a character offset in a text to its 1-based line and 0-based column."""

    def __init__(self, text: str) -> None:
        self.starts = [0, *itertools.accumulate(len(line) for line in split_lines(text))]

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset)

    def column_of(self, offset: int) -> int:
        return offset - self.starts[self.line_of(offset) - 1]
