"""Build OSV records from a revision's findings, and from events about a repo. Pure.

One upstream change, one advisory. Every finding of a revision is classified
(``CLASSIFICATION``, below) as one of two meanings:

``update``
    A change users should pick up: a fix, a new default, a re-exported
    tokenizer. It affects the revisions that **lack** it, so the GIT range is
    ``introduced: "0"``, ``fixed: <revision>`` and someone pinned to an older
    revision is told that upstream moved on.
``risk``
    A change that *introduces* a risk: a pickle added, remote code changed, a
    template that no longer compiles, a more restrictive licence, a dangerous
    import, a vulnerable dependency. It affects the revision that introduced it
    and its descendants: ``introduced: <revision>``, and when a later revision
    undoes it, :func:`mark_fixed` adds ``fixed: <that revision>``.

A revision with findings of both kinds gets **two advisories**, one per kind,
whose ids differ only by the kind in the hash (:func:`tracker.core.advisory.ids.advisory_id`).
One record cannot carry both meanings: its ranges would have to say both
"everything before X" and "X and after", and a later revert would fix only half
of it. Two records keep each range exact and each lifecycle independent.

Ids depend only on (repo, revision, kind), so re-analysing a revision with
newer rules rebuilds the *same* record: when nothing but ``modified`` would
differ, the stored record comes back unchanged (``modified`` moves only when
content changes); when no finding of that kind remains, the stored record is
withdrawn, never duplicated. ``published`` is always kept from the stored record.

Nothing here reads the clock or does I/O: ``now`` is passed in and the caller,
who owns the commit graph, passes the affected commits (or the graph).
"""

from __future__ import annotations

import copy
import fnmatch
import json
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from tracker.core.advisory.affected import affected_commits as compute_affected_commits
from tracker.core.advisory.ids import advisory_id, repo_event_id
from tracker.core.escaping import escape_controls
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import Finding, Severity, clip_words, sort_findings, validate_repo_id

__all__ = [
    "CLASSIFICATION",
    "REPO_EVENTS",
    "SCHEMA_VERSION",
    "AdvisoryKind",
    "RepoEventKind",
    "advisory_events",
    "build_revision_advisories",
    "build_revision_advisory",
    "classify",
    "format_timestamp",
    "mark_fixed",
    "range_events",
    "repo_event_advisory",
    "split_findings",
    "with_versions",
    "withdraw",
]

SCHEMA_VERSION = "1.7.5"
SOURCE = "upstream-tracker"
SUMMARY_MAX = 120

AdvisoryKind = Literal["update", "risk"]
Classification = Literal["update", "risk", "ignore"]
RepoEventKind = Literal["history_rewritten", "renamed", "deleted", "recreated", "gated", "private", "commit_flood"]

# Finding code -> meaning. fnmatch patterns over the finding code, FIRST MATCH
# WINS, so specific patterns come before general ones. "ignore" findings never
# make an advisory. Anything unmatched is an "update": most upstream changes are
# deliberate and the question users ask is "what did I miss since my revision?".
CLASSIFICATION: tuple[tuple[str, Classification], ...] = (
    # The tracker's own failures say nothing about upstream.
    ("analysis.*", "ignore"),
    # Undoing a risk, or repairing a broken file, is something to pick up.
    ("weights.*pickle*removed*", "update"),
    ("code.*removed*", "update"),
    ("remote_code.*removed*", "update"),
    ("config.auto_map_removed", "update"),
    ("*.repaired", "update"),
    ("*.render_recovered", "update"),
    # Code that runs on load, or may.
    ("weights.pickle_*", "risk"),  # added, dangerous_import, unknown_import, unscanned
    ("*.unsafe*", "risk"),
    ("code.*", "risk"),
    ("remote_code.*", "risk"),
    ("config.auto_map_*", "risk"),  # added, changed, external
    ("config.*remote_code*", "risk"),
    # A revision that no longer loads, compiles or renders breaks its users.
    ("chat_template.compile_failed", "risk"),
    ("chat_template.render_failed", "risk"),
    ("chat_template.render_limit_exceeded", "risk"),
    ("chat_template.removed", "risk"),
    ("*.malformed", "risk"),
    ("*.load_failed", "risk"),
    ("*.header_invalid", "risk"),
    # Content that could not be checked (too large, unreadable) is unvetted.
    ("*.too_large", "risk"),
    ("*unreadable", "risk"),
    ("upstream.unsafe_path", "risk"),  # a path that escapes the repo: a trap for downloaders
    # Access and licence getting tighter.
    ("licen[cs]e.*restrict*", "risk"),
    ("licen[cs]e.gating_added", "risk"),
    ("licen[cs]e.gating_changed", "risk"),
    # Known-vulnerable dependencies, internal inconsistencies, repo events.
    ("dependencies.*", "risk"),
    ("consistency.*", "risk"),
    ("repo.*", "risk"),
    # Everything else - eos fixed, template re-rendered, tokenizer re-exported,
    # weights replaced - is an upstream update users on older revisions lack.
    ("*", "update"),
)

