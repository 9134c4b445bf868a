"""The application layer: what the CLI, the HTTP API and the pages do, one service per noun.

Each service is built on the :class:`tracker.app.Tracker` (``Watching(tracker)``, or all of them at once with
``Services.of(tracker)``); its methods take typed arguments and return typed results (dataclasses and the
store's rows), and the surfaces only parse input and format output (text and exit codes in the CLI, JSON
and statuses in the API, HTML in the pages). The services:

- :class:`Watching` (watching.py): the watch list and the watch rules, checked against the Hub;
- :class:`Polling` (polling.py): how the polls are doing (backlog, outages, health);
- :class:`Revisions` (revisions.py): revisions read or listed from the Hub, diffs, estimates' inputs,
  events, re-analysis;
- :class:`Advisories` (advisories.py): which advisories affect a revision, lists, feeds, the pages' reads;
- :class:`Subscriptions` (subscriptions.py): subscriptions and the outbox of deliveries;
- :class:`ApiTokens` (tokens.py): the API's bearer tokens;
- ``Scanning`` (scanning.py, imported from there: the scan's libraries load only for a scan): scan a
  codebase, audit a Hugging Face cache (built on the settings and the user's tracker, opened only when
  there is a store to read);
- verifying.py: ``verify``, two revisions run and what moved measured (``tracker verify``);
- database.py: the schema brought to the newest migration (`tracker init`).

The errors, by what the caller did:

- :class:`~tracker.core.errors.ConfigError`: a bad argument (a target, a category, a token name,
  a rule): exit 2 in the CLI, 400 in the API;
- :class:`~tracker.core.errors.NotFound` and :class:`~tracker.core.errors.NotWatched`: no subscription,
  token, rule, delivery or watched repo by that id or name: exit 1, 404;
- :class:`~tracker.adapters.delivery.TargetRefused`: a URL the delivery guard refuses: exit 1, 400;
- :class:`~tracker.services.hubcheck.ArgumentError`: what the Hub said of an argument, named (exit 1);
- :class:`~tracker.services.subscriptions.NotRetried`: a delivery that is not dead (exit 1);
- the store's and the Hub's own errors, as everywhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tracker.services.advisories import Advisories, AdvisoryPage, FeedWanted
from tracker.services.hubcheck import ArgumentError, Existence, close_matches, existence, missing_message
from tracker.services.polling import Figures, Polling
from tracker.services.revisions import Compared, Reanalysed, RevisionListing, Revisions
from tracker.services.subscriptions import (
    ONE_CHANNEL,
    NewSubscription,
    NotRetried,
    Subscribed,
    Subscriptions,
    daemon_would_refuse,
    redacted_url,
)
from tracker.services.tokens import ApiTokens
from tracker.services.watching import RuleAdded, RuleWithRepos, Watched, Watching

if TYPE_CHECKING:
    from tracker.app import Tracker

__all__ = [
    "ONE_CHANNEL", "Advisories", "AdvisoryPage", "ApiTokens", "ArgumentError", "Compared", "Existence",
    "FeedWanted", "Figures", "NewSubscription", "NotRetried", "Polling", "Reanalysed", "RevisionListing",
    "Revisions", "RuleAdded", "RuleWithRepos", "Services", "Subscribed", "Subscriptions", "Watched", "Watching",
    "close_matches", "daemon_would_refuse", "existence", "missing_message", "redacted_url",
]


@dataclass(frozen=True)
class Services:
    """Every service, on one Tracker."""

    watching: Watching
    polling: Polling
    revisions: Revisions
    advisories: Advisories
    subscriptions: Subscriptions
    tokens: ApiTokens

    @classmethod
    def of(cls, tracker: Tracker) -> Services:
        return cls(watching=Watching(tracker), polling=Polling(tracker), revisions=Revisions(tracker),
                   advisories=Advisories(tracker), subscriptions=Subscriptions(tracker), tokens=ApiTokens(tracker))
