"""An audit's report as text, JSON or SARIF 2.1.0, and its exit status under ``--fail-on``. Contains no I/O.

One entry per cached model revision. SARIF: the scan's advisory rules
(``hf-advisory/<kind>/<severity>``) plus ``hf-stale`` (a revision behind its branch) and
``hf-unresolved``; each result is located at the snapshot folder, relative to the cache
(``uriBaseId: HF_HUB_CACHE``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from tracker.core.escaping import escape_lines, escape_markdown
from tracker.core.model import Severity
from tracker.pipeline.audit.cache import CacheContents, CachedRevision
from tracker.pipeline.scan.model import PinStatus
from tracker.pipeline.scan.report import LEVELS, SARIF_SCHEMA, SarifRules, advisory_rule

STALE = "stale"
FAIL_ON_CHOICES = (*(s.value for s in Severity), STALE)


def _iso(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def _size(n: int) -> str:
    """Bytes as people read them, in powers of 1000 as huggingface_hub's ``hf cache ls`` shows them."""
    if n < 1000:
        return f"{n} bytes"
    value = float(n)
    for unit in ("kB", "MB", "GB"):
        value /= 1000
        if value < 1000:
            return f"{value:.1f} {unit}"
    return f"{value / 1000:.1f} TB"


@dataclass(frozen=True)
class AuditEntry:
    """A cached revision with what the tracker knows of it (``status`` None: not looked up)."""

    revision: CachedRevision
    status: PinStatus | None
    watched: bool  # answered from the user's store (else read from the Hub into a scratch one)

    @property
    def behind(self) -> int | None:
        return self.status.behind if self.status is not None else None


@dataclass(frozen=True)
class AuditReport:
    cache: CacheContents
    entries: tuple[AuditEntry, ...]
    fail_on: tuple[str, ...] = ()

    @classmethod
    def build(cls, cache: CacheContents, statuses: dict[tuple[str, str], PinStatus], *,
              watched: Iterable[str] = (), fail_on: Iterable[str] = ()) -> AuditReport:
        mine = set(watched)
        entries = tuple(AuditEntry(r, statuses.get((r.repo, r.sha)), r.repo in mine) for r in cache.revisions)
        return cls(cache=cache, entries=entries, fail_on=tuple(fail_on))

    # -- the verdict ------------------------------------------------------------------------------

    @property
    def threshold(self) -> Severity | None:
        """The most lenient severity named by ``--fail-on`` (``high`` fails on critical and high)."""
        named = [Severity(v) for v in self.fail_on if v != STALE]
        return max(named, key=lambda s: s.rank) if named else None

    def failing(self, entry: AuditEntry) -> list[str]:
        """Why this revision fails the audit under ``--fail-on`` (empty: it does not)."""
        why = []
        threshold = self.threshold
        if threshold is not None and entry.status is not None:
            hits = [a for a in entry.status.advisories if a.severity.at_least(threshold)]
            if hits:
                why.append(f"{len(hits)} advisor{'y' if len(hits) == 1 else 'ies'} at or above {threshold.value}")
        if STALE in self.fail_on and entry.behind:
            why.append(f"{entry.behind} behind its branch")
        return why

    @property
    def exit_code(self) -> int:
        return 1 if any(self.failing(e) for e in self.entries) else 0

    # -- JSON -------------------------------------------------------------------------------------

    def summary(self) -> dict[str, int]:
        advisories = {a.id for e in self.entries if e.status for a in e.status.advisories}
        return {
            "repos": len({e.revision.repo for e in self.entries}),
            "revisions": len(self.entries),
            "affected": sum(1 for e in self.entries if e.status and e.status.advisories),
            "advisories": len(advisories),
            "stale": sum(1 for e in self.entries if e.behind),
            "skipped": len(self.cache.skipped),
            "size": sum(e.revision.size for e in self.entries),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "cache": self.cache.path,
            "revisions": [self._entry_json(e) for e in self.entries],
            "skipped": [{"name": s.name, "kind": s.kind, "reason": s.reason} for s in self.cache.skipped],
            "summary": self.summary(),
            "fail_on": list(self.fail_on),
            "failed": self.exit_code != 0,
        }

    def _entry_json(self, entry: AuditEntry) -> dict[str, Any]:
        rev, status = entry.revision, entry.status
        return {
            "repo": rev.repo,
            "revision": rev.sha,
            "refs": list(rev.refs),
            "size": rev.size,
            "files": rev.files,
            "last_accessed": _iso(rev.last_accessed),
            "last_modified": _iso(rev.last_modified),
            "path": rev.path,
            "watched": entry.watched,
            "head": status.head if status else None,
            "behind": entry.behind,
            "advisories": [{"id": a.id, "severity": a.severity.value, "kind": a.kind, "summary": a.summary}
                           for a in (status.advisories if status else ())],
            "suggested_revision": status.suggested if status else None,
            "suggestion_reason": status.reason if status else None,
            "notes": list(status.notes) if status else [],
            "failing": self.failing(entry),
        }

    # -- text -------------------------------------------------------------------------------------

    def to_text(self) -> str:
        lines = []
        for entry in self.entries:
            lines.extend(self._entry_text(entry))
        for skipped in self.cache.skipped:
            lines.append(f"{skipped.name}  skipped: {skipped.reason}")
        s = self.summary()
        if not self.entries:
            lines.append(f"no model revisions in the cache at {self.cache.path}")
        else:
            lines.append(
                f"{s['revisions']} cached revision(s) of {s['repos']} model repo(s), {_size(s['size'])}: "
                f"{s['affected']} affected by {s['advisories']} advisor{'y' if s['advisories'] == 1 else 'ies'}, "
                f"{s['stale']} behind their branch"
                + (f"; {s['skipped']} entr{'y' if s['skipped'] == 1 else 'ies'} skipped" if s["skipped"] else ""))
        failing = [e for e in self.entries if self.failing(e)]
        if failing:
            lines.append(f"failing (--fail-on {','.join(self.fail_on)}): {len(failing)} revision(s)")
        return escape_lines(lines) + "\n"  # ref and folder names are whatever the cache holds

    def _entry_text(self, entry: AuditEntry) -> list[str]:
        rev, status = entry.revision, entry.status
        refs = f" ({', '.join(rev.refs)})" if rev.refs else ""
        state = ""
        if entry.behind is not None:
            state = f", {entry.behind} behind the head" if entry.behind else ", at the head"
        out = [f"{rev.repo}@{rev.sha[:12]}{refs}  {_size(rev.size)}, last used {rev.last_accessed:%Y-%m-%d}{state}"]
        if status is not None:
            for hit in status.advisories:
                out.append(f"    [{hit.severity.value}] {hit.id}  {hit.summary}")
            if status.suggested and status.suggested != rev.sha:
                out.append(f"    move to {status.suggested}" + (f": {status.reason}" if status.reason else ""))
            for note in status.notes:
                out.append(f"    note: {note}")
        return out

    # -- SARIF ------------------------------------------------------------------------------------

    def to_sarif(self, *, version: str) -> dict[str, Any]:
        rules = SarifRules()
        rule = rules.index

        results = []
        for entry in self.entries:
            rev, status = entry.revision, entry.status
            shown = f"{rev.repo}@{rev.sha[:12]}"
            move = f" Suggested revision: {status.suggested}." if status and status.suggested not in (
                None, rev.sha) else ""
            for hit in status.advisories if status else ():
                rule_id = f"hf-advisory/{hit.kind or 'advisory'}/{hit.severity.value}"
                n = rule(rule_id, advisory_rule(hit.kind or "advisory", hit.severity))
                results.append(_result(rule_id, n, LEVELS[hit.severity],
                                       f"{shown} (cached) is affected by {hit.id}: {hit.summary}{move}", rev=rev,
                                       what=hit.id, advisory=hit.id))
            if entry.behind:
                n = rule("hf-stale", _STALE_RULE)
                results.append(_result("hf-stale", n, "note", f"{shown} (cached) is {entry.behind} commit(s) "
                                                              f"behind its branch.{move}", rev=rev, what=STALE))
            if status is not None and status.revision is None:
                n = rule("hf-unresolved", _UNRESOLVED_RULE)
                why = "; ".join(status.notes) or "unknown to the tracker"
                results.append(_result("hf-unresolved", n, "warning", f"{shown} (cached): {why}.", rev=rev,
                                       what="unresolved"))
        return {
            "$schema": SARIF_SCHEMA,
            "version": "2.1.0",
            "runs": [{
                "tool": {"driver": {"name": "upstream-tracker", "version": version, "semanticVersion": version,
                                    "rules": rules.rules}},
                "originalUriBaseIds": {"HF_HUB_CACHE": {"uri": _folder_uri(self.cache.path)}},
                "results": results,
            }],
        }


