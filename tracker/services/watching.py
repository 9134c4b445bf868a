"""Watching: the repos on the watch list and the rules that add repos to it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tracker.core.errors import NotFound, TrackerError
from tracker.core.model import RepoId, RepoRow
from tracker.core.watchrules import DEFAULT_MAX, RuleRow, parse_rule
from tracker.services.hubcheck import existence, missing_message
from tracker.services.revisions import checked_revision

if TYPE_CHECKING:
    from datetime import datetime

    from tracker.app import Tracker
    from tracker.pipeline.lineage import Chain

__all__ = ["ListedInConfig", "RuleAdded", "RuleWithRepos", "Watched", "Watching"]


class ListedInConfig(TrackerError):
    """A repo asked to be unwatched that the config file lists: every command would watch it again."""


@dataclass(frozen=True)
class Watched:
    """A repo on the watch list, and whether this call added it (else it updated its branch and interval)."""

    repo: RepoRow
    created: bool


@dataclass(frozen=True)
class RuleAdded:
    """A watch rule stored, and whether it is new (else the same terms' cap was updated)."""

    rule: RuleRow
    created: bool


@dataclass(frozen=True)
class RuleWithRepos:
    """A watch rule and the repos it watches (each with since when the rule no longer matches it)."""

    rule: RuleRow
    repos: list[tuple[RepoId, datetime | None]]


@dataclass(frozen=True)
class Watching:
    """The watch list: repos added by hand or by rule, checked against the Hub when asked."""

    tracker: Tracker

    def require_on_hub(self, repo_id: RepoId) -> str | None:
        """NotFound (with the close matches) when the Hub says it has no ``repo_id``.

        Returns why the Hub could not be asked (the caller warns and goes on: a watch may precede
        the repo, or the Hub may be away), None when it has the repo.
        """
        hub = self.tracker.hub
        there = existence(hub, repo_id)
        if there.missing:
            raise NotFound(missing_message(repo_id, hub.endpoint, there.close))
        return None if there.found else there.reason

    def add(self, repo_id: RepoId, *, branch: str | None = None, every: float | None = None,
            check: bool = False) -> Watched:
        """Watch ``repo_id`` (a validated id; on ``main`` unless ``branch``); watching it again updates the branch
        and interval given, and never one not given. ConfigError for a branch that cannot be one; with ``check``,
        NotFound (with the close matches) when the Hub says it has no ``repo_id`` (:meth:`require_on_hub`)."""
        if branch is not None:
            branch = checked_revision(branch, "branch")
        if check:
            self.require_on_hub(repo_id)
        row, created = self.tracker.store.repos.add(repo_id, branch=branch, every=every, now=self.tracker.clock())
        return Watched(repo=row, created=created)

    def add_bases(self, repo_id: RepoId, *, branch: str = "main", every: float | None = None) -> Chain:
        """Watch the bases above ``repo_id`` (its card's ``base_model``, tracker/pipeline/lineage.py)."""
        from tracker.pipeline.lineage import watch_base_chain

        tracker = self.tracker
        return watch_base_chain(tracker.store, tracker.hub, repo_id, branch=branch, every=every, now=tracker.clock())

    def remove(self, repo_id: RepoId) -> None:
        """Stop watching ``repo_id``: its stored revisions go with it. Raises NotFound when it is not watched,
        ListedInConfig when the config file lists it (removed, it would be back at the next command)."""
        settings = self.tracker.settings
        if any(spec.repo == repo_id for spec in settings.watch):
            raise ListedInConfig(
                f"{repo_id} is listed in {settings.config_path} ([[watch]] repo = \"{repo_id}\"), which every command "
                f"watches again: delete that entry, then run `tracker watch remove {repo_id}`")
        if not self.tracker.store.repos.remove(repo_id):
            raise NotFound(f"not watched: {repo_id}")

    def get(self, repo_id: RepoId) -> RepoRow | None:
        """The watched repo, None when it is not watched."""
        return self.tracker.store.repos.get(repo_id)

    def repos(self, *, with_config: bool = False) -> list[RepoRow]:
        """The watched repos, by id; ``with_config`` first adds those the config file lists."""
        if with_config:
            self.tracker.sync_config_watches()
        return self.tracker.store.repos.all()

    def rules(self) -> list[RuleRow]:
        return self.tracker.store.rules.all()

    def rules_with_repos(self) -> list[RuleWithRepos]:
        rules = self.tracker.store.rules
        return [RuleWithRepos(rule=r, repos=rules.repos_of(r.id)) for r in rules.all()]

    def add_rule(self, text: str, *, max_repos: int | None = None) -> RuleAdded:
        """Store a watch rule (ConfigError when ``text`` is not one); the next poll cycle watches its matches."""
        rule = parse_rule(text)
        row, created = self.tracker.store.rules.add(rule, max_repos=max_repos or DEFAULT_MAX, now=self.tracker.clock())
        return RuleAdded(rule=row, created=created)

    def remove_rule(self, rule_id: int) -> list[RepoId]:
        """Remove a watch rule and the repos it watches (returned). Raises NotFound when there is no such rule."""
        removed = self.tracker.store.rules.remove(rule_id)
        if removed is None:
            raise NotFound(f"no watch rule {rule_id}")
        return removed


