"""Hub model references in Jupyter notebooks: each code cell parsed as Python, never run.

IPython syntax is not Python: a line magic (``%pip install ...``) or shell
escape (``!ls``) alone on its line is blanked before parsing, so the rest of
the cell still counts; a cell magic (``%%bash``) or anything else that still
does not parse (``x = !ls``, ``obj?``) skips that cell only. Locations point
into the ``.ipynb`` file itself (its JSON lines), which is what code-scanning
UIs display; the cell number comes with them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from tracker.pipeline.scan.python import PyReference, char_column, find_in_tree, parse
from tracker.pipeline.scan.text import LineIndex, split_lines


@dataclass(frozen=True)
class CellReference:
    cell: int  # 1-based, counting every cell (as Jupyter's UI numbers them)
    line: int  # 1-based line of the .ipynb file
    column: int | None  # 0-based character column in the .ipynb file, when exact
    found: PyReference


class NotebookError(ValueError):
    """Not a notebook this scan can read (not JSON, not nbformat 4)."""


def _locate(text: str, source: object, cursor: int) -> list[tuple[str, int | None, int | None, bool]]:
    """Each line of a cell's source: (text, start and end of its JSON string in the file, column exact).

    nbformat writes one line per string; a source given as one string (or a
    string holding several lines) places its lines at that string, without
    an exact column.
    """
    if isinstance(source, str):
        source = [source]
    if not isinstance(source, list) or not all(isinstance(item, str) for item in source):
        return []
    entries: list[tuple[str, int | None, int | None, bool]] = []
    for item in source:
        span = _find_string(text, item, cursor)
        if span is not None:
            cursor = span[1]
        start, end = span if span else (None, None)
        parts = split_lines(item) or [item]
        for i, part in enumerate(parts):
            entries.append((part, start, end, i == 0))
    return entries


def _without_magics(lines: list[str]) -> str | None:
    """The cell as Python, magics blanked (keeping line numbers); None for a cell magic."""
    first = next((line for line in lines if line.strip()), "")
    if first.lstrip().startswith("%%"):
        return None
    out = []
    for line in lines:
        stripped = line.lstrip()
        out.append("\n" if stripped.startswith(("%", "!")) else line if line.endswith("\n") else line + "\n")
    return "".join(out)


_SOURCE_KEY = re.compile(r'"source"\s*:\s*')


def find_in_notebook(text: str, is_local_path: Callable[[str], bool]) -> tuple[list[CellReference], list[int]]:
    """References in the code cells, and the numbers of code cells that could not be parsed."""
    try:
        notebook = json.loads(text)
    except ValueError as exc:
        raise NotebookError(f"not valid JSON: {exc}") from exc
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        raise NotebookError("no 'cells' list (only nbformat 4 notebooks are read)")
    index = LineIndex(text)
    cursor = 0
    found: list[CellReference] = []
    unparsed: list[int] = []
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or "source" not in cell:
            continue
        key = _SOURCE_KEY.search(text, cursor)
        cursor = key.end() if key else cursor
        entries = _locate(text, cell["source"], cursor)
        cursor = max([cursor, *(end for _, _, end, _ in entries if end is not None)])
        if cell.get("cell_type") != "code" or not entries:
            continue
        source = _without_magics([line for line, _, _, _ in entries])
        if source is None:
            continue
        try:
            tree = parse(source, f"<cell {number}>")
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            unparsed.append(number)
            continue
        for ref in find_in_tree(tree, is_local_path):
            line_text, start, _, exact = entries[ref.line - 1]
            if start is None:
                start, exact = (key.end() if key else 0), False
            column = None
            if exact:
                chars = char_column(line_text, ref.column)
                prefix = line_text[:chars]
                # Exact only when nothing before it is escaped in the JSON string.
                if json.dumps(prefix, ensure_ascii=False)[1:-1] == prefix:
                    column = index.column_of(start) + 1 + chars
            found.append(CellReference(cell=number, line=index.line_of(start), column=column, found=ref))
    return found, unparsed


def _find_string(text: str, value: str, start: int) -> tuple[int, int] | None:
    """The span of the JSON string literal holding ``value`` (quotes included), from ``start`` on."""
    for ensure_ascii in (False, True):
        encoded = json.dumps(value, ensure_ascii=ensure_ascii)
        where = text.find(encoded, start)
        if where >= 0:
            return where, where + len(encoded)
    return None
