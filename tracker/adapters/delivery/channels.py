"""The delivery channels, by kind: how an alert is written for each, and how its URL is shown.

A channel is one small class here and one entry in :data:`CHANNELS`; the kinds themselves are
:class:`tracker.core.model.ChannelKind`. The worker, the use cases and the surfaces look a
subscription's channel up by its kind, never compare kind strings.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import httpx2

from tracker.adapters.delivery.slack import slack_message
from tracker.adapters.delivery.webhook import new_secret, signed_headers, webhook_body
from tracker.core.advisory.record import parse_advisory
from tracker.core.model import ChannelKind
from tracker.core.store_types import DeliveryRow, SubscriptionRow


@dataclass(frozen=True)
class Sending:
    """What a channel needs besides the delivery: the tracker's public URL (links) and the clock (signatures)."""

    tracker_url: str | None
    clock: Callable[[], datetime]


class Channel(Protocol):
    def new_secret(self) -> str | None:
        """The signing secret a new subscription gets (shown once), or None for a channel that signs nothing."""

    def payload(self, delivery: DeliveryRow, sub: SubscriptionRow, sending: Sending) -> tuple[bytes, dict[str, str]]:
        """The body posted and its headers."""

    def shown_url(self, url: str) -> str:
        """The subscription's URL as listed: never a credential."""


class SlackChannel:
    """A Slack incoming webhook: Block Kit messages; its URL is a credential, so only the host is shown."""

    def new_secret(self) -> str | None:
        return None

    def payload(self, delivery: DeliveryRow, sub: SubscriptionRow, sending: Sending) -> tuple[bytes, dict[str, str]]:
        message = slack_message(delivery.event_type, parse_advisory(delivery.record), tracker_url=sending.tracker_url)
        return json.dumps(message, ensure_ascii=False).encode(), {"Content-Type": "application/json"}

    def shown_url(self, url: str) -> str:
        parsed = httpx2.URL(url)
        return f"{parsed.scheme}://{parsed.netloc.decode()}/…"


class WebhookChannel:
    """Any HTTPS endpoint: the record in a Standard Webhooks envelope, signed; a query string may hold a token."""

    def new_secret(self) -> str | None:
        return new_secret()

    def payload(self, delivery: DeliveryRow, sub: SubscriptionRow, sending: Sending) -> tuple[bytes, dict[str, str]]:
        body = webhook_body(delivery.event_type, delivery.record, delivery.created_at)
        assert sub.secret is not None, "a webhook subscription has a secret"
        return body, signed_headers(sub.secret, delivery.webhook_id, body, sending.clock())

    def shown_url(self, url: str) -> str:
        return str(httpx2.URL(url).copy_with(query=None))


CHANNELS: Mapping[ChannelKind, Channel] = {ChannelKind.SLACK: SlackChannel(), ChannelKind.WEBHOOK: WebhookChannel()}


def channel(kind: str) -> Channel:
    """The channel of a subscription's ``kind`` (a ValueError for a kind no channel has)."""
    return CHANNELS[ChannelKind(kind)]
