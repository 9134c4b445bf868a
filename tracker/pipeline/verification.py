"""The daemon's opt-in verification: after a revision's report is saved, run both revisions and attach
what was measured to its advisories.

With ``[verify] enabled = true``, a revision compared with an earlier one whose worst finding reaches
``[verify] min_severity`` is verified by :func:`tracker.adapters.verify.verifying.verify_revisions`
(the limited subprocess), outside the revision's transaction: the report is saved first, so a
verification that fails or breaches a limit costs nothing but its own line in the log. The
measurement goes to each live advisory of the revision as ``database_specific.measured``; when it
contradicts the inferred verdict, a ``verify.disagrees`` finding joins the revision's findings and the
advisories' summaries say so (:func:`tracker.core.verify.annotate`), in one transaction.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime

from tracker.core import verify
from tracker.core.errors import TrackerError, first_line
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import Finding, RepoRow, RevisionRow, Severity, sort_findings
from tracker.core.verify import Verification
from tracker.core.writes import AdvisoryWrite, advisory_write
from tracker.pipeline.ports import Clock, Store

log = logging.getLogger(__name__)

Run = Callable[[str, str, str], Verification]  # (repo, old sha, new sha) -> the verification


class RevisionVerifier:
    """Verifies saved revisions and attaches the measurement; never raises for a failed verification."""

    def __init__(self, store: Store, *, min_severity: Severity, rules: SeverityRules, clock: Clock, run: Run) -> None:
        self.store = store
        self.min_severity = min_severity  # [verify] min_severity
        self.rules = rules
        self.clock = clock
        self.run = run  # the limited subprocess (tracker/adapters/verify), handed in by the composition root

    def wanted(self, findings: Sequence[Finding], base_sha: str | None) -> bool:
        """A revision compared with an earlier one, whose worst finding reaches ``[verify] min_severity``."""
        worst = Severity.worst(f.severity for f in findings)
        return base_sha is not None and worst is not None and worst.at_least(self.min_severity)

    def after_save(self, repo: RepoRow, revision: RevisionRow, base_sha: str) -> Verification | None:
        """Verify the saved revision against ``base_sha`` and attach the result; None when it could not run."""
        try:
            result = self.run(repo.repo_id, base_sha, revision.sha)
        except TrackerError as exc:
            log.warning("verify.failed repo=%s sha=%s error=%s", repo.repo_id, revision.sha[:12], first_line(exc))
            return None
        if not result.measurement.verifiable:
            # Nothing measured: the advisory is left as it is (a change would announce it to every subscriber).
            log.info("verify.skipped repo=%s sha=%s reason=%r", repo.repo_id, revision.sha[:12],
                     result.measurement.reason)
            return result
        log.info("verify.done repo=%s sha=%s verdict=%r", repo.repo_id, revision.sha[:12],
                 result.measurement.verdict)
        try:
            self.attach(repo, revision, result.measurement)
        except TrackerError as exc:  # an advisory changed meanwhile, the database is away: the next poll goes on
            log.warning("verify.unattached repo=%s sha=%s error=%s", repo.repo_id, revision.sha[:12], first_line(exc))
        return result

    def attach(self, repo: RepoRow, revision: RevisionRow, measurement: verify.Measurement) -> None:
        stored = self.store.revisions.get(repo.pk, revision.sha)
        if stored is None or stored.findings is None:
            return
        findings = [f for f in stored.findings if f.code != "verify.disagrees"]
        disagrees = verify.disagreement(measurement, (f.code for f in findings))
        finding = None
        if disagrees is not None:
            finding = self.rules.finding("verify.disagrees", "verify", disagrees,
                                         evidence={"measured": measurement.verdict})
            findings = sort_findings([*findings, finding])
        now = self.clock()
        measured = measurement.to_json()
        writes: list[AdvisoryWrite] = []
        seen: dict[str, datetime | None] = {}
        for row in self.store.advisories.of_revision(repo.pk, revision.sha):
            if row.withdrawn or row.revision_sha != revision.sha:
                continue
            record = verify.annotate(row.record, measured, now=now, disagrees=disagrees,
                                     finding=finding.to_json() if finding else None)
            written = advisory_write(record, revision_sha=row.revision_sha, kind=row.kind, fixed_sha=row.fixed_sha)
            writes.append(replace(written, severity=row.severity))
            seen[row.id] = row.modified
        self.store.revisions.save_reanalysis(
            stored.pk, repo.pk, findings=findings, estimate=stored.estimate, now=now, dependencies_pending=None,
            advisories=writes, seen=seen)
