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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from tracker.core.advisory.affected import affected_commits as compute_affected_commits
from tracker.core.advisory.common import (
    SCHEMA_VERSION,
    SOURCE,
    SUMMARY_MAX,
    TOOL_CREDIT,
    affected_entry,
    check_sha,
    commit_url,
    finalise,
    fix_section,
    format_timestamp,
    later,
    one_line,
    repo_url,
    with_fix_section,
)
from tracker.core.advisory.ids import advisory_id, repo_event_id
from tracker.core.advisory.record import (
    Advisory,
    DatabaseSpecific,
    Event,
    OsvJson,
    Reference,
    parse_advisory,
    plain,
    to_osv,
)
from tracker.core.escaping import escape_controls
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import Finding, Severity, sort_findings, validate_repo_id

__all__ = [
    "CLASSIFICATION",
    "REPO_EVENTS",
    "SCHEMA_VERSION",
    "AdvisoryKind",
    "RepoEvent",
    "RepoEventKind",
    "RevisionFacts",
    "advisory_events",
    "build_revision_advisories",
    "build_revision_advisory",
    "classify",
    "format_timestamp",
    "mark_fixed",
    "range_events",
    "record_fixed",
    "record_with_versions",
    "record_withdrawn",
    "repo_event_advisory",
    "repo_event_record",
    "revision_record",
    "revision_records",
    "split_findings",
    "with_versions",
    "withdraw",
]

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



# ---------------------------------------------------------------- small helpers


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
    text = json.dumps(plain(value), ensure_ascii=False, sort_keys=True)
    return f"`{one_line(text, 80)}`"


def _render_estimate(delta: Mapping[str, Any]) -> list[str]:
    lines = []
    for key in sorted(delta):
        value = delta[key]
        if isinstance(value, Mapping) and set(value) >= {"before", "after"}:
            lines.append(f"- `{key}`: {_render_value(value['before'])} → {_render_value(value['after'])}")
        else:
            lines.append(f"- `{key}`: {_render_value(value)}")
    return lines


