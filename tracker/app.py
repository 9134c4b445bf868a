"""The composition root: the one place that picks implementations.

The CLI, the daemon, the HTTP API and the tests all build a Tracker here.
"""

from __future__ import annotations

from tracker.advisor import Advisor
from tracker.hub import HubClient
from tracker.service import Tracker
from tracker.settings import Settings
from tracker.store import SqlStore, open_store


def make_hub(settings: Settings) -> HubClient:
    return HubClient(
        settings.hub_endpoint,
        timeout=settings.hub_timeout,
        max_retries=settings.hub_max_retries,
        max_wait=settings.hub_max_wait,
    )


def make_tracker(
    settings: Settings,
    *,
    store: SqlStore | None = None,
    hub: HubClient | None = None,
    auto_upgrade: bool | None = None,
) -> Tracker:
    store = store or open_store(settings.database_url, auto_upgrade=auto_upgrade)
    tracker = Tracker(settings, store, hub or make_hub(settings))
    if settings.osv_api_url:
        from tracker.osvdev import OsvClient

        tracker.osv = OsvClient(settings.osv_api_url, cache={})
    advisor = Advisor(tracker)
    tracker.advisor = advisor
    tracker.after_revision.append(advisor.on_revision)
    tracker.after_event.append(advisor.on_event)
    return tracker
