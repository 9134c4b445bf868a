"""Find every Hub model reference under a path: walk, read with caps, parse by kind, never run anything."""

from __future__ import annotations

import io
import os
import tokenize
from collections.abc import Callable
from pathlib import Path

from tracker.pipeline.scan.configs import (
    ConfigFileError,
    find_in_json,
    find_in_toml,
    find_in_yaml,
    mentions_models,
)
from tracker.pipeline.scan.files import MAX_BYTES, Candidate, read_regular, walk
from tracker.pipeline.scan.model import Found, Reference, Skipped, SourceKind
from tracker.pipeline.scan.notebook import NotebookError, find_in_notebook
from tracker.pipeline.scan.python import CALLS, char_column, find_in_tree, parse
from tracker.pipeline.scan.text import split_lines

# A Python file that names none of the loading calls cannot hold a reference: not parsed at all.
_TRIGGERS = tuple(name.encode() for name in CALLS)


class UnreadableFile(Exception):
    """Why one file was skipped; the scan goes on with the others."""


def find_references(root: Path) -> Found:
    """The references under ``root`` (a folder or one file), sorted by file, line and column."""
    root = Path(root)
    references: list[Reference] = []
    skipped: list[Skipped] = []
    files_read = 0
    for candidate in walk(root):
        if isinstance(candidate, Skipped):  # a folder that could not be read
            skipped.append(candidate)
            continue
        try:
            found, partly = _read(candidate)
        except UnreadableFile as exc:
            skipped.append(Skipped(candidate.relative, str(exc)))
            continue
        except RecursionError:  # a syntax tree or document nested deeper than Python's stack allows
            skipped.append(Skipped(candidate.relative, "nested too deeply to read"))
            continue
        files_read += 1
        references.extend(found)
        skipped.extend(partly)
    references.sort(key=lambda r: r.sort_key)
    return Found(references=tuple(references), files_read=files_read, skipped=tuple(skipped))


def _local_path_check(folder: Path) -> Callable[[str], bool]:
    """An ``owner/name`` that exists as a path from the file's folder or any folder above it is local.

    Code resolves relative paths against its working directory, which is usually
    the project root or a folder above the file: ``from_pretrained("models/bert")``
    with a ``models/bert`` folder there loads that folder, not the Hub.
    """
    folders = [folder.absolute(), *folder.absolute().parents]

    def is_local(value: str) -> bool:
        return any((where / value).exists() for where in folders)

    return is_local


def _read(candidate: Candidate) -> tuple[list[Reference], list[Skipped]]:
    """The references in one file, and the parts of it that could not be read (notebook cells)."""
    data = _read_capped(candidate)
    is_local = _local_path_check(candidate.path.parent)
    kind = candidate.kind
    if kind is SourceKind.PYTHON:
        if not any(trigger in data for trigger in _TRIGGERS):
            return [], []
        return _python(candidate, _decode_python(data), is_local), []
    if kind is SourceKind.NOTEBOOK:
        if not any(trigger in data for trigger in _TRIGGERS):
            return [], []
        return _notebook(candidate, _decode_text(data), is_local)
    if not mentions_models(data):
        return [], []
    text = _decode_text(data)
    finder = {SourceKind.YAML: find_in_yaml, SourceKind.JSON: find_in_json, SourceKind.TOML: find_in_toml}[kind]
    try:
        found = finder(text, is_local)
    except ConfigFileError as exc:
        raise UnreadableFile(str(exc)) from exc
    return [Reference(file=candidate.relative, line=r.line, column=r.column, repo=r.repo, ref=r.ref, source=kind,
                      via=r.key) for r in found], []


def _read_capped(candidate: Candidate) -> bytes:
    cap = MAX_BYTES[candidate.kind]
    try:
        size = os.lstat(candidate.path).st_size
        if size > cap:
            raise UnreadableFile(f"larger than {cap // (1024 * 1024)} MiB ({size} bytes)")
        data = read_regular(candidate.path, cap + 1)  # a FIFO or device is refused, never waited on
    except OSError as exc:
        raise UnreadableFile(f"cannot read: {exc.strerror or exc}") from exc
    if len(data) > cap:  # grew while we looked
        raise UnreadableFile(f"larger than {cap // (1024 * 1024)} MiB")
    if b"\0" in data[:8192]:
        raise UnreadableFile("binary")
    return data


def _decode_python(data: bytes) -> str:
    """Honour a PEP 263 coding line or a BOM, as the interpreter would."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError) as exc:
        raise UnreadableFile(f"cannot decode: {exc}") from exc


def _decode_text(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UnreadableFile("not UTF-8 text") from exc


def _python(candidate: Candidate, source: str, is_local: Callable[[str], bool]) -> list[Reference]:
    try:
        tree = parse(source, candidate.relative)
    except SyntaxError as exc:
        raise UnreadableFile(f"not valid Python 3 (line {exc.lineno}: {exc.msg})") from exc
    except (ValueError, RecursionError, MemoryError) as exc:
        raise UnreadableFile(f"cannot parse: {type(exc).__name__}") from exc
    lines = split_lines(source)
    return [
        Reference(file=candidate.relative, line=r.line, column=char_column(lines[r.line - 1], r.column) + 1,
                  repo=r.repo, ref=r.ref, source=SourceKind.PYTHON, via=r.via, revision_expr=r.revision_expr)
        for r in find_in_tree(tree, is_local)
    ]


def _notebook(candidate: Candidate, text: str,
              is_local: Callable[[str], bool]) -> tuple[list[Reference], list[Skipped]]:
    try:
        found, unparsed = find_in_notebook(text, is_local)
    except NotebookError as exc:
        raise UnreadableFile(str(exc)) from exc
    skipped = [Skipped(candidate.relative, f"cell {n}: not valid Python (IPython syntax other than magics?)")
               for n in unparsed]
    return [
        Reference(file=candidate.relative, line=c.line, column=None if c.column is None else c.column + 1,
                  repo=c.found.repo, ref=c.found.ref,
                  source=SourceKind.NOTEBOOK, via=c.found.via, cell=c.cell, revision_expr=c.found.revision_expr)
        for c in found
    ], skipped
