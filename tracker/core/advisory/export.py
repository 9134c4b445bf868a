"""Export advisories as files, in the layout OSV tooling reads. Pure: returns bytes.

The OSV convention is one JSON file per record, named ``<id>.json``, and, for
bulk download, an ``all.zip`` holding those same files at its root: the shape
of ``https://osv-vulnerabilities.storage.googleapis.com/<Ecosystem>/all.zip``
that osv-scanner's offline mode reads (``<cache dir>/osv-scanner/<Ecosystem>/all.zip``
up to v2.4, ``osv-scalibr/<Ecosystem>/all.zip`` from v2.5; see
``shared/osv/NOTES.md`` §3). osv-scanner parses every entry with strict
protojson and silently skips a record it cannot parse, so every record is
validated here first and an invalid one is an error, not a silent loss.

Output is deterministic - same records, same bytes - so exports can be diffed
and checksummed: JSON with sorted keys and two-space indent, zip entries sorted
by name with each record's ``modified`` as the entry time.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from tracker.core.advisory.validate import validate

__all__ = ["ALL_ZIP", "build_all_zip", "checked", "export_files", "latest_records", "record_bytes", "zip_info"]

ALL_ZIP = "all.zip"
_SAFE_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]*$")


def record_bytes(record: Mapping[str, Any]) -> bytes:
    """The canonical file content of one record: UTF-8 JSON, sorted keys, indent 2, trailing newline."""
    return (json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def _modified_key(record: Mapping[str, Any]) -> datetime:
    return datetime.fromisoformat(str(record["modified"]).replace("Z", "+00:00"))


def latest_records(records: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """One record per id, the one with the latest ``modified`` (OSV's rule for duplicates), validated.

    Raises :class:`tracker.core.advisory.validate.AdvisoryValidationError` for an
    invalid record and ValueError for an id that is not safe as a file name.
    """
    out: dict[str, Mapping[str, Any]] = {}
    for record in records:
        record_id = checked(record)
        current = out.get(record_id)
        if current is None or _modified_key(record) > _modified_key(current):
            out[record_id] = record
    return out


def checked(record: Mapping[str, Any]) -> str:
    """Validate one record for export; its id, safe as a file name (else ValueError)."""
    validate(record)
    record_id = str(record["id"])
    if not _SAFE_ID.match(record_id) or ".." in record_id:
        raise ValueError(f"advisory id {record_id!r} is not safe as a file name")
    return record_id


def zip_info(record: Mapping[str, Any]) -> zipfile.ZipInfo:
    """The ``all.zip`` entry of one record: ``<id>.json``, dated by its ``modified``, deflated."""
    stamp = _modified_key(record)
    date_time = (max(stamp.year, 1980), stamp.month, stamp.day, stamp.hour, stamp.minute, stamp.second)
    info = zipfile.ZipInfo(f"{record['id']}.json", date_time=date_time)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    return info


def export_files(records: Iterable[Mapping[str, Any]]) -> dict[str, bytes]:
    """``{"<id>.json": bytes}`` for every record (latest ``modified`` per id), sorted by name."""
    latest = latest_records(records)
    return {f"{rid}.json": record_bytes(latest[rid]) for rid in sorted(latest)}


def build_all_zip(records: Iterable[Mapping[str, Any]]) -> bytes:
    """``all.zip`` bytes: every ``<id>.json`` of :func:`export_files` at the zip root, deflated."""
    latest = latest_records(records)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for rid in sorted(latest):
            record = latest[rid]
            archive.writestr(zip_info(record), record_bytes(record))
    return buffer.getvalue()
