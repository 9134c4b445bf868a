"""A long revision history written straight into a store (no Hub): for query-count tests and bench_pages.

Each revision carries what a real one does: a chat-template finding with a rendered-prompt diff,
a config key change, files changed; every fifth one an estimate (the real e5 estimate, with the
context growing), every tenth an advisory.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tracker.adapters.store import SqlStore
from tracker.core.estimate import estimate
from tracker.core.model import (
    Commit,
    CommitSha,
    FileEntry,
    Finding,
    RawDiff,
    RepoId,
    Severity,
    Snapshot,
    StoredEstimate,
)
from tracker.core.report import AdvisoryWrite, RevisionReport

E5_CONFIG = Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "intfloat__multilingual-e5-large.json"
START = datetime(2026, 1, 1, tzinfo=UTC)


def sha_of(repo_id: str, i: int) -> str:
    return hashlib.sha1(f"{repo_id}:{i}".encode()).hexdigest()


def findings_for(i: int) -> tuple[Finding, ...]:
    diff = (f"--- old: user\n+++ new: user\n@@ -1,2 +1,2 @@\n-query: Hello {i}\\n\n+query: Hello {i}</s>\\n\n"
            " passage: Hi\\n")
    return (
        Finding("chat_template.rendered_prompt_changed", "chat_template", Severity.HIGH,
                f"rendered prompt changed for 1 of 8 conversations; revision {i}", path="tokenizer_config.json",
                evidence={"template": "default", "first": "user", "rendered_diff": diff,
                          "branches": {"user": {"title": "one user turn", "change": "adds '</s>' at the end",
                                                "rendered_diff": diff}}}),
        Finding("config.value_changed", "config", Severity.MODERATE, f"layer_norm_eps: {i} → {i + 1}",
                path="config.json", before=i, after=i + 1, evidence={"key": "layer_norm_eps"}),
        Finding("files.changed", "files", Severity.INFO, "changed config.json", path="config.json"),
    )


def build(store: SqlStore, repo_id: str, revisions: int, *, now: datetime = START) -> list[str]:
    """Watch ``repo_id`` and store ``revisions`` analysed revisions; their shas, oldest first."""
    repo, _ = store.repos.add(RepoId(repo_id), now=now)
    config = json.loads(E5_CONFIG.read_text())
    shas = [sha_of(repo_id, i) for i in range(revisions)]
    commits = [Commit(sha=CommitSha(s), date=now + timedelta(hours=i), title=f"Update {i}",
                      parents=(CommitSha(shas[i - 1]),) if i else ()) for i, s in enumerate(shas)]
    store.revisions.record_listing(repo, commits, parent=None, baseline=True, now=now)
    snapshot = Snapshot(files=(FileEntry("config.json", 700, "a" * 40), FileEntry("tokenizer_config.json", 1300, "b" * 40)))
    diff = RawDiff(files={"added": [], "removed": [], "changed": [{"path": "config.json"}]}, texts={})
    for row in store.revisions.pending(repo.pk):
        i = row.seq
        est = None
        if i % 5 == 0:
            est = estimate({**config, "max_position_embeddings": 514 + 64 * i}).to_json()
            est["delta"] = {}
        findings = findings_for(i)
        writes: tuple[AdvisoryWrite, ...] = ()
        if i % 10 == 0:
            vid = "x_HFUT-" + "-".join(hashlib.sha1(row.sha.encode()).hexdigest()[k:k + 4].translate(
                str.maketrans("0189", "abcd")) for k in (0, 4, 8))
            stamp = (now + timedelta(hours=i)).isoformat().replace("+00:00", "Z")
            record = {"id": vid, "modified": stamp, "published": stamp, "summary": f"change {i}",
                      "details": f"Revision {i} changed the **chat template**.",
                      "affected": [{"package": {"ecosystem": "Hugging Face", "name": repo_id},
                                    "ranges": [{"type": "GIT", "events": [{"introduced": "0"}, {"fixed": row.sha}]}],
                                    "versions": shas[:i]}],
                      "database_specific": {"repo_id": repo_id, "revision": row.sha, "severity": "HIGH",
                                            "findings": [f.to_json() for f in findings]}}
            writes = (AdvisoryWrite(record=record, revision_sha=row.sha, kind="update", severity="high",
                                    fixed_sha=None),)
        store.revisions.save_report(RevisionReport(
            repo_pk=repo.pk, revision_pk=row.pk, sha=row.sha, snapshot=snapshot, diff=None if i == 0 else diff,
            findings=findings, summary=findings[0].summary, estimate=StoredEstimate.from_json(est) if est else None,
            dependencies_pending=False,
            analysed_at=now + timedelta(hours=i), advisories=writes))
    return shas