# Advisories about the repo itself: severity and a one-line description. The severities are the
# policy's ``repo.<kind>`` codes (tracker/core/findings/severity/repo.toml, with the reason for each).
_REPO_EVENT_TEXT: Mapping[str, str] = {
    "history_rewritten": "history rewritten: pinned revisions are no longer reachable",
    "renamed": "repo renamed",
    "deleted": "repo deleted",
    "recreated": "repo deleted and created again under the same id: possible takeover",
    "gated": "repo is now gated",
    "private": "repo made private",
    "commit_flood": "a flood of new commits: the revisions between the last one read and the head are not analysed yet",
}
REPO_EVENTS: Mapping[str, tuple[Severity, str]] = {
    kind: (SeverityRules.default().severity(f"repo.{kind}"), text) for kind, text in _REPO_EVENT_TEXT.items()
}

# Evidence keys that hold a rendered-prompt (or other) diff worth quoting in details.
DIFF_EVIDENCE_KEYS: tuple[str, ...] = ("rendered_prompt_diff", "prompt_diff", "diff")
DIFF_MAX_LINES = 60
DIFF_MAX_CHARS = 6000

_SHA_RE = re.compile(r"^[0-9a-f]{40}$")
_FIX_HEADING = "\n\n## Undone\n"


# ---------------------------------------------------------------- small helpers


def format_timestamp(value: datetime) -> str:
    """RFC 3339 UTC with a ``Z`` (the OSV schema rejects ``+00:00``); microseconds only when non-zero."""
    if value.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware (UTC); got a naive datetime")
    value = value.astimezone(UTC)
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond:06d}".rstrip("0")
    return text + "Z"


