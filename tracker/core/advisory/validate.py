"""Validate an OSV record the way the strictest consumers will read it.

Two checks, both needed (``shared/osv/NOTES.md`` §1.6, §3, §6.4):

1. the official JSON schema (``osv-schema.json`` beside this module: a copy of
   ossf/osv-schema ``validation/schema.json`` at 51b8156, spec 1.7.5, Apache-2.0),
   with format checking;
2. unknown keys. The schema forbids them only at the top level, but osv-scanner
   and every other protobuf-based reader parse records with strict
   ``protojson.Unmarshal``, which rejects an unknown field at *any* level, and
   osv-scanner then drops the record silently. So every object is checked
   against the fields of ``proto/vulnerability.proto``; only the free-form
   ``database_specific`` and ``ecosystem_specific`` objects may hold anything.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

__all__ = ["AdvisoryValidationError", "schema", "strict_key_errors", "validate"]


class AdvisoryValidationError(ValueError):
    """A record is not valid OSV; ``errors`` lists every problem, one line each."""

    def __init__(self, record_id: str | None, errors: list[str]):
        self.record_id = record_id
        self.errors = errors
        shown = "\n  ".join(errors[:20])
        more = f"\n  ... and {len(errors) - 20} more" if len(errors) > 20 else ""
        super().__init__(f"invalid OSV record {record_id!r}:\n  {shown}{more}")


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    """The packaged OSV JSON schema."""
    text = resources.files("tracker.core.advisory").joinpath("osv-schema.json").read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


@lru_cache(maxsize=1)
def _validator() -> Draft202012Validator:
    # Imported here, not at the top: importing jsonschema loads its format checkers, and with
    # rfc3987-syntax installed that builds a grammar, about a CPU-second on every start of a
    # process that never validates a record (each `tracker` command, each API worker).
    from jsonschema import Draft202012Validator, FormatChecker

    return Draft202012Validator(schema(), format_checker=FormatChecker())


# Fields of each message in osv-schema proto/vulnerability.proto, by JSON path shape.
# "*" values are free-form (google.protobuf.Struct): anything goes below them.
_FREE = "*"
_SEVERITY = {"type": None, "score": None}
_SHAPE: dict[str, Any] = {
    "schema_version": None,
    "id": None,
    "modified": None,
    "published": None,
    "withdrawn": None,
    "aliases": None,
    "related": None,
    "upstream": None,
    "summary": None,
    "details": None,
    "severity": [_SEVERITY],
    "affected": [
        {
            "package": {"ecosystem": None, "name": None, "purl": None},
            "severity": [_SEVERITY],
            "ranges": [
                {
                    "type": None,
                    "repo": None,
                    "events": [{"introduced": None, "fixed": None, "last_affected": None, "limit": None}],
                    "database_specific": _FREE,
                }
            ],
            "versions": None,
            "ecosystem_specific": _FREE,
            "database_specific": _FREE,
        }
    ],
    "references": [{"type": None, "url": None}],
    "credits": [{"name": None, "contact": None, "type": None}],
    "database_specific": _FREE,
}


def _strict(value: Any, shape: Any, path: str, errors: list[str]) -> None:
    if shape is None or shape == _FREE or value is None:
        return
    if isinstance(shape, list):
        if isinstance(value, list):
            for i, item in enumerate(value):
                _strict(item, shape[0], f"{path}[{i}]", errors)
        return  # wrong types are the schema's to report
    if isinstance(shape, dict) and isinstance(value, Mapping):
        for key, item in value.items():
            if key not in shape:
                where = f"{path}.{key}" if path else key
                errors.append(f"{where}: unknown field (strict OSV/protobuf parsers reject it; "
                              "put extra data in database_specific)")
            else:
                _strict(item, shape[key], f"{path}.{key}" if path else key, errors)


def strict_key_errors(record: Mapping[str, Any]) -> list[str]:
    """Unknown-field errors at any level outside the free-form objects ([] when none)."""
    errors: list[str] = []
    _strict(record, _SHAPE, "", errors)
    return errors


def validate(record: Mapping[str, Any]) -> None:
    """Raise :class:`AdvisoryValidationError` unless ``record`` is valid, strict OSV.

    Checks the JSON schema (with formats) and rejects unknown nested keys; the
    error lists every problem with its JSON path. Returns None when valid.
    """
    errors = [
        f"{'.'.join(str(p) for p in e.absolute_path) or '<record>'}: {e.message}"
        for e in sorted(_validator().iter_errors(record), key=lambda e: list(map(str, e.absolute_path)))
    ]
    errors += strict_key_errors(record)
    if errors:
        record_id = record.get("id") if isinstance(record, Mapping) else None
        raise AdvisoryValidationError(record_id if isinstance(record_id, str) else None, errors)
