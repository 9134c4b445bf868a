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

:func:`parse_rule` (``tracker.core.watchrules``) is pure; :class:`RuleKeeper` reads the Hub and hands what
it matched to the store's ``rules`` (``tracker.adapters.store.rules``), which writes the watch list.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from tracker.core.errors import TrackerError, first_line
from tracker.core.model import RepoId
from tracker.core.watchrules import DEFAULT_GRACE, DEFAULT_MAX, RuleRow, WatchRule, parse_rule
from tracker.pipeline.ports import HubReader, Store

log = logging.getLogger("tracker.watchrules")  # the name operators filter logs by, not the module path


@dataclass(frozen=True)
class Evaluation:
    rule_id: int
    matched: int
    added: tuple[RepoId, ...]
    dropped: tuple[RepoId, ...]
    capped: bool
    pages: int


class RuleKeeper:
    """Evaluates the rules that are due and brings the watch list in line with what they match."""

    def __init__(self, store: Store, hub: HubReader, *, every: float) -> None:
        self.store = store
        self.rules = store.rules
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
            self.rules.record_error(rule.id, first_line(exc))
            return None
        matched = list(dict.fromkeys(listing.repo_ids))
        capped = len(matched) > rule.max_repos
        # A listing cut short by the cap is whole as far as the rule goes; one that ended early (a page
        # served twice) is not: the repos it did not list are kept.
        complete = listing.complete or capped
        if not complete:
            log.warning("watch rule %d (%s): the Hub's listing ended early (a page served twice); its repos not "
                        "listed are kept until a complete listing", rule.id, rule.text)
        applied = self.rules.apply(rule, matched, now=now, complete=complete)
        added, dropped = applied.added, applied.dropped
        if capped and not rule.capped:
            log.warning("watch rule %d (%s) matches more than its cap of %d repos: watching the first %d "
                        "(raise it with `tracker watch add --rule '%s' --max N`)", rule.id, rule.text,
                        rule.max_repos, rule.max_repos, rule.text)
        if added or dropped:
            log.info("watch rule %d (%s): %d repo(s) added, %d dropped after the grace", rule.id, rule.text,
                     len(added), len(dropped))
        return Evaluation(rule_id=rule.id, matched=len(matched), added=added, dropped=dropped,
                          capped=capped, pages=listing.pages)


__all__ = ["DEFAULT_GRACE", "DEFAULT_MAX", "Evaluation", "RuleKeeper", "RuleRow", "WatchRule", "parse_rule"]
