"""Inherited fixes along the model tree: a base's update that a watched derivative has not taken. Pure.

A repo whose model card declares ``base_model`` has a parent (``repos.base_repo_id``). When the
base gets an ``update`` advisory whose findings touch a file a derivative copies
(:data:`INHERITABLE`), the derivative's current content is compared with the base's content
before and after the fix:

* a JSON file, per top-level key the base changed (``before != after``; bookkeeping keys such as
  ``transformers_version`` are left out): the derivative still has the key's old value (or still
  lacks a key the base added);
* any other file (or a JSON file that could not be read), by content id: the derivative still
  has the base's old file.

Each such value is an *item*; a derivative with at least one gets an ``inherited`` advisory
(:mod:`tracker.core.advisory.inherited`), and the advisory is closed (``fixed`` at that revision) by
the first later derivative revision that no longer has the old value of any of its items. The
items keep digests of the base's old and new values, so closing needs only the derivative's
content. A derivative that already has the new value (or a value of its own) gets none.

This happens in both directions, each inside the one transaction of the revision being saved:
the base's report carries the advisories of its watched derivatives (:class:`Derivative`), and a
derivative's report evaluates its base's update advisories (:class:`BaseChange`) against its new
content and closes the advisories it takes the fix of. The Processor gathers the inputs
(:class:`InheritInputs`); nothing here does I/O or reads the clock.

One level only: a derivative is compared with its direct base, and only with the base's own
update advisories (an inherited advisory of the base is not passed further down).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from tracker.core.advisory import inherited_id
from tracker.core.advisory.build import record_fixed
from tracker.core.advisory.inherited import InheritedFix, inherited_record
from tracker.core.advisory.record import Advisory, InheritedItem
from tracker.core.model import AdvisoryKind, RepoId, Severity
from tracker.core.writes import AdvisoryContext, AdvisoryWrite, advisory_write

INHERITABLE: tuple[str, ...] = (
    "config.json",
    "generation_config.json",
    "tokenizer_config.json",  # its chat_template key included
    "special_tokens_map.json",
    "tokenizer.json",
    "chat_template.jinja",
    "chat_template.json",
)
"""Files a fine-tune, quantization or conversion usually copies from its base."""

IGNORED_KEYS = frozenset({"_name_or_path", "transformers_version", "_commit_hash"})
"""Bookkeeping keys every export rewrites: a derivative "still having" them says nothing."""

ABSENT = "absent"  # the digest of a key or a file that is not there
RECORDED_MAX_CHARS = 300  # longer values are recorded as a preview and their digest

_MISSING: Any = object()


def digest(value: Any) -> str:
    """What a key's value is compared by: a SHA-256 of its canonical JSON (``ABSENT`` when missing)."""
    if value is _MISSING:
        return ABSENT
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _recorded(value: Any) -> Any:
    """A value as the record keeps it: itself when short, else a preview and its digest."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    if len(text) <= RECORDED_MAX_CHARS:
        return value
    return {"truncated": text[:200] + "…", "digest": digest(value)}


@dataclass(frozen=True)
class Contents:
    """One revision's inheritable files: content ids by path, and the JSON objects among them that were read."""

    sha: str
    files: Mapping[str, str]  # path -> content id (only paths in INHERITABLE)
    json: Mapping[str, Mapping[str, Any]]  # path -> parsed object; unreadable or not read: absent


@dataclass(frozen=True)
class Item:
    """One value the base changed: a key of a JSON file, or a whole file (``key`` None, by content id)."""

    path: str
    key: str | None
    before: Any  # the old value (_MISSING: absent); for a file, its content id or None
    after: Any
    before_digest: str
    after_digest: str

    def recorded(self, current: Any) -> dict[str, Any]:
        """The item as the advisory keeps it, with the derivative's ``current`` value."""
        out: dict[str, Any] = {"path": self.path, "key": self.key}
        for name, value in (("base_before", self.before), ("base_after", self.after), ("value", current)):
            absent = value is _MISSING or (self.key is None and value is None)  # JSON null is a value
            if not absent:
                out[name] = _recorded(value)
        out["before_digest"], out["after_digest"] = self.before_digest, self.after_digest
        return out


