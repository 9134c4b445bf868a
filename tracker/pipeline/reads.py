"""What a computation reads of the advisories, recorded as it reads, for its save to check.

A revision's report is computed from advisories read at different moments (the repo's own, its
inherited ones, its base's updates, its derivatives' inherited ones). The save checks, in its
transaction, that all of it still holds (:class:`tracker.core.store_types.AdvisoriesRead`);
when another process changed any of it, the report is computed again, whether or not it writes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from tracker.core.model import AdvisoryRow
from tracker.core.store_types import AdvisoriesRead


class AdvisoryReads:
    """The advisories one computation read: each one, and each (repo, kind) it read whole."""

    def __init__(self) -> None:
        self._each: dict[str, datetime | None] = {}
        self._kinds: dict[tuple[int, str], dict[str, datetime]] = {}

    def rows(self, rows: Iterable[AdvisoryRow]) -> None:
        """Advisories read one by one (their ``modified`` as read)."""
        for row in rows:
            self._each.setdefault(row.id, row.modified)

    def kind(self, repo_pk: int, kind: str, versions: Mapping[str, datetime]) -> frozenset[str]:
        """Every advisory of ``kind`` of a repo, as read (id -> modified); their ids. The first read of
        a kind is the one kept: a later one that differs is a change the save's check finds."""
        self._kinds.setdefault((repo_pk, kind), dict(versions))
        return frozenset(versions)

    def seen(self) -> AdvisoriesRead:
        return AdvisoriesRead(each=dict(self._each), kinds={k: dict(v) for k, v in self._kinds.items()})


__all__ = ["AdvisoryReads"]