def _parse_timestamp(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (TypeError, ValueError):
        return None


def _later(now: datetime, previous: str | None) -> str:
    """``now``, or just after ``previous`` if the clock says otherwise: ``modified`` must increase."""
    prev = _parse_timestamp(previous) if previous else None
    if prev is not None and now <= prev:
        now = prev + timedelta(microseconds=1)
    return format_timestamp(now)


def _sha(value: str, what: str) -> str:
    if not isinstance(value, str) or not _SHA_RE.match(value):
        raise ValueError(f"{what} must be a full 40-hex lower-case commit id, got {value!r}")
    return value


def _plain(value: Any) -> Any:
    """Plain JSON data (tuples to lists, anything odd to its str), so equality is content equality."""
    return json.loads(json.dumps(value, default=str, sort_keys=True))


def _one_line(text: str, limit: int = SUMMARY_MAX) -> str:
    text = " ".join(str(text).split())
    return clip_words(text, limit)


def _repo_url(endpoint: str, repo_id: str) -> str:
    return f"{endpoint.rstrip('/')}/{repo_id}"


def _commit_url(repo_url: str, sha: str) -> str:
    return f"{repo_url}/commit/{sha}"


def _fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


# ------------------------------------------------------------- classification


def classify(code: str) -> Classification:
    """The meaning of a finding code: ``"update"``, ``"risk"`` or ``"ignore"`` (first match in CLASSIFICATION)."""
    for pattern, kind in CLASSIFICATION:
        if fnmatch.fnmatchcase(code, pattern):
            return kind
    return "update"  # unreachable while CLASSIFICATION ends with "*"


def split_findings(
    findings: Iterable[Finding], min_severity: Severity = Severity.LOW
) -> dict[AdvisoryKind, list[Finding]]:
    """Findings at or above ``min_severity`` by kind, most severe first; kinds with none are absent."""
    out: dict[AdvisoryKind, list[Finding]] = {}
    for finding in sort_findings(findings):
        if not finding.severity.at_least(min_severity):
            continue
        kind = classify(finding.code)
        if kind != "ignore":
            out.setdefault(kind, []).append(finding)
    return out


def advisory_events(kind: AdvisoryKind, revision: str, fixes: Iterable[str] = ()) -> list[dict[str, str]]:
    """The GIT range events of a revision advisory of ``kind``.

    ``update``: ``[{"introduced": "0"}, {"fixed": revision}]``; ``risk``:
    ``[{"introduced": revision}]`` plus ``{"fixed": f}`` for each revision that
    undid it. Feed them to :func:`tracker.core.advisory.affected.affected_commits`
    to get the ``affected_commits`` the builders want.
    """
    if kind == "update":
        return [{"introduced": "0"}, {"fixed": revision}]
    if kind == "risk":
        return [{"introduced": revision}] + [{"fixed": f} for f in fixes]
    raise ValueError(f"unknown advisory kind {kind!r}")


def _git_ranges(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [r for a in record.get("affected") or [] for r in a.get("ranges") or [] if r.get("type") == "GIT"]


def _fixes(record: Mapping[str, Any] | None) -> list[str]:
    if not record:
        return []
    return [e["fixed"] for r in _git_ranges(record) for e in r.get("events", []) if "fixed" in e]


# ---------------------------------------------------------------- rendering


def _diff_excerpt(finding: Finding) -> str | None:
    for key in DIFF_EVIDENCE_KEYS:
        value = finding.evidence.get(key) if finding.evidence else None
        if not value:
            continue
        lines = value.splitlines() if isinstance(value, str) else [str(v) for v in value]
        shown, size = [], 0
        for line in lines[:DIFF_MAX_LINES]:
            if size + len(line) > DIFF_MAX_CHARS:
                break
            shown.append(line)
            size += len(line) + 1
        text = "\n".join(shown)
        if len(shown) < len(lines):
            text += f"\n… ({len(lines) - len(shown)} more lines)"
        fence = _fence(text)
        where = f": `{finding.path}`" if finding.path else ""
        return f"Rendered prompt diff{where}:\n\n{fence}diff\n{text}\n{fence}"
    return None


def _render_value(value: Any) -> str:
    text = json.dumps(_plain(value), ensure_ascii=False, sort_keys=True)
    return f"`{_one_line(text, 80)}`"


def _render_estimate(delta: Mapping[str, Any]) -> list[str]:
    lines = []
    for key in sorted(delta):
        value = delta[key]
        if isinstance(value, Mapping) and set(value) >= {"before", "after"}:
            lines.append(f"- `{key}`: {_render_value(value['before'])} → {_render_value(value['after'])}")
        else:
            lines.append(f"- `{key}`: {_render_value(value)}")
    return lines


def _fix_section(repo_url: str, fixes: list[str]) -> str:
    if not fixes:
        return ""
    lines = [
        (f"- revision [`{f[:12]}`]({_commit_url(repo_url, f)}) undoes it; it and its descendants "
         "are no longer affected.")
        for f in fixes
    ]
    return _FIX_HEADING + "\n".join(lines)


def _with_fix_section(details: str, repo_url: str, fixes: list[str]) -> str:
    return details.split(_FIX_HEADING, 1)[0] + _fix_section(repo_url, fixes)


def _details(
    *,
    kind: AdvisoryKind,
    repo_id: str,
    repo_url: str,
    revision: str,
    parent: str | None,
    revision_date: datetime | None,
    findings: list[Finding],
    estimate_delta: Mapping[str, Any] | None,
    related: list[str],
    fixes: list[str],
) -> str:
    label = "Risk introduced" if kind == "risk" else "Upstream change"
    where = f"parent `{parent[:12]}`" if parent else "first revision read"
    when = f", committed {format_timestamp(revision_date)}" if revision_date else ""
    parts = [
        f"**{label}** in [{repo_id}]({repo_url}) at revision "
        f"[`{revision[:12]}`]({_commit_url(repo_url, revision)}) ({where}){when}.",
        (
            "This revision **introduces** the change: it and every later revision are affected "
            "until a revision undoes it."
            if kind == "risk"
            else f"Revisions that **lack** this change are affected: move to `{revision[:12]}` "
            "or a later revision to pick it up."
        ),
        "## Findings",
    ]
    for severity in sorted({f.severity for f in findings}, key=lambda s: s.rank):
        group = [f for f in findings if f.severity is severity]
        lines = [f"### {severity.name.capitalize()}"]
        excerpts = []
        for f in group:
            path = f", `{escape_controls(f.path)}`" if f.path else ""
            lines.append(f"- {_one_line(f.summary, 300)} (`{f.code}`{path})")
            excerpt = _diff_excerpt(f)
            if excerpt:
                excerpts.append(excerpt)
        parts.append("\n".join(lines))
        parts.extend(excerpts)
    if estimate_delta:
        parts.append("## Estimate changes\n" + "\n".join(_render_estimate(estimate_delta)))
    if related:
        parts.append("## Related OSV.dev advisories\n" + "\n".join(f"- {r}" for r in related))
    return "\n\n".join(parts) + _fix_section(repo_url, fixes)


def _summary(kind: AdvisoryKind, repo_id: str, revision: str, findings: list[Finding]) -> str:
    label = "Risk introduced in" if kind == "risk" else "Upstream change in"
    more = f" (+{len(findings) - 1} more)" if len(findings) > 1 else ""
    head = f"{label} {repo_id}@{revision[:12]}: "
    room = SUMMARY_MAX - len(head) - len(more)
    return _one_line(head + _one_line(findings[0].summary, max(room, 10)) + more)


def _references(
    kind: str, repo_url: str, revision: str | None, fixes: list[str], tracker_url: str | None, record_id: str
) -> list[dict[str, str]]:
    refs = [{"type": "PACKAGE", "url": repo_url}]
    if revision is not None:
        refs.append({"type": "FIX" if kind == "update" else "INTRODUCED", "url": _commit_url(repo_url, revision)})
    refs += [{"type": "FIX", "url": _commit_url(repo_url, f)} for f in fixes]
    if tracker_url:
        refs.append({"type": "ADVISORY", "url": f"{tracker_url.rstrip('/')}/advisories/{record_id}"})
    return refs


def _affected_entry(repo_id: str, repo_url: str, events: list[dict] | None, versions: Iterable[str]) -> dict:
    entry: dict[str, Any] = {
        "package": {"ecosystem": "GIT", "name": repo_url, "purl": f"pkg:huggingface/{repo_id}"},
    }
    if events is not None:
        entry["ranges"] = [{"type": "GIT", "repo": repo_url, "events": events}]
    entry["versions"] = sorted({_sha(v, "an affected commit") for v in versions})
    return entry


def _finalise(record: dict[str, Any], previous: Mapping[str, Any] | None, now: datetime) -> dict[str, Any]:
    """Apply the ``published``/``modified`` rules against the stored record."""
    record = _plain(record)
    if previous is None:
        return record
    if previous.get("id") != record["id"]:
        raise ValueError(f"previous record {previous.get('id')!r} is not {record['id']!r}")
    if previous.get("published"):
        record["published"] = previous["published"]
    if {**record, "modified": previous.get("modified")} == _plain(previous):
        return copy.deepcopy(dict(previous))
    record["modified"] = _later(now, previous.get("modified"))
    return record


# ------------------------------------------------------------------ builders


def build_revision_advisory(
    *,
    kind: AdvisoryKind,
    repo_id: str,
    revision: str,
    parent: str | None,
    revision_date: datetime | None,
    findings: list[Finding],
    endpoint: str,
    tracker_url: str | None,
    estimate_delta: dict | None,
    related: list[str],
    affected_commits: Iterable[str],
    now: datetime,
    min_severity: Severity = Severity.LOW,
    previous: dict | None = None,
) -> dict | None:
    """The OSV record of ``kind`` ("update" or "risk") for one revision, or None.

    Only ``findings`` that classify as ``kind`` and reach ``min_severity`` count.
    Returns:

    * None when none count and there is no ``previous`` record;
    * ``previous`` withdrawn (:func:`withdraw`) when none count any more;
    * ``previous`` itself, unchanged, when the rebuilt content equals it apart
      from ``modified`` (so ``modified`` only moves when content changes);
    * otherwise a new record with ``modified = now`` (``published`` kept from
      ``previous``, else ``now``).

    ``affected_commits`` (the caller owns the graph) are listed in ``versions``,
    sorted; compute them from :func:`advisory_events` with
    :func:`tracker.core.advisory.affected.affected_commits`. A risk record keeps the
    ``fixed`` events that :func:`mark_fixed` added to ``previous``.
    Raises ValueError on a bad repo id, a short sha or a naive datetime.
    """
    validate_repo_id(repo_id)
    _sha(revision, "revision")
    if parent is not None:
        _sha(parent, "parent")
    record_id = advisory_id(repo_id, revision, kind)
    selected = split_findings(findings, min_severity).get(kind, [])
    if not selected:
        return withdraw(previous, now) if previous is not None else None

    repo_url = _repo_url(endpoint, repo_id)
    fixes = _fixes(previous) if kind == "risk" else []
    related = sorted(set(related))
    now_ts = format_timestamp(now)
    worst = Severity.worst(f.severity for f in selected)
    assert worst is not None
    database_specific: dict[str, Any] = {
        "source": SOURCE,
        "kind": kind,
        "severity": worst.name,
        "categories": sorted({f.category for f in selected}),
        "repo_id": repo_id,
        "revision": revision,
        "parent": parent,
        "revision_date": format_timestamp(revision_date) if revision_date else None,
        "findings": [f.to_json() for f in selected],
    }
    if estimate_delta is not None:
        database_specific["estimate_delta"] = estimate_delta
    record: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "id": record_id,
        "modified": now_ts,
        "published": now_ts,
        "summary": _summary(kind, repo_id, revision, selected),
        "details": _details(
            kind=kind, repo_id=repo_id, repo_url=repo_url, revision=revision, parent=parent,
            revision_date=revision_date, findings=selected, estimate_delta=estimate_delta,
            related=related, fixes=fixes,
        ),
        "affected": [_affected_entry(repo_id, repo_url, advisory_events(kind, revision, fixes), affected_commits)],
        "references": _references(kind, repo_url, revision, fixes, tracker_url, record_id),
        "credits": [{"name": SOURCE, "type": "TOOL"}],
        "database_specific": database_specific,
    }
    if related:
        record["related"] = related
    return _finalise(record, previous, now)


def build_revision_advisories(
    *,
    repo_id: str,
    revision: str,
    parent: str | None,
    revision_date: datetime | None,
    findings: list[Finding],
    endpoint: str,
    tracker_url: str | None,
    estimate_delta: dict | None,
    related: list[str],
    parents: Mapping[str, list[str]],
    now: datetime,
    min_severity: Severity = Severity.LOW,
    previous: Iterable[dict] = (),
) -> list[dict]:
    """Every advisory a revision should have: 0, 1 or 2 records ("risk" first, then "update").

    Same inputs as :func:`build_revision_advisory`, except that the caller
    passes the repo's commit graph (``parents``: commit -> parents, first parent
    first) and the affected commits are computed here from each record's events,
    and ``previous`` is the stored records for this revision (any order; records
    with other ids are ignored). A stored record whose kind has no findings any
    more comes back withdrawn; the list holds exactly the records to upsert.
    """
    stored = {r["id"]: r for r in previous}
    out: list[dict] = []
    for kind in ("risk", "update"):
        record_id = advisory_id(repo_id, revision, kind)
        prev = stored.get(record_id)
        events = advisory_events(kind, revision, _fixes(prev) if kind == "risk" else [])
        record = build_revision_advisory(
            kind=kind, repo_id=repo_id, revision=revision, parent=parent, revision_date=revision_date,
            findings=findings, endpoint=endpoint, tracker_url=tracker_url, estimate_delta=estimate_delta,
            related=related, affected_commits=compute_affected_commits(parents, events), now=now,
            min_severity=min_severity, previous=prev,
        )
        if record is not None:
            out.append(record)
    return out


def range_events(record: Mapping[str, Any]) -> list[dict[str, str]]:
    """The events of every GIT range of a record (the tracker writes one range per record)."""
    return [e for r in _git_ranges(record) for e in r.get("events", [])]


def with_versions(record: dict, versions: Iterable[str], now: datetime) -> dict:
    """A copy of ``record`` whose ``affected[0].versions`` are ``versions`` (sorted); ``modified`` moves
    only when they changed."""
    wanted = sorted(set(versions))
    if record["affected"][0].get("versions", []) == wanted:
        return record
    return {**record, "affected": [{**record["affected"][0], "versions": wanted}, *record["affected"][1:]],
            "modified": _later(now, record.get("modified"))}


def mark_fixed(record: dict, fixed_revision: str, now: datetime, affected_commits: Iterable[str]) -> dict:
    """A copy of ``record`` saying that ``fixed_revision`` undid it.

    Adds a ``fixed`` event to its GIT range, a FIX reference and an "Undone"
    section to ``details``, replaces ``versions`` with ``affected_commits``
    (recomputed by the caller with the new event) and moves ``modified``;
    ``published`` and the id stay. Idempotent: fixing again with the same
    revision and commits returns the record unchanged. Raises ValueError for an
    ``update`` advisory (its own revision already is the fix) or a record with
    no GIT range.
    """
    _sha(fixed_revision, "fixed_revision")
    if (record.get("database_specific") or {}).get("kind") == "update":
        raise ValueError(f"{record.get('id')}: an update advisory is fixed by its own revision")
    new = copy.deepcopy(record)
    ranges = _git_ranges(new)
    if not ranges:
        raise ValueError(f"{record.get('id')}: no GIT range to add a fixed event to")
    rng = ranges[0]
    if all(e.get("fixed") != fixed_revision for e in rng["events"]):
        rng["events"].append({"fixed": fixed_revision})
    fixes = _fixes(new)
    repo_url = rng["repo"]
    new["affected"][0]["versions"] = sorted({_sha(v, "an affected commit") for v in affected_commits})
    fix_url = _commit_url(repo_url, fixed_revision)
    refs = new.setdefault("references", [])
    if not any(r.get("type") == "FIX" and r.get("url") == fix_url for r in refs):
        advisory_refs = [r for r in refs if r.get("type") == "ADVISORY"]
        refs[:] = [r for r in refs if r.get("type") != "ADVISORY"] + [{"type": "FIX", "url": fix_url}] + advisory_refs
    new["details"] = _with_fix_section(new.get("details", ""), repo_url, fixes)
    if _plain(new) == _plain(record):
        return copy.deepcopy(record)
    new["modified"] = _later(now, record.get("modified"))
    return _plain(new)


def withdraw(record: dict, now: datetime, reason: str | None = None) -> dict:
    """A copy of ``record`` marked ``withdrawn`` (and ``modified``) at ``now``; already withdrawn: unchanged.

    For advisories the tracker no longer stands behind (re-analysis with newer
    rules found nothing at the threshold). Not for reverts: a revert is a
    ``fixed`` event (:func:`mark_fixed`). The rationale goes first in
    ``summary`` as OSV asks, and in ``database_specific.withdrawn_reason``.
    """
    if record.get("withdrawn"):
        return copy.deepcopy(record)
    reason = reason or "re-analysis no longer reports findings at or above the minimum severity"
    new = copy.deepcopy(record)
    stamp = _later(now, record.get("modified"))
    new["withdrawn"] = stamp
    new["modified"] = stamp
    new["summary"] = _one_line(f"Withdrawn ({reason}): {record.get('summary', '')}")
    new["details"] = f"**Withdrawn** on {stamp}: {reason}.\n\n" + record.get("details", "")
    new.setdefault("database_specific", {})["withdrawn_reason"] = reason
    return _plain(new)


def repo_event_advisory(
    *,
    repo_id: str,
    kind: RepoEventKind,
    detail: dict,
    revisions: list[str],
    endpoint: str,
    now: datetime,
    tracker_url: str | None = None,
    previous: dict | None = None,
) -> dict:
    """An advisory about the repo itself rather than a file change.

    ``kind`` and its severity come from ``REPO_EVENTS`` (``recreated`` - the
    namespace deleted and created again, a possible takeover - is critical).
    ``revisions`` are the commits concerned and are listed in ``versions``:
    for ``history_rewritten`` the revisions no longer reachable from the branch
    (the record then has no range: those commits are gone from the graph, and
    ``introduced: "0"`` would wrongly cover the new history); for the other kinds
    the repo's known revisions, with a range ``introduced: "0"`` that covers the
    whole repo as it is now. ``detail`` (JSON-able: e.g. ``{"old_head", "new_head"}``
    or ``{"new_repo_id"}``) is kept in ``database_specific.detail``; a
    ``new_repo_id`` also appears in the summary. The id depends on repo, kind and
    the set of revisions only (:func:`tracker.core.advisory.ids.repo_event_id`), and
    ``previous`` gives the same ``modified``/``published`` rules as revision advisories.
    """
    validate_repo_id(repo_id)
    if kind not in REPO_EVENTS:
        raise ValueError(f"unknown repo event kind {kind!r}; expected one of {sorted(REPO_EVENTS)}")
    if not revisions:
        raise ValueError("a repo event advisory needs at least one revision")
    for r in revisions:
        _sha(r, "revision")
    severity, description = REPO_EVENTS[kind]
    record_id = repo_event_id(repo_id, kind, revisions)
    repo_url = _repo_url(endpoint, repo_id)
    now_ts = format_timestamp(now)
    fixes = _fixes(previous) if kind not in ("history_rewritten", "commit_flood") else []
    if kind == "history_rewritten":
        events = None
    elif kind == "commit_flood":  # the intermediate revisions: from the first new one up to the head
        events = [{"introduced": revisions[0]}, {"fixed": revisions[-1]}]
    else:
        events = [{"introduced": "0"}] + [{"fixed": f} for f in fixes]
    new_name = detail.get("new_repo_id") if isinstance(detail, Mapping) else None
    summary = f"{repo_id}: {description}" + (f" (now {new_name})" if new_name else "")
    shown = sorted(set(revisions))
    listing = "\n".join(f"- [`{r[:12]}`]({_commit_url(repo_url, r)})" for r in shown[:50])
    if len(shown) > 50:
        listing += f"\n- … and {len(shown) - 50} more (all listed in `affected[].versions`)"
    explanation = {
        "history_rewritten": "The branch history was rewritten: the revisions below are no longer reachable "
        "from it. Anyone pinned to them can no longer fetch them reliably and should review what replaced them.",
        "renamed": "The repo was renamed. Pins by the old id keep working only while the Hub redirects; "
        "if someone creates a new repo under the old id, they will get its content instead.",
        "deleted": "The repo was deleted. Pinned revisions can no longer be downloaded, and the id may be "
        "taken by someone else.",
        "recreated": "The repo was deleted and a repo with the same id was created again. Its content may come "
        "from a different owner: treat every revision as untrusted until reviewed.",
        "gated": "The repo now requires accepting conditions before download; unattended downloads will fail.",
        "commit_flood": "More new commits arrived at once than the tracker reads in one poll. The head was "
        "analysed at once, against the last revision read; the revisions in between are read in the background "
        "and, until then, are affected by this advisory: pin the head or a revision the tracker has read.",
        "private": "The repo was made private (or is no longer visible); downloads will fail.",
    }[kind]
    details = (
        f"**{description.capitalize()}**: [{repo_id}]({repo_url}).\n\n{explanation}\n\n"
        f"## Revisions concerned\n{listing}"
    ) + _fix_section(repo_url, fixes)
    record: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "id": record_id,
        "modified": now_ts,
        "published": now_ts,
        "summary": _one_line(summary),
        "details": details,
        "affected": [_affected_entry(repo_id, repo_url, events, revisions)],
        "references": _references("repo", repo_url, None, fixes, tracker_url, record_id),
        "credits": [{"name": SOURCE, "type": "TOOL"}],
        "database_specific": {
            "source": SOURCE,
            "kind": "repo",
            "event": kind,
            "severity": severity.name,
            "categories": ["repo"],
            "repo_id": repo_id,
            "detail": detail,
        },
    }
    return _finalise(record, previous, now)