def _details(facts: RevisionFacts, kind: AdvisoryKind, findings: list[Finding], fixes: list[str]) -> str:
    repo_url, revision, parent = facts.repo_url, facts.revision, facts.parent
    label = "Risk introduced" if kind == "risk" else "Upstream change"
    where = f"parent `{parent[:12]}`" if parent else "first revision read"
    when = f", committed {format_timestamp(facts.revision_date)}" if facts.revision_date else ""
    parts = [
        f"**{label}** in [{facts.repo_id}]({repo_url}) at revision "
        f"[`{revision[:12]}`]({commit_url(repo_url, revision)}) ({where}){when}.",
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
        parts.extend(_severity_section(severity, [f for f in findings if f.severity is severity]))
    if facts.estimate_delta:
        parts.append("## Estimate changes\n" + "\n".join(_render_estimate(facts.estimate_delta)))
    if facts.related:
        parts.append("## Related OSV.dev advisories\n" + "\n".join(f"- {r}" for r in sorted(set(facts.related))))
    return "\n\n".join(parts) + fix_section(repo_url, fixes)


def _severity_section(severity: Severity, group: list[Finding]) -> list[str]:
    """One severity's heading and finding lines, then the diff excerpts of its findings."""
    lines = [f"### {severity.name.capitalize()}"]
    excerpts = []
    for f in group:
        path = f", `{escape_controls(f.path)}`" if f.path else ""
        lines.append(f"- {one_line(f.summary, 300)} (`{f.code}`{path})")
        excerpt = _diff_excerpt(f)
        if excerpt:
            excerpts.append(excerpt)
    return ["\n".join(lines), *excerpts]


def _summary(kind: AdvisoryKind, repo_id: str, revision: str, findings: list[Finding]) -> str:
    label = "Risk introduced in" if kind == "risk" else "Upstream change in"
    more = f" (+{len(findings) - 1} more)" if len(findings) > 1 else ""
    head = f"{label} {repo_id}@{revision[:12]}: "
    room = SUMMARY_MAX - len(head) - len(more)
    return one_line(head + one_line(findings[0].summary, max(room, 10)) + more)


def advisory_url(tracker_url: str | None, record_id: str) -> str | None:
    """The record's page on the tracker's own site, when it has one."""
    return f"{tracker_url.rstrip('/')}/advisories/{record_id}" if tracker_url else None


def _references(
    kind: str, repo_url: str, revision: str | None, fixes: list[str], page: str | None
) -> tuple[Reference, ...]:
    refs = [Reference(type="PACKAGE", url=repo_url)]
    if revision is not None:
        refs.append(Reference(type="FIX" if kind == "update" else "INTRODUCED", url=commit_url(repo_url, revision)))
    refs += [Reference(type="FIX", url=commit_url(repo_url, f)) for f in fixes]
    if page:
        refs.append(Reference(type="ADVISORY", url=page))
    return tuple(refs)


# ------------------------------------------------------------------ builders


@dataclass(frozen=True)
class RevisionFacts:
    """What a revision's advisories are built from, apart from their kind and the stored records.

    Only ``findings`` that reach ``min_severity`` count. Raises ValueError on a bad repo id or
    a short sha.
    """

    repo_id: str
    revision: str
    parent: str | None
    revision_date: datetime | None
    findings: Sequence[Finding]
    endpoint: str
    tracker_url: str | None = None
    estimate_delta: Mapping[str, Any] | None = None
    related: Sequence[str] = ()
    min_severity: Severity = Severity.LOW

    def __post_init__(self) -> None:
        validate_repo_id(self.repo_id)
        check_sha(self.revision, "revision")
        if self.parent is not None:
            check_sha(self.parent, "parent")

    @property
    def repo_url(self) -> str:
        return repo_url(self.endpoint, self.repo_id)


def revision_record(
    facts: RevisionFacts, kind: AdvisoryKind, *, affected_commits: Iterable[str], now: datetime,
    previous: Advisory | None = None,
) -> Advisory | None:
    """The OSV record of ``kind`` ("update" or "risk") for one revision, or None.

    Only findings that classify as ``kind`` count. Returns:

    * None when none count and there is no ``previous`` record;
    * ``previous`` withdrawn (:func:`record_withdrawn`) when none count any more;
    * ``previous`` itself, unchanged, when the rebuilt content equals it apart
      from ``modified`` (so ``modified`` only moves when content changes);
    * otherwise a new record with ``modified = now`` (``published`` kept from
      ``previous``, else ``now``).

    ``affected_commits`` (the caller owns the graph) are listed in ``versions``,
    sorted; compute them from :func:`advisory_events` with
    :func:`tracker.core.advisory.affected.affected_commits`. A risk record keeps the
    ``fixed`` events that :func:`record_fixed` added to ``previous``.
    Raises ValueError on a naive datetime.
    """
    selected = split_findings(facts.findings, facts.min_severity).get(kind, [])
    if not selected:
        return record_withdrawn(previous, now) if previous is not None else None
    fixes = previous.fixes if previous is not None and kind == "risk" else []
    record_id = advisory_id(facts.repo_id, facts.revision, kind)
    now_ts = format_timestamp(now)
    record = Advisory(
        schema_version=SCHEMA_VERSION, id=record_id, modified=now_ts, published=now_ts,
        summary=_summary(kind, facts.repo_id, facts.revision, selected),
        details=_details(facts, kind, selected, fixes),
        affected=(affected_entry(facts.repo_id, facts.repo_url, advisory_events(kind, facts.revision, fixes),
                                  affected_commits),),
        references=_references(kind, facts.repo_url, facts.revision, fixes, advisory_url(facts.tracker_url, record_id)),
        credits=(TOOL_CREDIT,),
        database_specific=_revision_specific(facts, kind, selected),
    )
    if facts.related:
        record = record.replace(related=tuple(sorted(set(facts.related))))
    return finalise(record, previous, now)


def _revision_specific(facts: RevisionFacts, kind: AdvisoryKind, selected: list[Finding]) -> DatabaseSpecific:
    worst = Severity.worst(f.severity for f in selected)
    assert worst is not None
    delta = {"estimate_delta": plain(facts.estimate_delta)} if facts.estimate_delta is not None else {}
    return DatabaseSpecific(
        source=SOURCE, kind=kind, severity=worst.name, categories=tuple(sorted({f.category for f in selected})),
        repo_id=facts.repo_id, revision=facts.revision, parent=facts.parent,
        revision_date=format_timestamp(facts.revision_date) if facts.revision_date else None,
        findings=tuple(plain(f.to_json()) for f in selected), **delta,
    )


def revision_records(
    facts: RevisionFacts, *, parents: Mapping[str, list[str]], now: datetime, previous: Iterable[Advisory] = (),
) -> list[Advisory]:
    """Every advisory a revision should have: 0, 1 or 2 records ("risk" first, then "update").

    As :func:`revision_record`, except that the caller passes the repo's commit graph
    (``parents``: commit -> parents, first parent first) and the affected commits are computed
    here from each record's events, and ``previous`` is the stored records for this revision
    (any order; records with other ids are ignored). A stored record whose kind has no findings
    any more comes back withdrawn; the list holds exactly the records to upsert.
    """
    stored = {r.id: r for r in previous}
    out: list[Advisory] = []
    kinds: tuple[AdvisoryKind, ...] = ("risk", "update")
    for kind in kinds:
        prev = stored.get(advisory_id(facts.repo_id, facts.revision, kind))
        events = advisory_events(kind, facts.revision, prev.fixes if prev is not None and kind == "risk" else [])
        record = revision_record(facts, kind, affected_commits=compute_affected_commits(parents, events), now=now,
                                 previous=prev)
        if record is not None:
            out.append(record)
    return out


def record_with_versions(record: Advisory, versions: Iterable[str], now: datetime) -> Advisory:
    """``record`` whose ``affected[0].versions`` are ``versions`` (sorted); ``modified`` moves
    only when they changed."""
    wanted = tuple(sorted(set(versions)))
    first, *rest = record.affected
    if first.versions == wanted:
        return record
    return record.replace(affected=(first.model_copy(update={"versions": wanted}), *rest),
                          modified=later(now, record.modified))


def record_fixed(record: Advisory, fixed_revision: str, now: datetime, affected_commits: Iterable[str]) -> Advisory:
    """``record`` saying that ``fixed_revision`` undid it.

    Adds a ``fixed`` event to its GIT range, a FIX reference and an "Undone" section to
    ``details``, replaces ``versions`` with ``affected_commits`` (recomputed by the caller with
    the new event) and moves ``modified``; ``published`` and the id stay. Idempotent: fixing
    again with the same revision and commits returns the record unchanged. Raises ValueError for
    an ``update`` advisory (its own revision already is the fix) or a record with no GIT range.
    """
    check_sha(fixed_revision, "fixed_revision")
    if record.kind == "update":
        raise ValueError(f"{record.id}: an update advisory is fixed by its own revision")
    ranges = list(record.git_ranges)
    if not ranges:
        raise ValueError(f"{record.id}: no GIT range to add a fixed event to")
    rng = ranges[0]
    assert rng.repo is not None
    events = rng.events
    if all(e.fixed != fixed_revision for e in events):
        events = (*events, Event(fixed=fixed_revision))
    new_rng = rng.model_copy(update={"events": events})
    fixes = [e.fixed for r in ranges for e in (new_rng if r is rng else r).events if e.fixed is not None]
    entries = [a.model_copy(update={"ranges": tuple(new_rng if r is rng else r for r in a.ranges)})
               if any(r is rng for r in a.ranges) else a for a in record.affected]
    versions = tuple(sorted({check_sha(v, "an affected commit") for v in affected_commits}))
    entries[0] = entries[0].model_copy(update={"versions": versions})
    new = record.replace(affected=tuple(entries),
                         references=_with_fix_reference(record.references, rng.repo, fixed_revision),
                         details=with_fix_section(record.details or "", rng.repo, fixes))
    if to_osv(new) == to_osv(record):
        return record
    return new.replace(modified=later(now, record.modified))


def _with_fix_reference(refs: tuple[Reference, ...], repo_url: str, fixed_revision: str) -> tuple[Reference, ...]:
    """``refs`` with a FIX reference to ``fixed_revision``, put before the ADVISORY ones."""
    fix_url = commit_url(repo_url, fixed_revision)
    if any(r.type == "FIX" and r.url == fix_url for r in refs):
        return refs
    advisory_refs = tuple(r for r in refs if r.type == "ADVISORY")
    return (*(r for r in refs if r.type != "ADVISORY"), Reference(type="FIX", url=fix_url), *advisory_refs)


def record_withdrawn(record: Advisory, now: datetime, reason: str | None = None) -> Advisory:
    """``record`` marked ``withdrawn`` (and ``modified``) at ``now``; already withdrawn: unchanged.

    For advisories the tracker no longer stands behind (re-analysis with newer rules found
    nothing at the threshold). Not for reverts: a revert is a ``fixed`` event
    (:func:`record_fixed`). The rationale goes first in ``summary`` as OSV asks, and in
    ``database_specific.withdrawn_reason``.
    """
    if record.withdrawn:
        return record
    reason = reason or "re-analysis no longer reports findings at or above the minimum severity"
    stamp = later(now, record.modified)
    return record.replace(
        withdrawn=stamp, modified=stamp,
        summary=one_line(f"Withdrawn ({reason}): {record.summary or ''}"),
        details=f"**Withdrawn** on {stamp}: {reason}.\n\n" + (record.details or ""),
        database_specific=record.specific.model_copy(update={"withdrawn_reason": reason}),
    )


@dataclass(frozen=True)
class RepoEvent:
    """Something that happened to the repo itself rather than to a file.

    ``kind`` and its severity come from ``REPO_EVENTS``. ``revisions`` are the commits concerned.
    ``detail`` (JSON-able: e.g. ``{"old_head", "new_head"}`` or ``{"new_repo_id"}``) is kept in
    ``database_specific.detail``; a ``new_repo_id`` also appears in the summary. Raises
    ValueError on a bad repo id, an unknown kind, no revisions or a short sha.
    """

    repo_id: str
    kind: RepoEventKind
    detail: Mapping[str, Any]
    revisions: Sequence[str]
    endpoint: str
    tracker_url: str | None = None

    def __post_init__(self) -> None:
        validate_repo_id(self.repo_id)
        if self.kind not in REPO_EVENTS:
            raise ValueError(f"unknown repo event kind {self.kind!r}; expected one of {sorted(REPO_EVENTS)}")
        if not self.revisions:
            raise ValueError("a repo event advisory needs at least one revision")
        for r in self.revisions:
            check_sha(r, "revision")

    @property
    def repo_url(self) -> str:
        return repo_url(self.endpoint, self.repo_id)


_REPO_EVENT_EXPLANATION: Mapping[str, str] = {
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
}


def _repo_event_ranges(event: RepoEvent, fixes: list[str]) -> list[dict[str, str]] | None:
    if event.kind == "history_rewritten":
        return None
    if event.kind == "commit_flood":  # the intermediate revisions: from the first new one up to the head
        return [{"introduced": event.revisions[0]}, {"fixed": event.revisions[-1]}]
    return [{"introduced": "0"}] + [{"fixed": f} for f in fixes]


def _repo_event_details(event: RepoEvent, description: str, fixes: list[str]) -> str:
    repo_url = event.repo_url
    shown = sorted(set(event.revisions))
    listing = "\n".join(f"- [`{r[:12]}`]({commit_url(repo_url, r)})" for r in shown[:50])
    if len(shown) > 50:
        listing += f"\n- … and {len(shown) - 50} more (all listed in `affected[].versions`)"
    return (
        f"**{description.capitalize()}**: [{event.repo_id}]({repo_url}).\n\n{_REPO_EVENT_EXPLANATION[event.kind]}"
        f"\n\n## Revisions concerned\n{listing}"
    ) + fix_section(repo_url, fixes)


def repo_event_record(event: RepoEvent, *, now: datetime, previous: Advisory | None = None) -> Advisory:
    """An advisory about the repo itself rather than a file change.

    ``recreated`` - the namespace deleted and created again, a possible takeover - is critical.
    The revisions are listed in ``versions``: for ``history_rewritten`` the revisions no longer
    reachable from the branch (the record then has no range: those commits are gone from the
    graph, and ``introduced: "0"`` would wrongly cover the new history); for the other kinds the
    repo's known revisions, with a range ``introduced: "0"`` that covers the whole repo as it is
    now. The id depends on repo, kind and the set of revisions only
    (:func:`tracker.core.advisory.ids.repo_event_id`), and ``previous`` gives the same
    ``modified``/``published`` rules as revision advisories.
    """
    severity, description = REPO_EVENTS[event.kind]
    record_id = repo_event_id(event.repo_id, event.kind, event.revisions)
    now_ts = format_timestamp(now)
    fixes = previous.fixes if previous is not None and event.kind not in ("history_rewritten", "commit_flood") \
        else []
    new_name = event.detail.get("new_repo_id")
    summary = f"{event.repo_id}: {description}" + (f" (now {new_name})" if new_name else "")
    record = Advisory(
        schema_version=SCHEMA_VERSION, id=record_id, modified=now_ts, published=now_ts,
        summary=one_line(summary), details=_repo_event_details(event, description, fixes),
        affected=(affected_entry(event.repo_id, event.repo_url, _repo_event_ranges(event, fixes),
                                  event.revisions),),
        references=_references("repo", event.repo_url, None, fixes, advisory_url(event.tracker_url, record_id)),
        credits=(TOOL_CREDIT,),
        database_specific=DatabaseSpecific(
            source=SOURCE, kind="repo", event=event.kind, severity=severity.name, categories=("repo",),
            repo_id=event.repo_id, detail=plain(dict(event.detail)),
        ),
    )
    return finalise(record, previous, now)


# ------------------------------------------------- the same, on JSON data


def _parsed(record: Mapping[str, Any] | None) -> Advisory | None:
    return parse_advisory(record) if record is not None else None


def _as_json(result: Advisory, source: Advisory | None, source_json: Mapping[str, Any] | None) -> OsvJson:
    """``result`` as JSON data; the caller's own dict (copied) when the builder gave ``source`` back unchanged."""
    if result is source and source_json is not None:
        return copy.deepcopy(dict(source_json))
    return to_osv(result)


def build_revision_advisory(  # noqa: PLR0913, RUF100 - the JSON form keeps the keyword interface of RevisionFacts
    *,
    kind: AdvisoryKind,
    repo_id: str,
    revision: str,
    parent: str | None,
    revision_date: datetime | None,
    findings: list[Finding],
    endpoint: str,
    tracker_url: str | None,
    estimate_delta: Mapping[str, Any] | None,
    related: list[str],
    affected_commits: Iterable[str],
    now: datetime,
    min_severity: Severity = Severity.LOW,
    previous: Mapping[str, Any] | None = None,
) -> OsvJson | None:
    """:func:`revision_record` on JSON data: the record as a dict, or None."""
    facts = RevisionFacts(repo_id=repo_id, revision=revision, parent=parent, revision_date=revision_date,
                          findings=findings, endpoint=endpoint, tracker_url=tracker_url,
                          estimate_delta=estimate_delta, related=related, min_severity=min_severity)
    prev = _parsed(previous)
    record = revision_record(facts, kind, affected_commits=affected_commits, now=now, previous=prev)
    return _as_json(record, prev, previous) if record is not None else None


def build_revision_advisories(  # noqa: PLR0913, RUF100 - the JSON form keeps the keyword interface of RevisionFacts
    *,
    repo_id: str,
    revision: str,
    parent: str | None,
    revision_date: datetime | None,
    findings: list[Finding],
    endpoint: str,
    tracker_url: str | None,
    estimate_delta: Mapping[str, Any] | None,
    related: list[str],
    parents: Mapping[str, list[str]],
    now: datetime,
    min_severity: Severity = Severity.LOW,
    previous: Iterable[Mapping[str, Any]] = (),
) -> list[OsvJson]:
    """:func:`revision_records` on JSON data."""
    facts = RevisionFacts(repo_id=repo_id, revision=revision, parent=parent, revision_date=revision_date,
                          findings=findings, endpoint=endpoint, tracker_url=tracker_url,
                          estimate_delta=estimate_delta, related=related, min_severity=min_severity)
    stored = [(parse_advisory(r), r) for r in previous]
    records = revision_records(facts, parents=parents, now=now, previous=[p for p, _ in stored])
    by_instance = {id(p): r for p, r in stored}
    return [_as_json(rec, rec, by_instance.get(id(rec))) for rec in records]


def range_events(record: Mapping[str, Any]) -> list[dict[str, str]]:
    """The events of every GIT range of a record (the tracker writes one range per record)."""
    return [e.as_json() for e in parse_advisory(record).events]


def with_versions(record: Mapping[str, Any], versions: Iterable[str], now: datetime) -> OsvJson:
    """:func:`record_with_versions` on JSON data."""
    parsed = parse_advisory(record)
    result = record_with_versions(parsed, versions, now)
    return dict(record) if result is parsed else to_osv(result)


def mark_fixed(record: Mapping[str, Any], fixed_revision: str, now: datetime,
               affected_commits: Iterable[str]) -> OsvJson:
    """:func:`record_fixed` on JSON data."""
    parsed = parse_advisory(record)
    return _as_json(record_fixed(parsed, fixed_revision, now, affected_commits), parsed, record)


def withdraw(record: Mapping[str, Any], now: datetime, reason: str | None = None) -> OsvJson:
    """:func:`record_withdrawn` on JSON data."""
    parsed = parse_advisory(record)
    return _as_json(record_withdrawn(parsed, now, reason), parsed, record)


def repo_event_advisory(  # noqa: PLR0913, RUF100 - the JSON form keeps the keyword interface of RepoEvent
    *,
    repo_id: str,
    kind: RepoEventKind,
    detail: Mapping[str, Any],
    revisions: Sequence[str],
    endpoint: str,
    now: datetime,
    tracker_url: str | None = None,
    previous: Mapping[str, Any] | None = None,
) -> OsvJson:
    """:func:`repo_event_record` on JSON data."""
    event = RepoEvent(repo_id=repo_id, kind=kind, detail=detail if isinstance(detail, Mapping) else {},
                      revisions=revisions, endpoint=endpoint, tracker_url=tracker_url)
    prev = _parsed(previous)
    return _as_json(repo_event_record(event, now=now, previous=prev), prev, previous)
