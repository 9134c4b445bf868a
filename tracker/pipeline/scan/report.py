"""A scan's report as text, JSON or SARIF 2.1.0, and its exit status under ``--fail-on``. Contains no I/O.

SARIF: one rule per advisory kind and severity (``hf-advisory/update/high``),
plus ``hf-floating`` (a reference not pinned to a commit) and
``hf-unresolved`` (a pin the tracker could not place); one result per
(reference, advisory), located at the repo id in the file, with a URI relative
to the scanned path. Severities map to SARIF levels and to the numeric
``security-severity`` that GitHub code scanning sorts by.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from tracker.core.escaping import escape_lines, escape_markdown
from tracker.core.model import Severity
from tracker.pipeline.scan.model import Found, PinStatus, Reference

FLOATING = "floating"
FAIL_ON_CHOICES = (*(s.value for s in Severity), FLOATING)
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"

LEVELS = {Severity.CRITICAL: "error", Severity.HIGH: "error", Severity.MODERATE: "warning",
           Severity.LOW: "note", Severity.INFO: "note"}
# GitHub reads "security-severity" (0.0-10.0) on rules tagged "security": >= 9 critical, >= 7 high, >= 4 medium.
_SECURITY_SEVERITY = {Severity.CRITICAL: "9.5", Severity.HIGH: "8.0", Severity.MODERATE: "5.5",
                      Severity.LOW: "3.0", Severity.INFO: "1.0"}


@dataclass(frozen=True)
class Entry:
    """A reference with what the tracker knows of it (``status`` None: not looked up)."""

    reference: Reference
    status: PinStatus | None

    @property
    def behind(self) -> int | None:
        """How many commits the pin is behind the head: None when floating or unknown."""
        return self.status.behind if self.status is not None and self.reference.pinned else None


@dataclass(frozen=True)
class ScanReport:
    root: str
    found: Found
    entries: tuple[Entry, ...]
    fail_on: tuple[str, ...] = ()
    watched: tuple[str, ...] = field(default=())

    @classmethod
    def build(cls, root: str, found: Found, statuses: dict[tuple[str, str | None], PinStatus], *,
              fail_on: Iterable[str] = (), watched: Iterable[str] = ()) -> ScanReport:
        entries = tuple(Entry(r, statuses.get((r.repo, r.ref))) for r in found.references)
        return cls(root=root, found=found, entries=entries, fail_on=tuple(fail_on), watched=tuple(watched))

    # -- the verdict ------------------------------------------------------------------------------

    @property
    def threshold(self) -> Severity | None:
        """The most lenient severity named by ``--fail-on`` (``high`` fails on critical and high)."""
        named = [Severity(v) for v in self.fail_on if v != FLOATING]
        return max(named, key=lambda s: s.rank) if named else None

    def failing(self, entry: Entry) -> list[str]:
        """Why this reference fails the scan under ``--fail-on`` (empty: it does not)."""
        why = []
        if FLOATING in self.fail_on and not entry.reference.pinned:
            why.append("not pinned to a commit")
        threshold = self.threshold
        if threshold is not None and entry.status is not None:
            hits = [a for a in entry.status.advisories if a.severity.at_least(threshold)]
            if hits:
                why.append(f"{len(hits)} advisor{'y' if len(hits) == 1 else 'ies'} at or above {threshold.value}")
        return why

    @property
    def exit_code(self) -> int:
        return 1 if any(self.failing(e) for e in self.entries) else 0

    # -- JSON -------------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        references = [self._entry_json(e) for e in self.entries]
        advisories = {a.id for e in self.entries if e.status for a in e.status.advisories}
        return {
            "path": self.root,
            "references": references,
            "summary": {
                "files_read": self.found.files_read,
                "references": len(self.entries),
                "pinned": sum(1 for e in self.entries if e.reference.pinned),
                "floating": sum(1 for e in self.entries if not e.reference.pinned),
                "affected": sum(1 for e in self.entries if e.status and e.status.advisories),
                "advisories": len(advisories),
                "skipped": len(self.found.skipped),
            },
            "skipped": [{"file": s.file, "reason": s.reason} for s in self.found.skipped],
            "watched": list(self.watched),
            "fail_on": list(self.fail_on),
            "failed": self.exit_code != 0,
        }

    def _entry_json(self, entry: Entry) -> dict[str, Any]:
        ref, status = entry.reference, entry.status
        return {
            "file": ref.file,
            "line": ref.line,
            "column": ref.column,
            "cell": ref.cell,
            "repo": ref.repo,
            "revision": ref.ref if ref.pinned else FLOATING,
            "ref": ref.ref,
            "revision_expr": ref.revision_expr,
            "resolved": status.revision if status else None,
            "head": status.head if status else None,
            "behind": entry.behind,
            "advisories": [{"id": a.id, "severity": a.severity.value, "kind": a.kind, "summary": a.summary}
                           for a in (status.advisories if status else ())],
            "suggested_revision": status.suggested if status else None,
            "suggestion_reason": status.reason if status else None,
            "source": ref.source.value,
            "via": ref.via,
            "notes": list(status.notes) if status else [],
            "failing": self.failing(entry),
        }

    # -- text -------------------------------------------------------------------------------------

    def to_text(self) -> str:
        lines = []
        for entry in self.entries:
            lines.extend(self._entry_text(entry))
        summary = self.to_json()["summary"]
        files = len({e.reference.file for e in self.entries})
        if not self.entries:
            lines.append(f"no Hub model references found ({summary['files_read']} files read)")
        else:
            lines.append(
                f"{summary['references']} reference(s) in {files} file(s): {summary['pinned']} pinned, "
                f"{summary['floating']} floating; {summary['affected']} affected by "
                f"{summary['advisories']} advisor{'y' if summary['advisories'] == 1 else 'ies'}"
            )
        if self.found.skipped:
            lines.append(f"{len(self.found.skipped)} file(s) or cells not read (--format json lists them)")
        for repo in self.watched:
            lines.append(f"now watching {repo}")
        failing = [e for e in self.entries if self.failing(e)]
        if failing:
            lines.append(f"failing (--fail-on {','.join(self.fail_on)}): {len(failing)} reference(s)")
        return escape_lines(lines) + "\n"  # file names, revision literals and summaries are strangers' text

    def _entry_text(self, entry: Entry) -> list[str]:
        ref, status = entry.reference, entry.status
        where = f"{ref.file}:{ref.line}" + (f":{ref.column}" if ref.column else "")
        if ref.cell is not None:
            where += f" (cell {ref.cell})"
        if ref.pinned:
            assert ref.ref is not None
            state = f"pinned {ref.ref[:12]}"
            if entry.behind is not None:
                state += f", {entry.behind} behind the head" if entry.behind else ", at the head"
        elif ref.revision_expr:
            state = f"floating (revision={ref.revision_expr})"
        else:
            state = f"floating ({ref.ref})" if ref.ref else "floating"
        out = [f"{where}  {ref.repo}  {state}"]
        if status is not None:
            for hit in status.advisories:
                out.append(f"    [{hit.severity.value}] {hit.id}  {hit.summary}")
            current = ref.ref if ref.pinned else None
            if status.suggested and status.suggested != current:
                verb = "move to" if ref.pinned else "pin to"
                out.append(f"    {verb} {status.suggested}" + (f": {status.reason}" if status.reason else ""))
            elif status.advisories and status.suggested is None:
                out.append("    no revision on the branch is free of these advisories")
            for note in status.notes:
                out.append(f"    note: {note}")
        return out

    # -- SARIF ------------------------------------------------------------------------------------

    def to_sarif(self, *, version: str) -> dict[str, Any]:
        rules = SarifRules()
        rule = rules.index

        results = []
        for entry in self.entries:
            ref, status = entry.reference, entry.status
            location = self._location(ref)
            shown = f"{ref.repo}@{ref.ref[:12]}" if ref.pinned and ref.ref else ref.repo
            for hit in status.advisories if status else ():
                rule_id = f"hf-advisory/{hit.kind or 'advisory'}/{hit.severity.value}"
                n = rule(rule_id, advisory_rule(hit.kind or "advisory", hit.severity))
                text = f"{shown} is affected by {hit.id}: {hit.summary}"
                if status and status.suggested:
                    text += f" Suggested revision: {status.suggested}."
                results.append(self._result(rule_id, n, LEVELS[hit.severity], text, location=location, ref=ref,
                                            what=hit.id, advisory=hit.id))
            if not ref.pinned:
                n = rule("hf-floating", _FLOATING_RULE)
                how = (f"revision={ref.revision_expr}" if ref.revision_expr
                       else f"revision {ref.ref!r}" if ref.ref else "no revision")
                text = f"{ref.repo} is loaded with {how}, not a commit: what it loads changes when upstream does."
                if status and status.suggested:
                    text += f" Pin it: revision=\"{status.suggested}\"."
                results.append(self._result("hf-floating", n, "warning", text, location=location, ref=ref,
                                            what="floating"))
            elif status is not None and status.revision is None:
                n = rule("hf-unresolved", _UNRESOLVED_RULE)
                why = "; ".join(status.notes) or "unknown to the tracker"
                results.append(self._result("hf-unresolved", n, "warning", f"{shown}: {why}.", location=location,
                                            ref=ref, what="unresolved"))
        return {
            "$schema": SARIF_SCHEMA,
            "version": "2.1.0",
            "runs": [{
                "tool": {"driver": {
                    "name": "upstream-tracker",
                    "version": version,
                    "semanticVersion": version,
                    "rules": rules.rules,
                }},
                "columnKind": "unicodeCodePoints",
                "results": results,
            }],
        }

    @staticmethod
    def _location(ref: Reference) -> dict[str, Any]:
        region: dict[str, Any] = {"startLine": ref.line}
        if ref.column:
            region["startColumn"] = ref.column
        return {"physicalLocation": {"artifactLocation": {"uri": quote(ref.file), "uriBaseId": "%SRCROOT%"},
                                     "region": region}}

    @staticmethod
    def _result(rule_id: str, rule_index: int, level: str, text: str, *, location: dict[str, Any],
                ref: Reference, what: str, advisory: str | None = None) -> dict[str, Any]:
        # Stable across runs and line moves: the file, the repo, the revision as written and what is wrong.
        key = "\0".join([ref.file, ref.repo, ref.ref or "", what])
        properties = {"repo": ref.repo, "revision": ref.ref}
        if advisory is not None:
            properties["advisory"] = advisory
        return {
            "ruleId": rule_id,
            "ruleIndex": rule_index,
            "level": level,
            "message": {"text": escape_markdown(text)},  # viewers render it: a revision literal is no link
            "locations": [location],
            "partialFingerprints": {"upstreamTracker/v1": hashlib.sha256(key.encode()).hexdigest()[:32]},
            "properties": properties,
        }


def advisory_rule(kind: str, severity: Severity) -> dict[str, Any]:
    what = {"update": "misses an upstream change users should pick up",
            "risk": "carries an upstream risk (a pickle, remote code, a licence, a template)"}.get(
        kind, f"is affected by a '{kind}' advisory about the repo")
    return {
        "name": f"Upstream{kind.title().replace('_', '')}{severity.value.title()}",
        "shortDescription": {"text": f"Pinned model revision {what} ({severity.value})"},
        "fullDescription": {"text": f"The Hub model revision this code loads {what}; upstream-tracker "
                                    f"published an advisory of severity {severity.value} for it."},
        "help": {"text": "Move the pin to the suggested revision after reviewing the advisory "
                         "(`tracker query --repo REPO --revision REV` shows it in full)."},
        "defaultConfiguration": {"level": LEVELS[severity]},
        "properties": {"tags": ["security", "supply-chain", "huggingface"], "precision": "high",
                       "security-severity": _SECURITY_SEVERITY[severity]},
    }


class SarifRules:
    """A SARIF run's rule table: each rule id is added once, and results point at it by index."""

    def __init__(self) -> None:
        self.rules: list[dict[str, Any]] = []
        self._index: dict[str, int] = {}

    def index(self, rule_id: str, make: dict[str, Any]) -> int:
        if rule_id not in self._index:
            self._index[rule_id] = len(self.rules)
            self.rules.append({"id": rule_id, **make})
        return self._index[rule_id]


_FLOATING_RULE: dict[str, Any] = {
    "name": "FloatingModelRevision",
    "shortDescription": {"text": "Hub model not pinned to a commit"},
    "fullDescription": {"text": "The code loads a Hub model with no revision, or a branch or tag, so what it "
                                "loads changes whenever upstream pushes."},
    "help": {"text": "Pass revision=\"<40-hex commit>\" (the suggested revision is the current head)."},
    "defaultConfiguration": {"level": "warning"},
    "properties": {"tags": ["supply-chain", "huggingface"], "precision": "very-high"},
}

_UNRESOLVED_RULE: dict[str, Any] = {
    "name": "UnresolvedModelRevision",
    "shortDescription": {"text": "Pinned model revision not found upstream"},
    "fullDescription": {"text": "The pinned commit could not be placed on the repo's branch: it may have been "
                                "removed by a history rewrite, the repo may be gone, or the id may be wrong."},
    "help": {"text": "Check the repo and the commit on the Hub; `tracker events REPO` lists rewrites."},
    "defaultConfiguration": {"level": "warning"},
    "properties": {"tags": ["supply-chain", "huggingface"], "precision": "medium"},
}
