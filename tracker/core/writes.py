"""Advisory writes, and the stored state they are computed against. Pure.

Both the revision report (tracker/core/report.py) and the model tree (tracker/core/inherit.py)
turn what the store holds about a repo (:class:`AdvisoryContext`) into advisories to insert or
update (:class:`AdvisoryWrite`); the store applies them in the revision's one transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property

from tracker.core.advisory.reach import ReachIndex
from tracker.core.advisory.record import Advisory, OsvJson, parse_advisory, to_osv
from tracker.core.advisory.validate import validate
from tracker.core.model import AdvisoryRow, RepoId, Severity, Snapshot

__all__ = ["AdvisoryContext", "AdvisoryWrite", "advisory_write"]


@dataclass(frozen=True)
class AdvisoryWrite:
    """One advisory to insert or update.

    The store indexes it from its GIT range; ``listed``: the commits a repo-event advisory names
    instead (renamed, deleted, gated, history rewritten), replacing those stored.
    """

    record: OsvJson  # the JSON the store keeps
    revision_sha: str | None
    kind: str
    severity: str
    fixed_sha: str | None
    listed: frozenset[str] | None = None
    repo_pk: int | None = None  # the repo it is about when not the report's (a derivative's inherited advisory)

    @property
    def id(self) -> str:
        return str(self.record["id"])

    @cached_property
    def advisory(self) -> Advisory:
        """The typed record."""
        return parse_advisory(self.record)


def advisory_write(advisory: Advisory, *, revision_sha: str | None, kind: str, fixed_sha: str | None,
                   listed: Iterable[str] | None = None) -> AdvisoryWrite:
    """The write of ``advisory``, checked against the OSV schema first (ValueError when it does not pass).

    About another repo than the report's (a derivative's inherited advisory)? ``dataclasses.replace``
    its ``repo_pk``.
    """
    record = to_osv(advisory)
    validate(record)
    return AdvisoryWrite(record=record, revision_sha=revision_sha, kind=kind,
                         severity=str(advisory.specific.severity).lower(), fixed_sha=fixed_sha,
                         listed=frozenset(listed) if listed is not None else None)


@dataclass(frozen=True)
class AdvisoryContext:
    """What the report needs to know about the repo as stored: its advisories, revisions and graph.

    Only what one revision is compared with is read: its own advisories, the open risks and
    inherited advisories, and the labels of their commits in the reachability index (``reach``).
    """

    repo_id: RepoId
    endpoint: str
    tracker_url: str | None
    min_severity: Severity
    advisories: Sequence[AdvisoryRow]  # the revision's own advisories, the open risks and inherited ones
    now: datetime
    reach: ReachIndex = field(default_factory=ReachIndex)  # chains, and the labels of those advisories' commits
    snapshots: Mapping[str, Snapshot] = field(default_factory=dict)  # done revisions' file lists, by sha
    diff_bases: Mapping[str, str | None] = field(default_factory=dict)  # revision sha -> the one it was diffed against
    commits: Sequence[str] = ()  # every commit of the graph: only for repo events (a re-created repo's id)
    inherited_ids: frozenset[str] = frozenset()  # the repo's inherited advisories, open or not

    def descends(self, ancestor: str | None, sha: str) -> bool:
        """Whether ``sha`` is ``ancestor`` or one of its descendants in the graph."""
        a, b = self.reach.labels.get(ancestor or ""), self.reach.labels.get(sha)
        return a is not None and b is not None and self.reach.is_ancestor(a, b)
