"""Watch rules: a family of models (an org, a library above a download count...) watched as one.

A rule is a few ``key=value`` terms, all of which must hold::

    author=intfloat
    library=sentence-transformers downloads>=10000
    pipeline_tag=text-generation author=meta-llama

Each is evaluated with the Hub's own listing filters (``GET /api/models?author=…&filter=…&
pipeline_tag=…``; ``downloads>=N`` sorts by downloads and stops at the first model below N), at
most once per poll interval and only while the Hub budget has room. The models it matches are
watched and marked as the rule's (``repos.rule_id``); a repo the rule stops matching is kept for
the rule's grace (a day), then dropped, so a model that dips below a threshold for an hour is not
lost and found again. A rule never holds more than its cap (``--max``, 1,000): past it the first
models in the listing's order are kept and a WARNING says the cap was reached.

:func:`parse_rule` is pure; :class:`RuleKeeper` reads the Hub and writes the watch list.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, insert, select, update

from tracker.adapters.store import SqlStore
from tracker.adapters.store.tables import repos, watch_rules
from tracker.core.errors import ConfigError, TrackerError, first_line
from tracker.core.model import RepoId
from tracker.core.watchrules import DEFAULT_GRACE, DEFAULT_MAX, MAX_CAP, RuleRow, WatchRule, parse_rule
from tracker.pipeline.ports import HubReader

log = logging.getLogger("tracker.watchrules")  # the name operators filter logs by, not the module path


@dataclass(frozen=True)
class Evaluation:
    rule_id: int
    matched: int
    added: tuple[RepoId, ...]
    dropped: tuple[RepoId, ...]
    capped: bool
    pages: int


class RuleStore:
    """The ``watch_rules`` rows and the repos each one added, over a SqlStore's engine."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store

    def add(self, rule: WatchRule, *, max_repos: int, now: datetime, grace: float = DEFAULT_GRACE) -> tuple[RuleRow, bool]:
        """Store a rule (the same rule again updates its cap); returns (row, created)."""
        if not 1 <= max_repos <= MAX_CAP:
            raise ConfigError(f"--max must be between 1 and {MAX_CAP:,}")
        with self.store.db.transaction() as conn:
            row = conn.execute(select(watch_rules).where(watch_rules.c.text == rule.text)).first()
            if row is None:
                conn.execute(insert(watch_rules).values(text=rule.text, filters=rule.to_json(), max_repos=max_repos,
                                                        grace_seconds=grace, created_at=now, capped=False))
                created = True
            else:
                conn.execute(update(watch_rules).where(watch_rules.c.id == row.id).values(max_repos=max_repos))
                created = False
            row = conn.execute(select(watch_rules).where(watch_rules.c.text == rule.text)).one()
        return self._row(row), created

    def all(self) -> list[RuleRow]:
        with self.store.db.transaction() as conn:
            return [self._row(r) for r in conn.execute(select(watch_rules).order_by(watch_rules.c.id))]

    def get(self, rule_id: int) -> RuleRow | None:
        with self.store.db.transaction() as conn:
            row = conn.execute(select(watch_rules).where(watch_rules.c.id == rule_id)).first()
        return self._row(row) if row else None

    def repos_of(self, rule_id: int) -> list[tuple[RepoId, datetime | None]]:
        """(repo id, since when the rule no longer matches it) of every repo the rule added."""
        with self.store.db.transaction() as conn:
            return [(RepoId(r.repo_id), r.rule_missing_since) for r in conn.execute(
                select(repos.c.repo_id, repos.c.rule_missing_since).where(repos.c.rule_id == rule_id)
                .order_by(repos.c.repo_id))]

    def remove(self, rule_id: int) -> list[RepoId] | None:
        """Delete a rule and unwatch the repos it added; their ids, or None when there is no such rule."""
        with self.store.db.transaction() as conn:
            if conn.execute(select(watch_rules.c.id).where(watch_rules.c.id == rule_id)).first() is None:
                return None
            ids = [RepoId(r) for r in conn.execute(select(repos.c.repo_id).where(repos.c.rule_id == rule_id)
                                                   .order_by(repos.c.repo_id)).scalars()]
            conn.execute(delete(repos).where(repos.c.rule_id == rule_id))
            conn.execute(delete(watch_rules).where(watch_rules.c.id == rule_id))
        return ids

    @staticmethod
    def _row(row: Any) -> RuleRow:
        return RuleRow(id=row.id, rule=WatchRule.from_json(dict(row.filters)), max_repos=row.max_repos,
                       grace_seconds=row.grace_seconds, created_at=row.created_at,
                       evaluated_at=row.evaluated_at, matched=row.matched, capped=bool(row.capped),
                       last_error=row.last_error)


