"""Unified diffs (as the findings store them) laid out side by side. Pure.

The findings keep their diffs as unified-diff text (``chat_template``'s ``text_diff`` and
``rendered_diff``: whitespace already made visible as ``\\n``), trimmed to a bounded number of
lines. A page shows them in two columns: a run of removed lines is paired with the run of added
lines that follows it, row by row, and a line with no partner faces an empty cell.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Side = Literal["context", "removed", "added", "empty"]


@dataclass(frozen=True)
class DiffRow:
    """One row of a side-by-side diff: ``hunk`` rows separate hunks, ``note`` rows carry trailers."""

    kind: Literal["line", "hunk", "note"]
    left: str = ""
    right: str = ""
    left_side: Side = "empty"
    right_side: Side = "empty"


@dataclass(frozen=True)
class SideBySide:
    """A whole diff: its two file labels and its rows, with how many lines each side lost or gained."""

    old_label: str
    new_label: str
    rows: tuple[DiffRow, ...]

    @property
    def removed(self) -> int:
        return sum(1 for r in self.rows if r.left_side == "removed")

    @property
    def added(self) -> int:
        return sum(1 for r in self.rows if r.right_side == "added")


def side_by_side(unified: str) -> SideBySide:
    """Lay a unified diff out in two columns (labels from its ``---``/``+++`` lines)."""
    old_label = new_label = ""
    rows: list[DiffRow] = []
    removed: list[str] = []
    added: list[str] = []

    def flush() -> None:
        for i in range(max(len(removed), len(added))):
            left = removed[i] if i < len(removed) else None
            right = added[i] if i < len(added) else None
            rows.append(DiffRow("line", left or "", right or "",
                                "removed" if left is not None else "empty",
                                "added" if right is not None else "empty"))
        removed.clear()
        added.clear()

    for line in unified.splitlines():
        if line.startswith("--- ") and not rows and not removed and not old_label:
            old_label = line[4:]
        elif line.startswith("+++ ") and not rows and not added and not new_label:
            new_label = line[4:]
        elif line.startswith("@@"):
            flush()
            rows.append(DiffRow("hunk", line, line))
        elif line.startswith("-"):
            if added:  # a removal after additions starts a new pairing
                flush()
            removed.append(line[1:])
        elif line.startswith("+"):
            added.append(line[1:])
        elif line.startswith(" "):
            flush()
            rows.append(DiffRow("line", line[1:], line[1:], "context", "context"))
        else:  # "… N more diff lines" and anything else the trimmer adds
            flush()
            rows.append(DiffRow("note", line, line))
    flush()
    return SideBySide(old_label=old_label, new_label=new_label, rows=tuple(rows))
