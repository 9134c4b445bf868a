"""Known vulnerabilities of the packages a revision pins, from an OSV API stand-in with real records."""

from __future__ import annotations

from tests.core.conftest import config_json
from tracker.core.advisory import advisory_id, validate
from tracker.core.advisory.record import to_osv
from tracker.core.model import RepoId

REPO = RepoId("acme/remote-code-model")


def test_pinned_vulnerable_packages_become_findings_and_related_ids(hub_standin, osv_standin, settings, make):
    hub_standin.create_repo(REPO)
    hub_standin.commit(REPO, {"config.json": config_json()})
    tracker = make(settings, osv={"api_url": osv_standin.url})
    tracker.store.repos.add(REPO, now=tracker.clock())
    tracker.poll()
    sha = hub_standin.commit(REPO, {"requirements.txt": b"transformers==4.36.0\ntorch==2.7.1\neinops\n"})
    tracker.poll()
    row = tracker.store.revisions.get(tracker.store.repos.get(REPO).pk, sha)
    assert row.dependencies_pending is False
    vulnerable = {f.after["name"] if isinstance(f.after, dict) else f.after: f
                  for f in row.findings if f.code == "dependencies.known_vulnerability"}
    assert len(vulnerable) == 2
    ids = sorted({i for f in vulnerable.values() for i in f.evidence["ids"]})
    assert len(ids) == 27 + 15  # transformers 4.36.0 and torch 2.7.1 in the real records
    unpinned = [f for f in row.findings if f.code == "dependencies.unpinned_requirement"]
    assert [f.after["name"] for f in unpinned] == ["einops"]
    (risk,) = [a for a in tracker.store.advisories.find() if a.id == advisory_id(REPO, sha, "risk")]
    validate(to_osv(risk.record))
    assert to_osv(risk.record)["related"] == ids


def test_a_failed_lookup_is_retried_on_a_later_poll(hub_standin, osv_standin, settings, make):
    hub_standin.create_repo(REPO)
    hub_standin.commit(REPO, {"config.json": config_json()})
    tracker = make(settings, osv={"api_url": osv_standin.url})
    tracker.osv.backoff = tracker.osv.backoff_max = 0  # no real waiting between retries in tests
    tracker.store.repos.add(REPO, now=tracker.clock())
    tracker.poll()
    sha = hub_standin.commit(REPO, {"requirements.txt": b"transformers==4.36.0\n"})
    osv_standin.fail_next(50, 503)
    (result,) = tracker.poll()
    assert result.status == "new"  # never fatal
    pk = tracker.store.repos.get(REPO).pk
    row = tracker.store.revisions.get(pk, sha)
    assert row.dependencies_pending is True
    assert [f for f in row.findings if f.code == "dependencies.known_vulnerability"] == []
    osv_standin.reset()
    (result,) = tracker.poll()
    assert result.status == "unchanged"
    row = tracker.store.revisions.get(pk, sha)
    assert row.dependencies_pending is False
    (finding,) = [f for f in row.findings if f.code == "dependencies.known_vulnerability"]
    assert len(finding.evidence["ids"]) == 27
    assert advisory_id(REPO, sha, "risk") in {a.id for a in tracker.store.advisories.find()}
