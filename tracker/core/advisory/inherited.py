"""The OSV record of an inherited fix: a base model's update that a derivative has not taken. Pure.

A fine-tune, quantization or conversion copies its base's ``generation_config.json``,
tokenizer files and chat template. When the base fixes one of them (an ``update``
advisory on the base), a derivative that still carries the old value has the bug the
base fixed. Its advisory is about the *derivative*: ``affected`` names the derivative's
repo, with the range of an update (``introduced: "0"``: every revision until one takes
the fix), and when a later derivative revision takes it, :func:`tracker.core.advisory.mark_fixed`
adds ``fixed: <that revision>`` as for an undone risk. The base it refers to is stated
in the summary, in ``details``, in ``upstream`` (the base advisory's id) and in
``database_specific.base`` (repo, revision, the revision it was compared with, advisory id).

The id (:func:`tracker.core.advisory.ids.inherited_id`) depends on the derivative and the base
advisory only, so whichever of the two repos is polled first, the record is the same.
The items (which file and key, the base's values before and after, the derivative's) are
computed by :mod:`tracker.core.inherit`; this module only writes them down.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tracker.core.advisory.common import (
    SCHEMA_VERSION,
    SOURCE,
    TOOL_CREDIT,
    affected_entry,
    check_sha,
    commit_url,
    finalise,
    fix_section,
    format_timestamp,
    one_line,
    repo_url,
)
from tracker.core.advisory.ids import inherited_id
from tracker.core.advisory.record import (
    Advisory,
    BaseAdvisory,
    DatabaseSpecific,
    InheritedItem,
    OsvJson,
    Reference,
    parse_advisory,
    plain,
    to_osv,
)
from tracker.core.model import Severity, validate_repo_id

__all__ = ["InheritedFix", "inherited_advisory", "inherited_record", "inherited_summary", "show_value"]

KIND = "inherited"


def show_value(value: Any, limit: int = 60) -> str:
    """A value as the summary and details show it: compact JSON, cut to ``limit`` characters."""
    return one_line(json.dumps(value, ensure_ascii=False, sort_keys=True, default=str), limit)


def _label(item: InheritedItem) -> str:
    return item.key if item.key is not None else item.path


def inherited_summary(base_repo_id: str, base_revision: str, items: Sequence[InheritedItem]) -> str:
    """``base B fixed eos_token_id at <rev>; this repo still has 128001`` (one line)."""
    labels = ", ".join(dict.fromkeys(_label(i) for i in items))
    head = f"base {base_repo_id} fixed {labels} at {base_revision[:12]}; this repo still "
    if len(items) > 1:
        tail = "has the old values"
    elif items[0].key is None:
        tail = "has the old file"
    elif items[0].has("value"):
        tail = f"has {show_value(items[0].value, 40)}"
    else:
        tail = "lacks it"
    return one_line(head + tail)


def _item_line(item: InheritedItem) -> str:
    where = f"`{item.path}`"
    if item.key is None:
        return f"- {where}: this repo has the file as the base had it before the fix."

    def shown(name: str) -> str:
        return f"`{show_value(getattr(item, name), 120)}`" if item.has(name) else "(absent)"

    return (f"- `{item.key}` in {where}: this repo has {shown('value')}; the base changed "
            f"{shown('base_before')} → {shown('base_after')}.")


@dataclass(frozen=True)
class InheritedFix:
    """A base's fix that a derivative (``repo_id``, seen at ``revision``) has not taken.

    ``items`` (at least one) are the values the derivative still has: ``{"path", "key"`` (None: the
    whole file), ``"base_before"``, ``"base_after"``, ``"value"`` (each left out when absent),
    ``"before_digest"``, ``"after_digest"}``. Raises ValueError on a bad repo id, sha or an empty ``items``.
    """

    repo_id: str
    revision: str
    base_repo_id: str
    base_revision: str
    base_compared_with: str | None
    base_advisory_id: str
    severity: Severity
    categories: Iterable[str]
    items: Sequence[Mapping[str, Any]]
    base_findings: Sequence[Mapping[str, Any]]
    endpoint: str
    tracker_url: str | None = None

    def __post_init__(self) -> None:
        validate_repo_id(self.repo_id)
        validate_repo_id(self.base_repo_id)
        check_sha(self.revision, "revision")
        check_sha(self.base_revision, "base revision")
        if self.base_compared_with is not None:
            check_sha(self.base_compared_with, "base compared_with")
        if not self.items:
            raise ValueError("an inherited advisory needs at least one item the derivative still has")

    @property
    def record_id(self) -> str:
        return inherited_id(self.repo_id, self.base_advisory_id)

    def recorded_items(self) -> tuple[InheritedItem, ...]:
        return tuple(InheritedItem.model_validate(plain(dict(i))) for i in self.items)


def _details(fix: InheritedFix, items: Sequence[InheritedItem], fixes: list[str]) -> str:
    url, base_url = repo_url(fix.endpoint, fix.repo_id), repo_url(fix.endpoint, fix.base_repo_id)
    compared = f", compared with `{fix.base_compared_with[:12]}`" if fix.base_compared_with else ""
    parts = [
        f"**Inherited from the base model**: [{fix.base_repo_id}]({base_url}) fixed this at revision "
        f"[`{fix.base_revision[:12]}`]({commit_url(base_url, fix.base_revision)}){compared} (advisory "
        f"`{fix.base_advisory_id}`). [{fix.repo_id}]({url}) declares it as its base model and, at revision "
        f"[`{fix.revision[:12]}`]({commit_url(url, fix.revision)}), still carries what the base had before the fix:",
        "\n".join(_item_line(i) for i in items),
        f"Every revision of {fix.repo_id} is affected until one takes the fix: the base's new value, or any "
        "value other than the old one.",
    ]
    return "\n\n".join(parts) + fix_section(url, fixes)


def _references(fix: InheritedFix, fixes: list[str]) -> tuple[Reference, ...]:
    url = repo_url(fix.endpoint, fix.repo_id)
    references = [
        Reference(type="PACKAGE", url=url),
        Reference(type="EVIDENCE", url=commit_url(url, fix.revision)),
        Reference(type="WEB", url=commit_url(repo_url(fix.endpoint, fix.base_repo_id), fix.base_revision)),
        *(Reference(type="FIX", url=commit_url(url, f)) for f in fixes),
    ]
    if fix.tracker_url:
        site = fix.tracker_url.rstrip("/")
        references += [Reference(type="ADVISORY", url=f"{site}/advisories/{fix.record_id}"),
                       Reference(type="ADVISORY", url=f"{site}/advisories/{fix.base_advisory_id}")]
    return tuple(references)


def _specific(fix: InheritedFix, items: tuple[InheritedItem, ...]) -> DatabaseSpecific:
    base = BaseAdvisory(repo_id=fix.base_repo_id, revision=fix.base_revision, compared_with=fix.base_compared_with,
                        advisory_id=fix.base_advisory_id, findings=tuple(plain(dict(f)) for f in fix.base_findings))
    return DatabaseSpecific(source=SOURCE, kind=KIND, severity=fix.severity.name,
                            categories=tuple(sorted(set(fix.categories))), repo_id=fix.repo_id,
                            revision=fix.revision, base=base, items=items)


def inherited_record(fix: InheritedFix, *, affected_commits: Iterable[str], now: datetime,
                     previous: Advisory | None = None) -> Advisory:
    """The record telling ``fix.repo_id`` that it lacks ``fix.base_advisory_id``'s fix.

    ``previous``: the stored record (its ``published`` and ``fixed`` events are kept).
    """
    fixes = previous.fixes if previous is not None else []
    items = fix.recorded_items()
    now_ts = format_timestamp(now)
    url = repo_url(fix.endpoint, fix.repo_id)
    record = Advisory(
        schema_version=SCHEMA_VERSION, id=fix.record_id, modified=now_ts, published=now_ts,
        upstream=(fix.base_advisory_id,), summary=inherited_summary(fix.base_repo_id, fix.base_revision, items),
        details=_details(fix, items, fixes),
        affected=(affected_entry(fix.repo_id, url, [{"introduced": "0"}, *({"fixed": f} for f in fixes)],
                                 affected_commits),),
        references=_references(fix, fixes), credits=(TOOL_CREDIT,),
        database_specific=_specific(fix, items),
    )
    return finalise(record, previous, now)


def inherited_advisory(  # noqa: PLR0913, RUF100 - the JSON form keeps the keyword interface of InheritedFix
    *,
    repo_id: str,
    revision: str,
    base_repo_id: str,
    base_revision: str,
    base_compared_with: str | None,
    base_advisory_id: str,
    severity: Severity,
    categories: Iterable[str],
    items: Sequence[Mapping[str, Any]],
    base_findings: Sequence[Mapping[str, Any]],
    endpoint: str,
    tracker_url: str | None,
    affected_commits: Iterable[str],
    now: datetime,
    previous: Mapping[str, Any] | None = None,
) -> OsvJson:
    """:func:`inherited_record` on JSON data."""
    fix = InheritedFix(repo_id=repo_id, revision=revision, base_repo_id=base_repo_id, base_revision=base_revision,
                       base_compared_with=base_compared_with, base_advisory_id=base_advisory_id, severity=severity,
                       categories=categories, items=items, base_findings=base_findings, endpoint=endpoint,
                       tracker_url=tracker_url)
    prev = parse_advisory(previous) if previous is not None else None
    record = inherited_record(fix, affected_commits=affected_commits, now=now, previous=prev)
    return copy.deepcopy(dict(previous)) if previous is not None and record is prev else to_osv(record)
