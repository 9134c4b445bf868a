"""Revisions and diffs: what was read of a repo (or, for one not watched, its newest commits on the Hub), what
changed between two revisions of any repo, the inputs of an estimate, the repo events, and re-analysis."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tracker.core.errors import ConfigError, NotFound, RepoGone
from tracker.core.model import Commit, EventRow, RepoId, RepoRow, RevisionRow
from tracker.services.hubcheck import naming

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from tracker.app import Tracker
    from tracker.pipeline.analysis import Analysis, Side

__all__ = ["Compared", "Reanalysed", "RevisionListing", "Revisions", "checked_revision", "is_revision_name"]


def is_revision_name(value: str) -> bool:
    """Whether ``value`` can name a commit, branch or tag: not empty, at most 255 characters, no space or
    control character."""
    return bool(value) and len(value) <= 255 and not any(ord(ch) < 0x21 or ord(ch) == 0x7F for ch in value)


def checked_revision(value: str, what: str) -> str:
    """A commit id, branch or tag as typed, checked: ConfigError (naming ``what``) unless it
    :func:`is_revision_name`."""
    if not is_revision_name(value):
        raise ConfigError(f"invalid {what}: a commit id, branch or tag without spaces or control characters")
    return value


@dataclass(frozen=True)
class RevisionListing:
    """A repo's revisions: those read (oldest first) when it is watched; else its newest commits on the Hub,
    nothing analysed or stored (``commits``)."""

    repo_id: RepoId
    repo: RepoRow | None  # None: not watched
    revisions: list[RevisionRow] = field(default_factory=list)
    commits: tuple[Commit, ...] = ()

    @property
    def watched(self) -> bool:
        return self.repo is not None


@dataclass(frozen=True)
class Compared:
    """Two revisions of a repo compared: their shas and what the analysis found."""

    repo_id: RepoId
    old_sha: str
    new_sha: str
    analysis: Analysis


@dataclass(frozen=True)
class Reanalysed:
    """What re-analysing one repo changed: its revisions whose findings differ now, and what followed."""

    repo: RepoId
    revisions: int  # revisions read again
    changed: int  # of them, those whose findings changed
    advisories_new: int = 0
    advisories_updated: int = 0
    advisories_withdrawn: int = 0
    alerts: int = 0  # deliveries queued for the advisories it changed

    def line(self) -> str:
        return (f"{self.repo}: {self.revisions} revision(s) re-analysed, {self.changed} changed; advisories: "
                f"{self.advisories_new} new, {self.advisories_updated} updated, {self.advisories_withdrawn} withdrawn; "
                f"{self.alerts} alert(s) queued")


@dataclass(frozen=True)
class Revisions:
    """Reading revisions of any repo: from the store when it is watched and read, else from the Hub."""

    tracker: Tracker

    def listing(self, repo_id: RepoId, *, branch: str = "main", limit: int = 100) -> RevisionListing:
        """The revisions read of a watched repo; of one not watched, its newest ``limit`` commits on ``branch``.

        Raises NotFound when the repo is neither watched nor on the Hub.
        """
        store = self.tracker.store
        repo = store.repos.get(repo_id)
        if repo is not None:
            return RevisionListing(repo_id=repo.repo_id, repo=repo, revisions=store.revisions.of_repo(repo.pk))
        try:
            commits = self.tracker.hub.commits_since(repo_id, branch, None, limit=limit).commits
        except RepoGone as exc:
            raise NotFound(f"{repo_id} is not watched, and not found on the Hub (check the id; private and gated "
                           "repos need HF_TOKEN)") from exc
        return RevisionListing(repo_id=repo_id, repo=None, commits=tuple(commits))

    def side(self, repo_id: RepoId, revision: str, *, argument: str | None = None) -> Side:
        """A revision's sha and file list (stored when read, else from the Hub). With ``argument``, the Hub's
        refusals are said as that argument's (ArgumentError: which of the repo or the revision is missing)."""
        said: AbstractContextManager[None] = (naming(self.tracker.hub, repo_id, argument, revision)
                                              if argument else nullcontext())
        with said:
            return self.tracker.snapshot_of(repo_id, revision)

    def compare(self, repo_id: RepoId, old: str, new: str, *,
                arguments: tuple[str, str] | None = None) -> Compared:
        """What changed between revisions ``old`` and ``new`` of any repo; ``arguments`` names them in errors."""
        old_side = self.side(repo_id, old, argument=arguments[0] if arguments else None)
        new_side = self.side(repo_id, new, argument=arguments[1] if arguments else None)
        store = self.tracker.store
        repo = store.repos.get(repo_id)
        stored_old = store.revisions.get(repo.pk, old_side[0]) if repo is not None else None
        analysis = self.tracker.analyse(repo_id, old_side, new_side,
                                        old_estimate=stored_old.estimate if stored_old else None)
        return Compared(repo_id=repo_id, old_sha=old_side[0], new_sha=new_side[0], analysis=analysis)

    def estimate_inputs(self, repo_id: RepoId, revision: str, *,
                        argument: str | None = None) -> tuple[Any, dict[str, Any]]:
        """The config.json (as parsed, any JSON) and the safetensors headers of a revision of any repo."""
        return self.tracker.config_and_headers(repo_id, self.side(repo_id, revision, argument=argument))

    def stored(self, repo: RepoRow, sha: str) -> RevisionRow | None:
        """A revision read of the watched ``repo``, by sha or prefix (RevisionUnresolved: an ambiguous prefix)."""
        return self.tracker.store.revisions.get(repo.pk, sha)

    def events(self, repo_id: RepoId | None = None) -> list[EventRow]:
        """The upstream surprises of one watched repo (NotWatched otherwise), or of all."""
        repo_pk = self.tracker.repo(repo_id).pk if repo_id else None
        return self.tracker.store.events.all(repo_pk)

    def reanalyse(self, repo_ids: Sequence[RepoId] = ()) -> Iterator[Reanalysed]:
        """Re-run the analysis of each repo's stored revisions (every watched repo when none is named).

        Yields what each repo's re-analysis changed as it is done, so a long run reports as it goes;
        a repo that is not watched raises NotWatched when its turn comes.
        """
        tracker = self.tracker
        store = tracker.store
        ids = list(repo_ids) or [r.repo_id for r in store.repos.all()]
        for repo_id in ids:
            repo = tracker.repo(repo_id)
            before = self._advisory_states(repo.pk)
            queued = sum(1 for d in store.outbox.list_deliveries() if d.repo_id == repo_id)
            read = len([r for r in store.revisions.of_repo(repo.pk, status="done") if r.snapshot is not None])
            changed = tracker.reanalyse(repo_id)
            after = self._advisory_states(repo.pk)
            yield Reanalysed(
                repo=repo_id, revisions=read, changed=changed,
                advisories_new=sum(1 for i in after if i not in before),
                advisories_updated=sum(1 for i, state in after.items() if i in before and state != before[i]
                                       and not state[1]),
                advisories_withdrawn=sum(1 for i, state in after.items() if state[1] and not before.get(i, state)[1]),
                alerts=sum(1 for d in store.outbox.list_deliveries() if d.repo_id == repo_id) - queued)

    def _advisory_states(self, repo_pk: int) -> dict[str, tuple[object, bool]]:
        """Each advisory of a repo: (when last modified, withdrawn)."""
        return {a.id: (a.modified, a.withdrawn)
                for a in self.tracker.store.advisories.find(repo_pk=repo_pk, versions=False)}
