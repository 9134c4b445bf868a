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

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from tracker.core.advisory.build import (
    SCHEMA_VERSION,
    SOURCE,
    _affected_entry,
    _commit_url,
    _finalise,
    _fix_section,
    _fixes,
    _one_line,
    _repo_url,
    _sha,
    format_timestamp,
)
from tracker.core.advisory.ids import inherited_id
from tracker.core.model import Severity, validate_repo_id

__all__ = ["inherited_advisory", "inherited_summary", "show_value"]

KIND = "inherited"


def show_value(value: Any, limit: int = 60) -> str:
    """A value as the summary and details show it: compact JSON, cut to ``limit`` characters."""
    return _one_line(json.dumps(value, ensure_ascii=False, sort_keys=True, default=str), limit)


def _label(item: Mapping[str, Any]) -> str:
    return str(item["key"]) if item.get("key") is not None else str(item["path"])


def inherited_summary(base_repo_id: str, base_revision: str, items: Sequence[Mapping[str, Any]]) -> str:
    """``base B fixed eos_token_id at <rev>; this repo still has 128001`` (one line)."""
    labels = ", ".join(dict.fromkeys(_label(i) for i in items))
    head = f"base {base_repo_id} fixed {labels} at {base_revision[:12]}; this repo still "
    if len(items) > 1:
        tail = "has the old values"
    elif items[0].get("key") is None:
        tail = "has the old file"
    elif "value" in items[0]:
        tail = f"has {show_value(items[0]['value'], 40)}"
    else:
        tail = "lacks it"
    return _one_line(head + tail)


def _item_line(item: Mapping[str, Any]) -> str:
    where = f"`{item['path']}`"
    if item.get("key") is None:
        return f"- {where}: this repo has the file as the base had it before the fix."

    def shown(name: str) -> str:
        return f"`{show_value(item[name], 120)}`" if name in item else "(absent)"

    return (f"- `{item['key']}` in {where}: this repo has {shown('value')}; the base changed "
            f"{shown('base_before')} → {shown('base_after')}.")


def _details(*, repo_id: str, repo_url: str, revision: str, base_repo_id: str, base_url: str, base_revision: str,
             base_compared_with: str | None, base_advisory_id: str, items: Sequence[Mapping[str, Any]],
             fixes: list[str]) -> str:
    compared = f", compared with `{base_compared_with[:12]}`" if base_compared_with else ""
    parts = [
        f"**Inherited from the base model**: [{base_repo_id}]({base_url}) fixed this at revision "
        f"[`{base_revision[:12]}`]({_commit_url(base_url, base_revision)}){compared} (advisory "
        f"`{base_advisory_id}`). [{repo_id}]({repo_url}) declares it as its base model and, at revision "
        f"[`{revision[:12]}`]({_commit_url(repo_url, revision)}), still carries what the base had before the fix:",
        "\n".join(_item_line(i) for i in items),
        f"Every revision of {repo_id} is affected until one takes the fix: the base's new value, or any "
        "value other than the old one.",
    ]
    return "\n\n".join(parts) + _fix_section(repo_url, fixes)


def inherited_advisory(
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
) -> dict[str, Any]:
    """The record telling ``repo_id`` (seen at ``revision``) that it lacks ``base_advisory_id``'s fix.

    ``items`` (at least one) are the values the derivative still has: ``{"path", "key"`` (None: the
    whole file), ``"base_before"``, ``"base_after"``, ``"value"`` (each left out when absent),
    ``"before_digest"``, ``"after_digest"}``. ``previous``: the stored record (its ``published``
    and ``fixed`` events are kept). Raises ValueError on a bad repo id, sha or an empty ``items``.
    """
    validate_repo_id(repo_id)
    validate_repo_id(base_repo_id)
    _sha(revision, "revision")
    _sha(base_revision, "base revision")
    if base_compared_with is not None:
        _sha(base_compared_with, "base compared_with")
    if not items:
        raise ValueError("an inherited advisory needs at least one item the derivative still has")
    record_id = inherited_id(repo_id, base_advisory_id)
    repo_url, base_url = _repo_url(endpoint, repo_id), _repo_url(endpoint, base_repo_id)
    fixes = _fixes(dict(previous)) if previous else []
    now_ts = format_timestamp(now)
    references = [
        {"type": "PACKAGE", "url": repo_url},
        {"type": "EVIDENCE", "url": _commit_url(repo_url, revision)},
        {"type": "WEB", "url": _commit_url(base_url, base_revision)},
        *({"type": "FIX", "url": _commit_url(repo_url, f)} for f in fixes),
    ]
    if tracker_url:
        references += [{"type": "ADVISORY", "url": f"{tracker_url.rstrip('/')}/advisories/{record_id}"},
                       {"type": "ADVISORY", "url": f"{tracker_url.rstrip('/')}/advisories/{base_advisory_id}"}]
    record: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "id": record_id,
        "modified": now_ts,
        "published": now_ts,
        "upstream": [base_advisory_id],
        "summary": inherited_summary(base_repo_id, base_revision, items),
        "details": _details(repo_id=repo_id, repo_url=repo_url, revision=revision, base_repo_id=base_repo_id,
                            base_url=base_url, base_revision=base_revision, base_compared_with=base_compared_with,
                            base_advisory_id=base_advisory_id, items=items, fixes=fixes),
        "affected": [_affected_entry(repo_id, repo_url, [{"introduced": "0"}, *({"fixed": f} for f in fixes)],
                                     affected_commits)],
        "references": references,
        "credits": [{"name": SOURCE, "type": "TOOL"}],
        "database_specific": {
            "source": SOURCE,
            "kind": KIND,
            "severity": severity.name,
            "categories": sorted(set(categories)),
            "repo_id": repo_id,
            "revision": revision,
            "base": {
                "repo_id": base_repo_id,
                "revision": base_revision,
                "compared_with": base_compared_with,
                "advisory_id": base_advisory_id,
                "findings": [dict(f) for f in base_findings],
            },
            "items": [dict(i) for i in items],
        },
    }
    return _finalise(record, previous, now)
