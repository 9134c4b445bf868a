"""Analysing two revisions pushed to the Hub stand-in, through the real HubClient and HubSources."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

from tracker.adapters.hub import HubClient
from tracker.adapters.store import open_store
from tracker.adapters.template_sandbox import LeasedSandbox
from tracker.core.model import CommitSha, Finding, RepoId, RevisionChange
from tracker.pipeline.analysis import analyse_change
from tracker.pipeline.sources import HubSources


@cache
def _migrated() -> Path:
    """An empty SQLite store, migrated once per process (removed when the process exits)."""
    folder = Path(tempfile.mkdtemp(prefix="meaning-store-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = folder / "tracker.sqlite3"
    open_store(f"sqlite:///{path}").close()
    return path


def fresh_store_url(folder: Path) -> str:
    """A new, empty store of its own in ``folder``: a copy of the migrated one (migrating costs ten times more)."""
    path = folder / "tracker.sqlite3"
    shutil.copyfile(_migrated(), path)
    return f"sqlite:///{path}"


def analyse_on_hub(hub_standin, tmp_path: Path, repo: str, old_sha: str | None, new_sha: str) -> list[Finding]:
    """The findings of ``old_sha -> new_sha`` exactly as a poll computes them (range reads, capped reads)."""
    client = HubClient(hub_standin.url, timeout=60.0, max_retries=0, max_wait=0.0)  # generous: a busy machine
    store = open_store(fresh_store_url(tmp_path))
    rid = RepoId(repo)
    new_snapshot = client.snapshot(rid, new_sha)
    old_snapshot = client.snapshot(rid, old_sha) if old_sha else None
    sources = HubSources(
        client, store.blobs, rid,
        {"old": (old_sha, old_snapshot) if old_sha and old_snapshot else None, "new": (new_sha, new_snapshot)},
        max_file_bytes=16 * 1024 * 1024, max_header_bytes=32 * 1024 * 1024, now=lambda: datetime.now(UTC),
    )
    change = RevisionChange(repo=rid, old=old_snapshot, new=new_snapshot,
                            old_sha=CommitSha(old_sha) if old_sha else None, new_sha=CommitSha(new_sha))
    findings = analyse_change(change, sources, renderers=LeasedSandbox, budget=sources.budget).findings
    assert sources.problems == [], sources.problems
    return findings


def analyse_scenarios(root: Path, owner: str, scenarios: dict[str, tuple[dict, dict]]) -> dict[str, list[Finding]]:
    """Each ``name: (before, after)`` pushed as a two-revision repo ``owner/name`` on one stand-in; the findings."""
    from hubstandin import HubStandin

    hub = HubStandin(root / "hub").start()
    try:
        out = {}
        for name, (before, after) in scenarios.items():
            repo = f"{owner}/{name.replace('_', '-')}"
            hub.create_repo(repo)
            old = hub.commit(repo, before, message="upload")
            new = hub.commit(repo, after, message=name)
            (root / name).mkdir()
            out[name] = analyse_on_hub(hub, root / name, repo, old, new)
        return out
    finally:
        hub.stop(wait=False)