@dataclass(frozen=True)
class BaseChange:
    """A base's update advisory, as far as derivatives copy it: the values it changed."""

    advisory_id: str
    repo_id: RepoId
    revision: str
    compared_with: str | None  # the base revision it was diffed against
    findings: tuple[Mapping[str, Any], ...]  # the advisory's findings on inheritable files
    items: tuple[Item, ...]

    @property
    def paths(self) -> frozenset[str]:
        return frozenset(i.path for i in self.items)


@dataclass(frozen=True)
class Derivative:
    """A watched derivative of the repo whose revision is being saved, as it stands now."""

    repo_pk: int
    repo_id: RepoId
    content: Contents  # its newest done revision
    advisory_ids: frozenset[str]  # the ids it already has


@dataclass(frozen=True)
class InheritInputs:
    """What the Processor gathered for one revision's report.

    ``content`` is the revision's own inheritable files. As a base: ``before`` (the revision it
    was diffed against) and ``derivatives``. As a derivative: ``base_changes``, its base's update
    advisories that it has no inherited advisory for yet and that its new content must be checked against.
    """

    content: Contents
    before: Contents | None = None
    derivatives: Sequence[Derivative] = ()
    base_changes: Sequence[BaseChange] = ()


def inheritable_paths(record: Advisory) -> frozenset[str]:
    """The inheritable files an update advisory's findings are about."""
    return frozenset(str(f["path"]) for f in record.specific.findings if f.get("path") in INHERITABLE)


def _changed_items(path: str, before: Contents | None, after: Contents) -> list[Item]:
    """The items of one inheritable file: its top-level keys the base changed, or the whole file."""
    old_id = before.files.get(path) if before is not None else None
    new_id = after.files.get(path)
    if old_id == new_id:
        return []
    old_obj = (before.json.get(path) if before is not None else None) if old_id else {}
    new_obj = after.json.get(path) if new_id else {}
    if not (path.endswith(".json") and old_obj is not None and new_obj is not None):
        return [Item(path, None, old_id, new_id, old_id or ABSENT, new_id or ABSENT)]
    items = []
    for key in sorted((set(old_obj) | set(new_obj)) - IGNORED_KEYS):
        old, new = old_obj.get(key, _MISSING), new_obj.get(key, _MISSING)
        if old is not _MISSING and new is not _MISSING and type(old) is type(new) and old == new:
            continue  # cheaper than digesting a 256k-entry vocabulary twice
        old_digest, new_digest = digest(old), digest(new)
        if old_digest != new_digest:
            items.append(Item(path, key, old, new, old_digest, new_digest))
    return items


def base_change(record: Advisory, before: Contents | None, after: Contents) -> BaseChange | None:
    """What a base's update advisory changed in inheritable files (None: nothing a derivative copies)."""
    ds = record.specific
    if ds.kind != AdvisoryKind.UPDATE or record.withdrawn is not None:
        return None
    items = [i for path in sorted(inheritable_paths(record)) for i in _changed_items(path, before, after)]
    if not items:
        return None
    changed = {i.path for i in items}
    findings = tuple(f for f in ds.findings if f.get("path") in changed)
    return BaseChange(advisory_id=record.id, repo_id=RepoId(str(ds.repo_id)), revision=str(ds.revision),
                      compared_with=before.sha if before is not None else ds.parent, findings=findings,
                      items=tuple(items))


def _current(path: str, key: str | None, content: Contents) -> tuple[str, Any] | None:
    """(digest, value) of what the derivative has for an item; None when it lacks the file or cannot be read."""
    content_id = content.files.get(path)
    if content_id is None:
        return None
    if key is None:
        return content_id, content_id
    obj = content.json.get(path)
    if obj is None:
        return None
    value = obj.get(key, _MISSING)
    return digest(value), value


def stale_items(change: BaseChange, content: Contents) -> list[dict[str, Any]]:
    """The items of ``change`` whose old value the derivative still has, as the record keeps them."""
    out = []
    for item in change.items:
        current = _current(item.path, item.key, content)
        if current is not None and current[0] == item.before_digest:
            out.append(item.recorded(current[1]))
    return out


