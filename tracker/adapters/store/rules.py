"""Watch rules: the ``watch_rules`` rows and the repos each one added (``repos.rule_id``).

What a rule means is :mod:`tracker.core.watchrules`; evaluating it against the Hub is
:mod:`tracker.pipeline.watchrules`, which hands what the listing matched to :meth:`RuleStore.apply`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, insert, select, update

from tracker.adapters.store.db import Database
from tracker.adapters.store.tables import repos, watch_rules
from tracker.core.errors import ConfigError
from tracker.core.model import RepoId
from tracker.core.store_types import Applied
from tracker.core.watchrules import DEFAULT_GRACE, MAX_CAP, RuleRow, WatchRule


class RuleStore:
    """The stored rules and the repos they watch, each method one transaction."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def add(self, rule: WatchRule, *, max_repos: int, now: datetime, grace: float = DEFAULT_GRACE) -> tuple[RuleRow, bool]:
        """Store a rule (the same rule again updates its cap); returns (row, created)."""
        if not 1 <= max_repos <= MAX_CAP:
            raise ConfigError(f"--max must be between 1 and {MAX_CAP:,}")
        with self.db.transaction() as conn:
            row = conn.execute(select(watch_rules).where(watch_rules.c.text == rule.text)).first()
            if row is None:
                conn.execute(insert(watch_rules).values(text=rule.text, filters=rule.to_json(), max_repos=max_repos,
                                                        grace_seconds=grace, created_at=now, capped=False))
                created = True
            else:
                conn.execute(update(watch_rules).where(watch_rules.c.id == row.id).values(max_repos=max_repos))
                created = False
            row = conn.execute(select(watch_rules).where(watch_rules.c.text == rule.text)).one()
        return _row(row), created

    def all(self) -> list[RuleRow]:
        with self.db.transaction() as conn:
            return [_row(r) for r in conn.execute(select(watch_rules).order_by(watch_rules.c.id))]

    def get(self, rule_id: int) -> RuleRow | None:
        with self.db.transaction() as conn:
            row = conn.execute(select(watch_rules).where(watch_rules.c.id == rule_id)).first()
        return _row(row) if row else None

    def repos_of(self, rule_id: int) -> list[tuple[RepoId, datetime | None]]:
        """(repo id, since when the rule no longer matches it) of every repo the rule added."""
        with self.db.transaction() as conn:
            return [(RepoId(r.repo_id), r.rule_missing_since) for r in conn.execute(
                select(repos.c.repo_id, repos.c.rule_missing_since).where(repos.c.rule_id == rule_id)
                .order_by(repos.c.repo_id))]

    def remove(self, rule_id: int) -> list[RepoId] | None:
        """Delete a rule and unwatch the repos it added; their ids, or None when there is no such rule."""
        with self.db.transaction() as conn:
            if conn.execute(select(watch_rules.c.id).where(watch_rules.c.id == rule_id)).first() is None:
                return None
            ids = [RepoId(r) for r in conn.execute(select(repos.c.repo_id).where(repos.c.rule_id == rule_id)
                                                   .order_by(repos.c.repo_id)).scalars()]
            conn.execute(delete(repos).where(repos.c.rule_id == rule_id))
            conn.execute(delete(watch_rules).where(watch_rules.c.id == rule_id))
        return ids

    def record_error(self, rule_id: int, error: str) -> None:
        """An evaluation whose listing failed: the rule keeps its repos and says why."""
        with self.db.transaction() as conn:
            conn.execute(update(watch_rules).where(watch_rules.c.id == rule_id).values(last_error=error))

    def apply(self, rule: RuleRow, matched: Sequence[RepoId], *, now: datetime, complete: bool = True) -> Applied:
        """Bring the watch list in line with what the rule's listing ``matched`` (in its order), in one
        transaction: the first ``max_repos`` are watched (unless watched already), the rule's repos no
        longer matched are marked and dropped after the rule's grace, and the evaluation is stamped.

        ``complete=False``: the listing ended early (a page served twice), so a repo it did not list
        may still match: nothing is marked or dropped."""
        capped = len(matched) > rule.max_repos
        keep = matched[:rule.max_repos]
        keep_lower = {r.lower() for r in matched}
        added: list[RepoId] = []
        dropped: list[RepoId] = []
        with self.db.transaction() as conn:
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
                if not complete:
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
        return Applied(added=tuple(added), dropped=tuple(dropped))


def _row(row: Any) -> RuleRow:
    return RuleRow(id=row.id, rule=WatchRule.from_json(dict(row.filters)), max_repos=row.max_repos,
                   grace_seconds=row.grace_seconds, created_at=row.created_at,
                   evaluated_at=row.evaluated_at, matched=row.matched, capped=bool(row.capped),
                   last_error=row.last_error)


__all__ = ["Applied", "RuleStore"]