class RuleKeeper:
    """Evaluates the rules that are due and brings the watch list in line with what they match."""

    def __init__(self, store: SqlStore, hub: HubReader, *, every: float) -> None:
        self.store = store
        self.rules = RuleStore(store)
        self.hub = hub
        self.every = every

    def due(self, now: datetime) -> list[RuleRow]:
        return [r for r in self.rules.all()
                if r.evaluated_at is None or r.evaluated_at <= now - timedelta(seconds=self.every)]

    @staticmethod
    def pages_needed(rule: RuleRow, page_size: int = 1000) -> int:
        """The most listing pages an evaluation may take: enough for one model past the cap."""
        return max(1, math.ceil((rule.max_repos + 1) / page_size))

    def evaluate(self, rule: RuleRow, now: datetime) -> Evaluation | None:
        """List what the rule matches and watch, keep or drop its repos; None when the listing failed."""
        try:
            listing = self.hub.models_matching(rule.rule.query(), downloads_min=rule.rule.downloads_min,
                                               max_items=rule.max_repos + 1)
        except TrackerError as exc:
            log.warning("watch rule %d (%s): listing its models failed: %s", rule.id, rule.text, first_line(exc))
            with self.store.db.transaction() as conn:
                conn.execute(update(watch_rules).where(watch_rules.c.id == rule.id).values(
                    last_error=first_line(exc)))
            return None
        matched = list(dict.fromkeys(listing.repo_ids))
        capped = len(matched) > rule.max_repos
        keep = matched[:rule.max_repos]
        keep_lower = {r.lower() for r in matched}
        added: list[RepoId] = []
        dropped: list[RepoId] = []
        with self.store.db.transaction() as conn:
            watched = {r.repo_id.lower(): r for r in conn.execute(
                select(repos.c.id, repos.c.repo_id, repos.c.rule_id, repos.c.rule_missing_since))}
            mine = [r for r in watched.values() if r.rule_id == rule.id]
            room = rule.max_repos - len(mine)
            for repo_id in keep:
                if repo_id.lower() in watched or room <= 0:
                    continue
                conn.execute(insert(repos).values(repo_id=repo_id, branch="main", state="active", created_at=now,
                                                  rule_id=rule.id))
                added.append(repo_id)
                room -= 1
            grace = timedelta(seconds=rule.grace_seconds)
            for r in mine:
                if r.repo_id.lower() in keep_lower:
                    if r.rule_missing_since is not None:
                        conn.execute(update(repos).where(repos.c.id == r.id).values(rule_missing_since=None))
                    continue
                since = r.rule_missing_since
                if since is not None and since.tzinfo is None:
                    since = since.replace(tzinfo=now.tzinfo)
                if since is None:
                    conn.execute(update(repos).where(repos.c.id == r.id).values(rule_missing_since=now))
                elif now - since >= grace:
                    conn.execute(delete(repos).where(repos.c.id == r.id))
                    dropped.append(RepoId(r.repo_id))
            conn.execute(update(watch_rules).where(watch_rules.c.id == rule.id).values(
                evaluated_at=now, matched=len(matched), capped=capped, last_error=None))
        if capped and not rule.capped:
            log.warning("watch rule %d (%s) matches more than its cap of %d repos: watching the first %d "
                        "(raise it with `tracker watch add --rule '%s' --max N`)", rule.id, rule.text,
                        rule.max_repos, rule.max_repos, rule.text)
        if added or dropped:
            log.info("watch rule %d (%s): %d repo(s) added, %d dropped after the grace", rule.id, rule.text,
                     len(added), len(dropped))
        return Evaluation(rule_id=rule.id, matched=len(matched), added=tuple(added), dropped=tuple(dropped),
                          capped=capped, pages=listing.pages)


__all__ = ["DEFAULT_GRACE", "DEFAULT_MAX", "Evaluation", "RuleKeeper", "RuleRow", "RuleStore", "WatchRule",
           "parse_rule"]