def still_has_old(items: Iterable[InheritedItem], content: Contents) -> bool:
    """Whether the derivative still has the old value of any recorded item (unreadable: assumed so)."""
    for item in items:
        if item.path not in content.files:
            continue  # the file is gone: it no longer carries the old value
        current = _current(item.path, item.key, content)
        if current is None or current[0] == item.before_digest:
            return True
    return False


def inherited_write(  # noqa: PLR0913, RUF100 - the derivative (4) and where the record points (3), by keyword
        change: BaseChange, *, repo_id: RepoId, content: Contents,
                    existing: frozenset[str], endpoint: str, tracker_url: str | None, now: datetime,
                    repo_pk: int | None = None) -> AdvisoryWrite | None:
    """The new inherited advisory of a derivative that still has what ``change`` fixed, or None.

    None too when the derivative already has one for this base advisory (``existing`` ids):
    closing it is :func:`closures`'s, and the commits it affects grow with the index.
    """
    if inherited_id(repo_id, change.advisory_id) in existing or repo_id.lower() == change.repo_id.lower():
        return None
    items = stale_items(change, content)
    if not items:
        return None
    paths = {i["path"] for i in items}
    findings = [f for f in change.findings if f.get("path") in paths] or list(change.findings)
    severity = Severity.worst(Severity(str(f.get("severity", "info")).lower()) for f in findings) or Severity.INFO
    fix = InheritedFix(
        repo_id=repo_id, revision=content.sha, base_repo_id=change.repo_id, base_revision=change.revision,
        base_compared_with=change.compared_with, base_advisory_id=change.advisory_id, severity=severity,
        categories=[str(f.get("category")) for f in findings if f.get("category")], items=items,
        base_findings=findings, endpoint=endpoint, tracker_url=tracker_url,
    )
    record = inherited_record(fix, affected_commits=(), now=now)
    write = advisory_write(record, revision_sha=content.sha, kind=AdvisoryKind.INHERITED.value, fixed_sha=None)
    return replace(write, repo_pk=repo_pk)


def closures(ctx: AdvisoryContext, *, sha: str, content: Contents) -> list[AdvisoryWrite]:
    """Open inherited advisories that this derivative revision takes the fix of, marked fixed by it."""
    writes = []
    for adv in ctx.advisories:
        if (adv.kind != AdvisoryKind.INHERITED or adv.withdrawn or adv.fixed_sha or adv.revision_sha is None
                or not ctx.descends(adv.revision_sha, sha)):
            continue
        advisory = adv.record
        items = advisory.specific.items
        if not items or still_has_old(items, content):
            continue
        record = record_fixed(advisory, sha, ctx.now, affected_commits=())
        writes.append(advisory_write(record, revision_sha=adv.revision_sha, kind=adv.kind, fixed_sha=sha))
    return writes


def inherited_writes(ctx: AdvisoryContext, inputs: InheritInputs, *, sha: str,
                     written: Sequence[AdvisoryWrite]) -> list[AdvisoryWrite]:
    """Everything a revision's report writes along the model tree (``written``: its own advisory writes so far).

    As a derivative: the advisories its new content closes, and those its base's updates call for.
    As a base: for the update advisory this revision creates, those of its watched derivatives
    (each write names the derivative's ``repo_pk``).
    """
    writes = closures(ctx, sha=sha, content=inputs.content)
    mine = ctx.inherited_ids | frozenset(a.id for a in ctx.advisories)
    for change in inputs.base_changes:
        write = inherited_write(change, repo_id=ctx.repo_id, content=inputs.content, existing=mine,
                                endpoint=ctx.endpoint, tracker_url=ctx.tracker_url, now=ctx.now)
        if write is not None:
            writes.append(write)
    if inputs.derivatives:
        for own in written:
            if own.kind != AdvisoryKind.UPDATE or own.revision_sha != sha:
                continue
            fixed = base_change(own.advisory, inputs.before, inputs.content)
            if fixed is None:
                continue
            for derivative in inputs.derivatives:
                write = inherited_write(fixed, repo_id=derivative.repo_id,
                                        content=derivative.content, existing=derivative.advisory_ids,
                                        endpoint=ctx.endpoint, tracker_url=ctx.tracker_url, now=ctx.now,
                                        repo_pk=derivative.repo_pk)
                if write is not None:
                    writes.append(write)
    return writes
