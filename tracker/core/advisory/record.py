"""The advisory record, typed: an OSV record and the tracker's ``database_specific``. Pure.

The tracker keeps, serves and delivers OSV JSON; inside the code an advisory is an
:class:`Advisory`. :func:`parse_advisory` reads one from JSON data (the store's column,
a record that comes in) and :func:`to_osv` is the one serialiser back to JSON data.

Pydantic models rather than dataclasses for three reasons: a record read from outside gets
validated with a clear error naming the bad field; the models remember which fields were
*set*, so ``"parent": null`` (stated, no parent) and an absent ``parent`` stay apart and a
record comes back out exactly as it went in; and fields this module does not name (other
databases' keys, a newer schema's) are kept as extras instead of being dropped.

:func:`to_osv` writes every object with its keys sorted, the form the tracker has always
stored and served, so the JSON of a record does not depend on how it was built.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, TypeAlias

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError, model_validator

__all__ = [
    "Advisory",
    "AdvisoryParseError",
    "Affected",
    "BaseAdvisory",
    "Credit",
    "DatabaseSpecific",
    "Event",
    "InheritedItem",
    "OsvJson",
    "OsvSeverity",
    "Package",
    "Range",
    "Reference",
    "parse_advisory",
    "plain",
    "to_osv",
]

JsonObject = dict[str, JsonValue]
OsvJson: TypeAlias = dict[str, Any]
"""A record as JSON data: what :func:`to_osv` writes and :func:`parse_advisory` reads. Only at the
edges: a store column, an HTTP body, a file."""
EVENT_KEYS = ("introduced", "fixed", "last_affected", "limit")


class AdvisoryParseError(ValueError):
    """JSON data that is not an advisory record; the message names the field."""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")


class Event(_Model):
    """One event of a range: exactly one of ``introduced``, ``fixed``, ``last_affected``, ``limit``."""

    introduced: str | None = None
    fixed: str | None = None
    last_affected: str | None = None
    limit: str | None = None

    @model_validator(mode="after")
    def _one_key(self) -> Event:
        keys = sorted(self.model_fields_set | set(self.model_extra or {}))
        if len(keys) != 1 or keys[0] not in EVENT_KEYS:
            raise ValueError(f"an OSV event has exactly one of {', '.join(EVENT_KEYS)}; got {keys}")
        return self

    @property
    def key(self) -> str:
        return next(iter(self.model_fields_set))

    @property
    def value(self) -> str:
        value = getattr(self, self.key)
        return str(value)

    def as_json(self) -> dict[str, str]:
        return {self.key: self.value}


class Range(_Model):
    type: str
    repo: str | None = None
    events: tuple[Event, ...] = ()
    database_specific: JsonObject | None = None


class Package(_Model):
    ecosystem: str
    name: str
    purl: str | None = None


class OsvSeverity(_Model):
    type: str
    score: str


class Affected(_Model):
    package: Package | None = None
    severity: tuple[OsvSeverity, ...] = ()
    ranges: tuple[Range, ...] = ()
    versions: tuple[str, ...] = ()
    ecosystem_specific: JsonObject | None = None
    database_specific: JsonObject | None = None


class Reference(_Model):
    type: str
    url: str


class Credit(_Model):
    name: str
    contact: tuple[str, ...] = ()
    type: str | None = None


class InheritedItem(_Model):
    """A value a derivative still has from before its base fixed it (``key`` None: the whole file).

    ``base_before``, ``base_after`` and ``value`` are left unset when absent (JSON null is a value).
    """

    path: str
    key: str | None = None
    base_before: JsonValue = None
    base_after: JsonValue = None
    value: JsonValue = None
    before_digest: str
    after_digest: str

    def has(self, name: str) -> bool:
        """Whether ``base_before``, ``base_after`` or ``value`` is recorded (rather than absent)."""
        return name in self.model_fields_set


class BaseAdvisory(_Model):
    """The base's update advisory an inherited advisory comes from."""

    repo_id: str
    revision: str
    compared_with: str | None = None
    advisory_id: str
    findings: tuple[JsonObject, ...] = ()


class DatabaseSpecific(_Model):
    """The tracker's own fields of a record.

    Every record states ``source``, ``kind`` (update, risk, repo, inherited), ``severity`` (a
    :class:`tracker.core.model.Severity` name), ``categories`` and ``repo_id``. Revision records
    add ``revision``, ``parent``, ``revision_date``, ``findings`` and maybe ``estimate_delta``;
    repo records ``event`` and ``detail``; inherited records ``revision``, ``base`` and ``items``.
    """

    source: str | None = None
    kind: str | None = None
    event: str | None = None
    severity: str | None = None
    categories: tuple[str, ...] = ()
    repo_id: str | None = None
    revision: str | None = None
    parent: str | None = None
    revision_date: str | None = None
    findings: tuple[JsonObject, ...] = ()
    estimate_delta: JsonObject | None = None
    detail: JsonObject | None = None
    base: BaseAdvisory | None = None
    items: tuple[InheritedItem, ...] = ()
    withdrawn_reason: str | None = None


class Advisory(_Model):
    """One OSV record (schema 1.7)."""

    schema_version: str | None = None
    id: str
    modified: str
    published: str | None = None
    withdrawn: str | None = None
    aliases: tuple[str, ...] = ()
    upstream: tuple[str, ...] = ()
    related: tuple[str, ...] = ()
    summary: str | None = None
    details: str | None = None
    severity: tuple[OsvSeverity, ...] = ()
    affected: tuple[Affected, ...] = ()
    references: tuple[Reference, ...] = ()
    credits: tuple[Credit, ...] = ()
    database_specific: DatabaseSpecific | None = None

    @property
    def specific(self) -> DatabaseSpecific:
        """``database_specific``, empty when the record has none."""
        return self.database_specific or _EMPTY_SPECIFIC

    @property
    def kind(self) -> str | None:
        return self.specific.kind

    @property
    def git_ranges(self) -> Iterator[Range]:
        return (r for a in self.affected for r in a.ranges if r.type == "GIT")

    @property
    def events(self) -> list[Event]:
        """The events of every GIT range (the tracker writes one range per record)."""
        return [e for r in self.git_ranges for e in r.events]

    @property
    def fixes(self) -> list[str]:
        """The ``fixed`` events of its GIT ranges, in order."""
        return [e.fixed for e in self.events if e.fixed is not None]

    def replace(self, **changes: Any) -> Advisory:
        """A copy with ``changes`` (each counted as set, so the serialiser writes it)."""
        return self.model_copy(update=changes)


_EMPTY_SPECIFIC = DatabaseSpecific()


def plain(value: Any) -> Any:
    """Plain JSON data with sorted keys (tuples to lists, anything odd to its str)."""
    return json.loads(json.dumps(value, default=str, sort_keys=True))


def to_osv(advisory: Advisory) -> OsvJson:
    """The record as OSV JSON data: the fields that were set (null included), keys sorted."""
    data: OsvJson = plain(advisory.model_dump(mode="json", exclude_unset=True))
    return data


def parse_advisory(data: Mapping[str, Any]) -> Advisory:
    """Read a record from JSON data; raises :class:`AdvisoryParseError` naming the bad field."""
    if not isinstance(data, Mapping):
        raise AdvisoryParseError(f"an advisory is a JSON object, got {type(data).__name__}")
    try:
        return Advisory.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "record"
        raise AdvisoryParseError(f"advisory {data.get('id')!r}: {where}: {first['msg']}") from None
