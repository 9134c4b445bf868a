"""Subscriptions and deliveries: who is alerted about what, and the outbox of alerts (listed, retried)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from typing import TYPE_CHECKING

from tracker.adapters.delivery import TargetGuard, TargetRefused, parse_categories, parse_target
from tracker.adapters.delivery.channels import channel
from tracker.core.errors import ConfigError, NotFound, TrackerError
from tracker.core.model import ChannelKind
from tracker.core.store_types import DeliveryRow, SubscriptionRow

if TYPE_CHECKING:
    from tracker.app import Tracker

__all__ = ["ONE_CHANNEL", "NewSubscription", "NotRetried", "Subscribed", "Subscriptions", "redacted_url"]

ONE_CHANNEL = "give exactly one of slack or webhook: the URL alerts go to (--slack URL or --webhook URL)"


class NotRetried(TrackerError):
    """A delivery asked to be sent again that is not dead (exit 1, one line)."""


@dataclass(frozen=True)
class NewSubscription:
    """A subscription as asked for: ``kind`` is ``slack`` or ``webhook``, ``url`` where alerts go."""

    target: str  # a repo id, an owner, or "*"
    kind: str
    url: str
    min_severity: str = "info"
    categories: Sequence[str] = ()

    @classmethod
    def to_one_of(cls, target: str, *, slack: str | None, webhook: str | None, min_severity: str = "info",
                  categories: Sequence[str] = ()) -> NewSubscription:
        """The subscription to whichever of ``slack`` and ``webhook`` is given; ConfigError unless exactly one."""
        if (slack is None) == (webhook is None):
            raise ConfigError(ONE_CHANNEL)
        kind, url = (ChannelKind.SLACK.value, slack) if slack is not None else (ChannelKind.WEBHOOK.value, webhook)
        assert url is not None
        return cls(target=target, kind=kind, url=url, min_severity=min_severity, categories=categories)


def redacted_url(kind: str, url: str) -> str:
    """A subscription's URL as shown: a Slack webhook URL is a credential (only its host is shown), and a
    webhook's query string may hold a token (dropped)."""
    return channel(kind).shown_url(url)


@dataclass(frozen=True)
class Subscribed:
    """The subscription stored, its signing secret (webhooks only: shown once), and whether any
    watched repo is covered by its target (an alert needs one; the watch may come later)."""

    subscription: SubscriptionRow
    secret: str | None
    watched: bool


@dataclass(frozen=True)
class Subscriptions:
    """Subscriptions and their deliveries (the outbox)."""

    tracker: Tracker

    def subscribe(self, wanted: NewSubscription) -> Subscribed:
        """Store a subscription. Raises ConfigError for a bad target or category, TargetRefused for a URL the
        delivery guard refuses (a private address, not http(s))."""
        try:
            target = parse_target(wanted.target)
            categories = parse_categories(wanted.categories)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
        tracker = self.tracker
        # A Slack webhook is Slack's own host: one that does not resolve now (a subscription made offline) is
        # kept, and resolved and checked at every send like any target.
        TargetGuard(tracker.settings.delivery.allow_hosts).check(wanted.url,
                                                                 unresolved_ok=wanted.kind == ChannelKind.SLACK)
        secret = channel(wanted.kind).new_secret()
        row = tracker.store.outbox.add_subscription(target=target, kind=wanted.kind, url=wanted.url, secret=secret,
                                                    min_severity=wanted.min_severity, categories=categories,
                                                    now=tracker.clock())
        return Subscribed(subscription=row, secret=secret, watched=self._covers_a_watched_repo(target))

    def _covers_a_watched_repo(self, target: str) -> bool:
        if target == "*":
            return True
        watched = [r.repo_id.lower() for r in self.tracker.store.repos.all()]
        if "/" in target:
            return target.lower() in watched
        return any(r.startswith(target.lower() + "/") for r in watched)

    def unsubscribe(self, subscription_id: int) -> int:
        """Remove a subscription; how many of its deliveries not yet sent were dropped. Raises NotFound."""
        dropped = self.tracker.store.outbox.remove_subscription(subscription_id)
        if dropped is None:
            raise NotFound(f"no subscription {subscription_id}")
        return dropped

    def all(self) -> list[SubscriptionRow]:
        """The subscriptions (their secrets stay in the store)."""
        return self.tracker.store.outbox.list_subscriptions()

    def deliveries(self, *, failed: bool = False) -> list[DeliveryRow]:
        """Alerts queued, sent, being retried and dead, oldest first; ``failed``: dead and being retried only."""
        return self.tracker.store.outbox.list_deliveries(failed=failed)

    def retry(self, delivery_id: int) -> None:
        """Queue a dead delivery again (with the same webhook-id). NotFound when there is none by that id,
        NotRetried when it is not dead."""
        outbox = self.tracker.store.outbox
        row = outbox.get_delivery(delivery_id)
        if row is None:
            raise NotFound(f"no delivery {delivery_id}")
        if not outbox.retry_delivery(delivery_id, now=self.tracker.clock()):
            raise NotRetried(f"delivery {delivery_id} is {row.state}, not dead: only a dead delivery is retried")

    def retry_dead(self) -> int:
        """Queue every dead delivery again, oldest first; how many were."""
        outbox = self.tracker.store.outbox
        dead = [d.id for d in outbox.list_deliveries(failed=True) if d.state == "dead"]
        return sum(outbox.retry_delivery(i, now=self.tracker.clock()) for i in dead)


def daemon_would_refuse(config: str | None, url: str, *, kind: str, environ: Mapping[str, str] | None = None,
                        config_path: PathLike[str] | str | None = None) -> str | None:
    """Why a daemon reading only the config file would refuse ``url``, when this environment allows it through
    ``TRACKER_DELIVERY_ALLOW_HOSTS`` alone (a `tracker run` started elsewhere does not have it); else None."""
    from tracker.adapters.settings import load_settings, load_with_sources

    env = dict(os.environ if environ is None else environ)
    _, sources = load_with_sources(config, env)
    origin = sources.get("delivery.allow_hosts", "")
    if not origin.startswith("env "):
        return None  # the file's setting (or none): the daemon reads the same
    variable = origin.removeprefix("env ")
    from_file = load_settings(config, env={k: v for k, v in env.items() if k != variable})
    try:
        TargetGuard(from_file.delivery.allow_hosts).check(url, unresolved_ok=kind == ChannelKind.SLACK)
    except TargetRefused as exc:
        where = config_path or "config/tracker.toml"
        return (f"{variable} of this shell allows this target, the config file does not ({exc}); a `tracker run` "
                f"without {variable} will not send to it: set [delivery] allow_hosts once in {where}")
    return None