def _folder_uri(path: str) -> str:
    return "file://" + quote(path.rstrip("/") + "/")


def _result(rule_id: str, rule_index: int, level: str, text: str, *, rev: CachedRevision, what: str,
            advisory: str | None = None) -> dict[str, Any]:
    key = "\0".join([rev.repo, rev.sha, what])
    properties = {"repo": rev.repo, "revision": rev.sha}
    if advisory is not None:
        properties["advisory"] = advisory
    return {
        "ruleId": rule_id,
        "ruleIndex": rule_index,
        "level": level,
        "message": {"text": escape_markdown(text)},  # viewers render it as Markdown
        "locations": [{"physicalLocation": {"artifactLocation": {"uri": quote(rev.path) + "/",
                                                                 "uriBaseId": "HF_HUB_CACHE"}}}],
        "partialFingerprints": {"upstreamTracker/v1": hashlib.sha256(key.encode()).hexdigest()[:32]},
        "properties": properties,
    }


_STALE_RULE: dict[str, Any] = {
    "name": "StaleCachedModelRevision",
    "shortDescription": {"text": "Cached model revision behind its branch"},
    "fullDescription": {"text": "The cache holds a revision of a Hub model that is not the head of its branch: "
                                "upstream has committed since."},
    "help": {"text": "Review what changed (`tracker diff REPO OLD NEW`) and download the suggested revision."},
    "defaultConfiguration": {"level": "note"},
    "properties": {"tags": ["supply-chain", "huggingface"], "precision": "very-high"},
}

_UNRESOLVED_RULE: dict[str, Any] = {
    "name": "UnresolvedCachedModelRevision",
    "shortDescription": {"text": "Cached model revision not found upstream"},
    "fullDescription": {"text": "The cached commit could not be placed on the repo's branch: it may have been "
                                "removed by a history rewrite, or the repo may be gone or private."},
    "help": {"text": "Check the repo and the commit on the Hub; `tracker events REPO` lists rewrites."},
    "defaultConfiguration": {"level": "warning"},
    "properties": {"tags": ["supply-chain", "huggingface"], "precision": "medium"},
}
