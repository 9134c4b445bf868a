"""Which subscription hears of which advisory event, and under which idempotency key. Pure.

A subscription names a target (a repo ``owner/name``, an ``owner``, or ``*``), a minimum
severity and optionally categories. Each (subscription, event) pair becomes one outbox row
whose ``webhook_id`` is derived from the subscription, the advisory, the event type and the
record's ``modified``: replaying the transaction that stored the advisory can only produce the
same key again, never a second one for the same announcement.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from tracker.core.advisory.record import Advisory
from tracker.core.model import CATEGORIES, AdvisoryEvent, Severity, validate_repo_id

EVERYTHING = "*"

__all__ = ["CATEGORIES", "parse_categories", "parse_target", "record_categories", "target_covers", "wants",
           "webhook_id"]


def parse_target(text: str) -> str:
    """``*``, an owner, or a repo id, as given; ValueError saying what is wrong otherwise."""
    value = text.strip()
    if value == EVERYTHING:
        return value
    try:
        return validate_repo_id(value) if "/" in value else validate_repo_id(f"{value}/x").split("/")[0]
    except ValueError:
        raise ValueError(f"invalid target {text!r}: expected a repo id (owner/name), an owner, or '*'") from None


def parse_categories(values: Iterable[str]) -> tuple[str, ...]:
    out = []
    for value in values:
        value = value.strip().lower()
        if value not in CATEGORIES:
            raise ValueError(f"unknown category {value!r}: expected one of {', '.join(CATEGORIES)}")
        out.append(value)
    return tuple(sorted(set(out)))


def target_covers(target: str, repo_id: str) -> bool:
    return target == EVERYTHING or target == repo_id or (
        "/" not in target and repo_id.split("/", 1)[0].lower() == target.lower())


def wants(target: str, min_severity: str, categories: Iterable[str], event: AdvisoryEvent) -> bool:
    """Whether a subscription with these filters hears of ``event``."""
    if not target_covers(target, event.repo_id):
        return False
    try:
        severity = Severity(event.severity)
    except ValueError:
        severity = Severity.INFO
    if not severity.at_least(Severity(min_severity)):
        return False
    wanted = set(categories)
    return not wanted or bool(wanted & set(event.categories))


def webhook_id(subscription_id: int, event: AdvisoryEvent) -> str:
    """The Standard Webhooks ``webhook-id``: stable for one announcement to one subscriber."""
    modified = str(event.record.get("modified", ""))
    key = f"{subscription_id}|{event.advisory_id}|{event.type.value}|{modified}"
    return "msg_" + hashlib.sha256(key.encode()).hexdigest()[:32]


def record_categories(record: Advisory) -> tuple[str, ...]:
    return record.specific.categories
